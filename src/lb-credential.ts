// The credential a load-balanced worker's route server asks of every request (docs/lb.md, "Worker credentials").
//
// A worker listens on a TCP port that any process on its network can reach, so it answers only requests that
// carry this value in `x-svc-lb-credential`. Both sides derive it from what they already hold, so it needs no
// state of its own:
//   - the worker from its token (SVC_WORKER_TOKEN);
//   - the service from the token's hash, which it keeps in its keys table under the worker's id (the token is
//     never stored) and recomputes from the token the worker authenticates its `register` call with.
// A restarted service, one that adopted a worker after a kill -9, or another replica of a cluster learns it at
// the worker's next registration, which every one of those paths goes through before the worker gets traffic.
// It is an HMAC of the hash, not the hash itself: the value a worker receives proves nothing anywhere else.

import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/** The request header that carries the credential (lower case, as node:http names it). */
export const LB_CREDENTIAL_HEADER = "x-svc-lb-credential";

const PURPOSE = "svc load-balanced worker credential v1";

/** The credential of the worker whose token hashes to `keyHash` (hex sha256, the keys table's `hash`). Pure. */
export function lbCredentialOfKeyHash(keyHash: string): string {
  return createHmac("sha256", Buffer.from(keyHash, "hex")).update(PURPOSE).digest("base64url");
}

/** The credential of the worker holding `token` (the same as of its stored hash). Pure. */
export function lbCredentialOfToken(token: string): string {
  return lbCredentialOfKeyHash(createHash("sha256").update(token).digest("hex"));
}

/**
 * Whether `presented` (the header as node:http gives it) is `expected`, compared in constant time. A repeated
 * header (node joins them, or gives a list) never matches. Pure.
 */
export function credentialMatches(presented: string | string[] | undefined, expected: Buffer): boolean {
  if (typeof presented !== "string") return false;
  const given = Buffer.from(presented, "latin1");
  // The length is no secret (every credential has the same); only equal lengths can be compared.
  return given.length === expected.length && timingSafeEqual(given, expected);
}
