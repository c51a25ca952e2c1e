// Signatures of the Standard Webhooks specification (https://www.standardwebhooks.com): every delivery carries
// `webhook-id` (the message, the same on every attempt), `webhook-timestamp` (seconds, the attempt's time) and
// `webhook-signature`: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under the endpoint's secret, several
// separated by spaces while a rotated-out secret is still honoured. Secrets are `whsec_` and the base64 of
// random bytes, as the specification's libraries read them. Pure, but for the random bytes of a new secret.

import { createHmac, randomBytes } from "node:crypto";

export const SECRET_PREFIX = "whsec_";
/** 32 random bytes: the specification asks for 24 to 64. */
const SECRET_BYTES = 32;

export function newSigningSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString("base64");
}

/** The key bytes of a `whsec_` secret. */
export function secretKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error("a webhook signing secret starts with whsec_");
  return Buffer.from(secret.slice(SECRET_PREFIX.length), "base64");
}

/** One signature: `v1,<base64>` of `msgId.timestamp.body`; `timestamp` in seconds. */
export function sign(secret: string, msgId: string, timestamp: number, body: string): string {
  const mac = createHmac("sha256", secretKey(secret)).update(`${msgId}.${timestamp}.`).update(body).digest("base64");
  return `v1,${mac}`;
}

/**
 * The three headers of a delivery at `nowMs`, signed with each of `secrets` (the current one first). No secret:
 * no signature header (a receiver cannot tell such a delivery from a forged one, and docs/webhooks.md says so).
 */
export function signedHeaders(secrets: readonly string[], msgId: string, nowMs: number, body: string): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  const headers: Record<string, string> = { "webhook-id": msgId, "webhook-timestamp": String(timestamp) };
  if (secrets.length > 0) headers["webhook-signature"] = secrets.map((s) => sign(s, msgId, timestamp, body)).join(" ");
  return headers;
}
