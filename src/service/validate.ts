// Validation of job API bodies. Pure: returns the parsed submission or the list of `$.path: message` errors.

import { isPlainObject } from "./http.js";

export const MAX_TTL_MS = 7 * 24 * 3600_000;
export const MAX_EXECUTION_TIMEOUT_MS = 24 * 3600_000;
/**
 * Properties other clients of this job API send that svc accepts and ignores: `s3Config` is for workers that
 * upload their output to a bucket themselves (svc keeps outputs in its own store). Any other unknown top-level
 * member is refused (422), so a typo never silently drops a setting.
 */
const IGNORED_PROPERTIES = new Set(["s3Config"]);

export interface Submission {
  input: unknown;
  function?: string;
  webhook?: string;
  executionTimeoutMs?: number;
  ttlMs?: number;
  lowPriority?: boolean;
}

export function validateSubmission(body: unknown, functions: readonly string[]): { value?: Submission; errors: string[] } {
  const errors: string[] = [];
  if (!isPlainObject(body)) return { errors: ["$: must be a JSON object like {\"input\": {...}}"] };
  for (const key of Object.keys(body)) {
    if (!["input", "function", "webhook", "webhookV2", "policy"].includes(key) && !IGNORED_PROPERTIES.has(key)) {
      errors.push(`$.${key}: unknown property`);
    }
  }
  const value: Submission = { input: body.input };
  if (body.input === undefined || body.input === null) errors.push("$.input: is required");
  // Optional members sent as null (typed clients do) mean absent, as on the OpenAI route.
  if (body.function === undefined || body.function === null) {
    if (functions.length > 1) errors.push(`$.function: is required: this endpoint serves several functions (${functions.join(", ")})`);
  } else {
    if (typeof body.function !== "string" || body.function.length === 0) errors.push("$.function: must be a non-empty string");
    else if (functions.length > 0 && !functions.includes(body.function)) {
      errors.push(`$.function: the endpoint has no function "${body.function}" (it serves: ${functions.join(", ")})`);
    } else value.function = body.function;
  }
  // webhookV2 is the job client's newer name for the same thing: the job record is POSTed there when the job
  // ends. Either may be sent; both only when they name the same URL.
  for (const key of ["webhook", "webhookV2"] as const) {
    const v = body[key];
    if (v === undefined || v === null) continue;
    let ok = false;
    if (typeof v === "string") {
      try {
        ok = ["http:", "https:"].includes(new URL(v).protocol);
      } catch {
        ok = false;
      }
    }
    if (!ok) errors.push(`$.${key}: must be an http(s) URL`);
    else if (value.webhook !== undefined && value.webhook !== v) errors.push("$.webhookV2: names another URL than webhook; send one of them");
    else value.webhook = v as string;
  }
  if (body.policy !== undefined && body.policy !== null) {
    if (!isPlainObject(body.policy)) errors.push("$.policy: must be an object");
    else {
      const p = body.policy;
      for (const key of Object.keys(p)) {
        if (!["executionTimeout", "ttl", "lowPriority"].includes(key)) errors.push(`$.policy.${key}: unknown property`);
      }
      const int = (key: string, min: number, max: number): number | undefined => {
        const v = p[key];
        if (v === undefined || v === null) return undefined;
        if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
          errors.push(`$.policy.${key}: must be an integer (ms) from ${min} to ${max}`);
          return undefined;
        }
        return v;
      };
      value.executionTimeoutMs = int("executionTimeout", 1, MAX_EXECUTION_TIMEOUT_MS);
      value.ttlMs = int("ttl", 1, MAX_TTL_MS);
      if (p.lowPriority !== undefined && p.lowPriority !== null) {
        if (typeof p.lowPriority !== "boolean") errors.push("$.policy.lowPriority: must be a boolean");
        else value.lowPriority = p.lowPriority;
      }
    }
  }
  return errors.length > 0 ? { errors } : { value, errors };
}
