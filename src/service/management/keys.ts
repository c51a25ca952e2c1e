// API keys of users: `{rest_url}/v1/keys` (create, list) and `/v1/keys/{id}` (get, revoke with DELETE).
// Keys are stored hashed (sha256) and compared in constant time (src/service/keys/auth.ts); the secret is shown
// once, in the creation answer. Scopes:
//   admin              everything the user owns, including its keys
//   metrics            the service's Prometheus metrics (the operator's user), endpoints' recent series, usage
//   management:read    read volumes, endpoints, templates
//   management:write   read and change them
//   jobs:*             the job API (and logs) of all the user's endpoints
//   jobs:<endpointId>  the job API of one endpoint (several such scopes: several endpoints)
// The operator (an admin key of the service's default user, e.g. the bootstrap key) may create keys for any
// user id; a user exists once it has a key.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../keys/auth.js";
import { hashKey, newId, newKey } from "../keys/auth.js";
import { sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import { SCHEMAS, validate } from "../http/schema.js";
import { readObjectBody, requireAccess, type ManagementContext, type ManagementDeps } from "./context.js";
import type { KeyRecord } from "./store.js";

/**
 * A key's record as the API answers it; its times are epoch milliseconds, as in every other record. `inUse`: it
 * is the key of the request being answered.
 */
export function keyJson(k: KeyRecord, callerKeyId?: string) {
  return {
    id: k.id,
    name: k.name,
    userId: k.userId,
    scopes: k.scopes,
    createdAt: k.createdAt,
    expiresAt: k.expiresAt,
    revokedAt: k.revokedAt,
    inUse: k.id === callerKeyId,
  };
}

/** Keys the service makes for its own workers are not the user's to manage. */
function listed(k: KeyRecord): boolean {
  return !k.scopes.some((s) => s.startsWith("worker:")) && !/^w[a-z0-9]+-api$/.test(k.id);
}

/** The key to create, or the failures. Pure. */
export function planCreateKey(
  body: Record<string, unknown>,
  creator: { userId: string; operator: boolean },
  now: number,
): { key?: Omit<KeyRecord, "id">; errors: string[]; forbidden?: string } {
  const errors = validate(SCHEMAS.CreateKeyRequest, body);
  if (errors.length > 0) return { errors };
  const userId = (body.userId as string | undefined) ?? creator.userId;
  if (userId !== creator.userId && !creator.operator) return { errors, forbidden: "Only the operator's admin key may create keys for other users" };
  const expires = body.expiresInSeconds as number | undefined;
  return {
    key: {
      userId,
      name: (body.name as string | undefined) ?? null,
      scopes: [...new Set(body.scopes as string[])],
      createdAt: now,
      expiresAt: expires === undefined ? null : now + expires * 1000,
      revokedAt: null,
    },
    errors,
  };
}

export async function keyRoute(
  ctx: ManagementDeps,
  m: ManagementContext,
  p: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  id: string | undefined,
): Promise<void> {
  const method = req.method ?? "GET";
  requireAccess(p, "keys", method !== "GET");
  const operator = p.userId === m.operatorUser;
  const own = async (keyId: string) => {
    const k = await m.store.key(keyId);
    if (!k || (k.userId !== p.userId && !operator) || !listed(k)) throw new HttpProblem(404, `No API key ${keyId}`);
    return k;
  };
  if (id === undefined) {
    if (method === "GET") {
      req.resume();
      const url = new URL(req.url ?? "/", "http://svc.invalid");
      const userId = url.searchParams.get("userId") ?? p.userId;
      if (userId !== p.userId && !operator) throw new HttpProblem(403, "Only the operator's admin key may list other users' keys");
      return sendJson(
        res,
        (await m.store.keys(userId)).filter(listed).map((k) => keyJson(k, p.keyId)),
      );
    }
    if (method !== "POST") throw new HttpProblem(405, `${method} is not allowed here; use GET or POST`, { headers: { allow: "GET, POST" } });
    const body = await readObjectBody(req);
    const plan = planCreateKey(body, { userId: p.userId, operator }, Date.now());
    if (plan.forbidden) throw new HttpProblem(403, plan.forbidden);
    if (!plan.key) throw new HttpProblem(422, "The API key request is not valid", { errors: plan.errors });
    if (m.singleUser && plan.key.userId !== p.userId && !(await m.store.keyUsers?.())?.includes(plan.key.userId)) {
      throw new HttpProblem(
        409,
        `This service serves one user only (${m.singleUser}): no key is made for user ${plan.key.userId}. Run process workers in a sandbox (bubblewrap, SVC_SANDBOX=auto or bwrap) to serve several users; docs/security.md.`,
      );
    }
    const secret = newKey("svc");
    const record: KeyRecord = { id: `key${newId(6)}`, ...plan.key };
    await m.store.insertKey({ ...record, hash: hashKey(secret) });
    return sendJson(res, { ...keyJson(record), key: secret }, 201);
  }
  if (method === "GET") {
    req.resume();
    return sendJson(res, keyJson(await own(id), p.keyId));
  }
  if (method === "DELETE") {
    req.resume();
    await own(id);
    await m.store.revokeKey(id, Date.now());
    // Cached answers would keep a revoked key working: forget them.
    ctx.keyring.forget();
    return sendJson(res, keyJson((await m.store.key(id))!, p.keyId));
  }
  throw new HttpProblem(405, `${method} is not allowed here; use GET or DELETE`, { headers: { allow: "GET, DELETE" } });
}
