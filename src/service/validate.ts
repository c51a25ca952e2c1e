// Validation of job API bodies. Pure: returns the parsed submission or the list of `$.path: message` errors.

import { isPlainObject } from "./http.js";

export const MAX_TTL_MS = 7 * 24 * 3600_000;
export const MAX_EXECUTION_TIMEOUT_MS = 24 * 3600_000;
/** Properties other clients of this job API send that svc accepts and ignores. */
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
    if (!["input", "function", "webhook", "policy"].includes(key) && !IGNORED_PROPERTIES.has(key)) {
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
  if (body.webhook !== undefined && body.webhook !== null) {
    let ok = false;
    if (typeof body.webhook === "string") {
      try {
        ok = ["http:", "https:"].includes(new URL(body.webhook).protocol);
      } catch {
        ok = false;
      }
    }
    if (ok) value.webhook = body.webhook as string;
    else errors.push("$.webhook: must be an http(s) URL");
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
