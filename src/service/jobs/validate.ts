// Validation of job API bodies. Pure: returns the parsed submission or the list of `$.path: message` errors.

import { MAX_EXECUTION_TIMEOUT_MS, MAX_TTL_MS } from "../http/api-schemas.js";
import { isPlainObject } from "../http/wire.js";
import { SCHEMAS, validate } from "../http/schema.js";
import type { Submission } from "../engine/types.js";
import type { WebhookEvent } from "../webhooks/events.js";
import type { WebhookRefusal, WebhookRule } from "../webhooks/address-policy.js";

export { MAX_EXECUTION_TIMEOUT_MS, MAX_TTL_MS };

export type { Submission };

/** A copy of `body` without the members sent as null: typed clients send absent optional members as null. Pure. */
function withoutNulls(body: Record<string, unknown>): Record<string, unknown> {
  // No prototype: a member named `__proto__` stays a member (an unknown one), it does not become the prototype.
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [k, v] of Object.entries(body)) if (v !== null) out[k] = isPlainObject(v) && k === "policy" ? withoutNulls(v) : v;
  return out;
}

/**
 * The submission, or every failure: the structure by the RunRequest schema that /openapi.json publishes (members,
 * types, ranges), then what a schema cannot say (the endpoint's functions, URL schemes, one webhook, and where the
 * webhook may go as far as its URL tells: `webhookRefusal`, the address rules; `webhookRule` names the one that refused).
 */
export function validateSubmission(
  raw: unknown,
  functions: readonly string[],
  webhookRefusal: (url: string) => WebhookRefusal | undefined = () => undefined,
  /** Asked only when the body names an `s3Config` (it reads the store): most submissions never need it. */
  ownVolumeIds: () => readonly string[] = () => [],
): { value?: Submission; errors: string[]; webhookRule?: WebhookRule } {
  if (!isPlainObject(raw)) return { errors: ['$: must be a JSON object like {"input": {...}}'] };
  const body = withoutNulls(raw);
  const errors = validate(SCHEMAS.RunRequest, body);
  const value: Submission = { input: body.input };
  if (body.function === undefined) {
    if (functions.length > 1) errors.push(`$.function: is required: this endpoint serves several functions (${functions.join(", ")})`);
  } else if (typeof body.function === "string") {
    if (body.function.length === 0) errors.push("$.function: must be a non-empty string");
    else if (functions.length > 0 && !functions.includes(body.function)) {
      errors.push(`$.function: the endpoint has no function "${body.function}" (it serves: ${functions.join(", ")})`);
    } else value.function = body.function;
  }
  // webhookV2 is the job client's newer name for the same thing: the job record is POSTed there when the job
  // ends. Either may be sent; both only when they name the same URL.
  let webhookRule: WebhookRule | undefined;
  for (const key of ["webhook", "webhookV2"] as const) {
    const v = body[key];
    if (typeof v !== "string") continue;
    let ok = false;
    try {
      ok = ["http:", "https:"].includes(new URL(v).protocol);
    } catch {
      ok = false;
    }
    const refused = ok ? webhookRefusal(v) : undefined;
    if (!ok) {
      errors.push(`$.${key}: must be an http(s) URL`);
      webhookRule = "scheme";
    } else if (refused) {
      errors.push(`$.${key}: ${refused.message}`);
      webhookRule = refused.rule;
    } else if (value.webhook !== undefined && value.webhook !== v) errors.push("$.webhookV2: names another URL than webhook; send one of them");
    else value.webhook = v;
  }
  if (Array.isArray(body.webhookEvents) && body.webhookEvents.every((e) => typeof e === "string")) {
    if (value.webhook === undefined) errors.push("$.webhookEvents: names events of a webhook; send webhook too");
    else value.webhookEvents = [...new Set(body.webhookEvents as WebhookEvent[])];
  }
  if (body.s3Config !== undefined) {
    const refused = s3ConfigErrors(body.s3Config, ownVolumeIds());
    if (refused.length > 0) errors.push(...refused);
    else value.s3Bucket = (body.s3Config as { bucketName: string }).bucketName;
  }
  if (isPlainObject(body.policy)) {
    const p = body.policy;
    if (typeof p.executionTimeout === "number") value.executionTimeoutMs = p.executionTimeout;
    if (typeof p.ttl === "number") value.lifetimeMs = p.ttl;
    if (typeof p.lowPriority === "boolean") value.lowPriority = p.lowPriority;
  }
  if (errors.length > 0) return webhookRule ? { errors, webhookRule } : { errors };
  return { value, errors };
}

/**
 * What is wrong with a job's `s3Config`: its bucket must be one of the endpoint owner's network volumes, by id
 * (the bucket of svc's S3 API), and its other members strings. A bucket anywhere else is refused rather than
 * carried: svc's workers upload to svc's own S3 API only. Pure.
 */
export function s3ConfigErrors(s3Config: unknown, ownVolumeIds: readonly string[]): string[] {
  if (!isPlainObject(s3Config)) return ["$.s3Config: must be an object {accessId, accessSecret, bucketName, endpointUrl}"];
  const errors: string[] = [];
  for (const k of ["accessId", "accessSecret", "endpointUrl"])
    if (s3Config[k] !== undefined && typeof s3Config[k] !== "string") errors.push(`$.s3Config.${k}: must be a string`);
  const bucket = s3Config.bucketName;
  if (typeof bucket !== "string" || bucket.length === 0)
    errors.push("$.s3Config.bucketName: is required: the id of one of your network volumes (svc volume list), the bucket of svc's S3 API");
  else if (!ownVolumeIds.includes(bucket))
    errors.push(
      `$.s3Config.bucketName: "${bucket}" is not one of your network volumes: name one by its id (svc volume list); svc's workers upload to svc's own S3 API only`,
    );
  return errors;
}
