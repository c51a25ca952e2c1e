// The secrets routes (management API scopes: reading names needs management:read, changing needs
// management:write; values are never answered):
//
//   GET    /v1/secrets                         the user's secrets: {name, app, env, createdAt, updatedAt}
//   PUT    /v1/secrets/{name}                  {value, app?, env?} -> set it; the endpoints whose workers roll
//   DELETE /v1/secrets/{name}?app=&env=        forget it

import type { IncomingMessage, ServerResponse } from "node:http";
import { DEPLOY_NAME_RULE, isDeployName } from "../../deploy/names.js";
import { SECRET_NAME_PATTERN } from "svc/internal";
import { reservedEnvProblems } from "svc/internal";
import type { Principal } from "../keys/auth.js";
import { sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import { SCHEMAS, validate } from "../http/schema.js";
import { readObjectBody, requireAccess } from "../http/management-request.js";
import type { EndpointRow } from "../store/types.js";
import type { Secrets, SecretScope } from "./index.js";

export const MAX_SECRET_BYTES = 64 * 1024;

/** The scope named by `app`/`env` (body or query), or the failures. Pure. */
export function scopeOf(app: unknown, env: unknown, at: string): { scope: SecretScope; errors: string[] } {
  const errors: string[] = [];
  const scope: SecretScope = {};
  for (const [key, v] of [
    ["app", app],
    ["env", env],
  ] as const) {
    if (v === undefined || v === null || v === "") continue;
    if (typeof v !== "string" || !isDeployName(v)) errors.push(`${at}${key}: must be a name of ${DEPLOY_NAME_RULE}`);
    else scope[key] = v;
  }
  if (scope.env !== undefined && scope.app === undefined) errors.push(`${at}env: an environment's secret needs its app too`);
  return { scope, errors };
}

/** The request to set a secret: its value and scope, or every failure. Pure. */
export function planSetSecret(body: Record<string, unknown>): { value?: string; scope: SecretScope; errors: string[] } {
  const errors = validate(SCHEMAS.SetSecretRequest, body);
  const value = body.value;
  if (typeof value === "string" && Buffer.byteLength(value) > MAX_SECRET_BYTES) errors.push(`$.value: must be at most ${MAX_SECRET_BYTES} bytes`);
  const { scope, errors: scopeErrors } = scopeOf(body.app, body.env, "$.");
  for (const e of scopeErrors) if (!errors.some((x) => x.startsWith(e.split(":")[0]!))) errors.push(e);
  return { value: typeof value === "string" ? value : undefined, scope, errors };
}

/** The user's endpoints that get this secret (by name, in its scope). Pure. */
export function endpointsUsing(endpoints: Iterable<EndpointRow>, userId: string, name: string, scope: SecretScope): EndpointRow[] {
  return [...endpoints].filter(
    (e) =>
      e.userId === userId &&
      (e.resource.secrets ?? []).includes(name) &&
      (scope.app === undefined || e.app === scope.app) &&
      (scope.env === undefined || e.env === scope.env),
  );
}

function checkName(name: string): void {
  if (!SECRET_NAME_PATTERN.test(name)) {
    throw new HttpProblem(422, `"${name}" is not a secret name`, {
      errors: ["secret names are environment variable names: letters, digits and _, not starting with a digit, and not SVC_..."],
    });
  }
  // A secret reaches workers as the variable of its name: a loader variable would make them run its value.
  const reserved = reservedEnvProblems([name], "");
  if (reserved.length > 0) throw new HttpProblem(422, `"${name}" is not a secret name`, { errors: reserved });
}

export async function secretRoute(
  secrets: Secrets,
  endpoints: Iterable<EndpointRow>,
  p: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  name: string | undefined,
): Promise<void> {
  const method = req.method ?? "GET";
  if (name === undefined) {
    req.resume();
    if (method !== "GET") throw new HttpProblem(405, `${method} is not allowed here; use GET`, { headers: { allow: "GET" } });
    requireAccess(p, "secrets", false);
    return sendJson(res, secrets.list(p.userId));
  }
  if (method !== "PUT" && method !== "DELETE") {
    req.resume();
    throw new HttpProblem(405, `${method} is not allowed here; use PUT or DELETE`, { headers: { allow: "PUT, DELETE" } });
  }
  requireAccess(p, "secrets", true);
  if (method === "PUT") {
    // The body first: a malformed body is a 400 whatever the name says.
    const body = await readObjectBody(req);
    checkName(name);
    const plan = planSetSecret(body);
    if (plan.errors.length > 0) throw new HttpProblem(422, "The secret is not valid", { errors: plan.errors });
    const { info, created } = await secrets.set(p.userId, name, plan.value!, plan.scope);
    const rolling = endpointsUsing(endpoints, p.userId, name, plan.scope).map((e) => ({ id: e.id, name: e.name, app: e.app, env: e.env }));
    return sendJson(res, { ...info, created, rolling }, created ? 201 : 200);
  }
  req.resume();
  const url = new URL(req.url ?? "/", "http://svc.invalid");
  const { scope, errors } = scopeOf(url.searchParams.get("app") ?? undefined, url.searchParams.get("env") ?? undefined, "?");
  if (errors.length > 0) throw new HttpProblem(422, "The secret's scope is not valid", { errors });
  if (!(await secrets.delete(p.userId, name, scope))) {
    throw new HttpProblem(404, `No secret ${name}${scope.app ? ` for app "${scope.app}"${scope.env ? `, environment "${scope.env}"` : ""}` : " for all apps"}`);
  }
  const rolling = endpointsUsing(endpoints, p.userId, name, scope).map((e) => ({ id: e.id, name: e.name, app: e.app, env: e.env }));
  sendJson(res, { deleted: name, app: scope.app ?? null, env: scope.env ?? null, rolling });
}
