// What every route of the management API (and the features' routes beside it: secrets, GPUs, webhooks, volume
// keys) asks of a request: that the caller's key may read or change that family of records, and a JSON object body.

import type { IncomingMessage } from "node:http";
import type { Principal } from "../keys/auth.js";
import { isPlainObject, parseJson, readBody } from "./wire.js";
import { SMALL_BODY_LIMIT } from "./body-limits.js";
import { HttpProblem } from "./problems.js";

export type ManagementFamily = "volumes" | "endpoints" | "templates" | "keys" | "secrets" | "gpus" | "registries";

/**
 * 403 unless the key may do this. Management reads need `management:read`, `management:write`, `deploy` or
 * `admin`; writes need `management:write`, `deploy` or `admin`; keys need `admin`. Worker tokens and job-only
 * keys get nothing. What decides which code workers run needs more: requireDeploy.
 */
export function requireAccess(p: Principal, family: ManagementFamily, write: boolean): void {
  if (p.worker) throw new HttpProblem(403, "A worker token cannot call the management API");
  const s = p.scopes;
  if (s.includes("admin")) return;
  if (family === "keys") throw new HttpProblem(403, "Managing API keys needs a key with the admin scope");
  const writes = s.includes("management:write") || s.includes("deploy");
  if (write ? writes : writes || s.includes("management:read")) return;
  throw new HttpProblem(
    403,
    `This API key may not ${write ? "change" : "read"} ${family} (it needs the ${write ? "management:write" : "management:read"} scope)`,
  );
}

/** A management request body: JSON object required (400 otherwise). */
export async function readObjectBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const body = parseJson(await readBody(req, SMALL_BODY_LIMIT));
  if (body === undefined) throw new HttpProblem(400, "This request needs a JSON object body");
  if (!isPlainObject(body)) throw new HttpProblem(400, "The request body must be a JSON object");
  return body;
}
