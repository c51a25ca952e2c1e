// Container registry credentials of users (`{rest_url}/v1/containerregistryauth`), the provider's REST shape:
//
//   POST   /v1/containerregistryauth        {name, username, password} -> 201 {id, name}   (management:write)
//   GET    /v1/containerregistryauth        the user's: [{id, name}]                        (management:read)
//   GET    /v1/containerregistryauth/{id}   {id, name}
//   DELETE /v1/containerregistryauth/{id}   204; 409 while a template of the user names it
//
// A template's `containerRegistryAuthId` names one: the drivers pull the template's image with it. The username
// and password are sealed at rest with the service's secrets key (secrets/box.ts), bound to the record's user
// and id, and opened only to pull; no answer carries them. Names are unique per user, as the provider's are.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { RegistryCredentials } from "../../drivers/registry-auth.js";
import { newId, type Principal } from "../keys/auth.js";
import { HttpProblem } from "../http/problems.js";
import { SCHEMAS, validate } from "../http/schema.js";
import { sendJson } from "../http/wire.js";
import type { SecretBox } from "../secrets/box.js";
import { readObjectBody, requireAccess, type ManagementContext } from "./context.js";
import type { ManagementStore, RegistryAuthRecord } from "./store.js";

/** What a sealed record is bound to: a sealed value copied to another record does not open. Pure. */
const binding = (r: { userId: string; id: string }) => `registry-auth\u0000${r.userId}\u0000${r.id}`;

export function registryAuthJson(r: RegistryAuthRecord) {
  return { id: r.id, name: r.name };
}

/** The request to create one: its fields, or every failure. Pure. */
export function planRegistryAuth(
  body: Record<string, unknown>,
  existing: readonly RegistryAuthRecord[],
): { name?: string; username?: string; password?: string; errors: string[] } {
  const errors = validate(SCHEMAS.CreateContainerRegistryAuthRequest, body);
  if (errors.length > 0) return { errors };
  const name = body.name as string;
  if (existing.some((r) => r.name === name)) errors.push(`$.name: you already have a registry auth named "${name}"`);
  return { name, username: body.username as string, password: body.password as string, errors };
}

/** Seal credentials for a new record. */
export function sealRegistryAuth(
  box: SecretBox,
  userId: string,
  name: string,
  credentials: { username: string; password: string },
  now = Date.now(),
): RegistryAuthRecord {
  const id = `cra${newId(6)}`;
  const { sealed, keyId } = box.seal(JSON.stringify({ username: credentials.username, password: credentials.password }), binding({ userId, id }));
  return { id, userId, name, sealed, keyId, createdAt: now };
}

/** The credentials of a record, opened; an error saying what to do when its key is not configured. */
export function openRegistryAuth(box: SecretBox, r: RegistryAuthRecord): RegistryCredentials {
  const text = box.open(r.sealed, r.keyId, binding(r));
  if (text === undefined) {
    throw new Error(
      `registry auth "${r.name}" (${r.id}) cannot be opened: the secrets key it was sealed with (id ${r.keyId}) is not configured; create it again or configure that key as a previous secrets key`,
    );
  }
  const { username, password } = JSON.parse(text) as { username: string; password: string };
  return { name: r.name, username, password };
}

/**
 * Seal again, under the current key, every registry auth sealed with a previous one (at start, as secrets are):
 * how many were. One that does not open is named in the log and left as it is.
 */
export async function resealRegistryAuths(store: ManagementStore, box: SecretBox, log: (message: string) => void): Promise<number> {
  let resealed = 0;
  for (const r of store.registryAuths()) {
    if (r.keyId === box.currentId) continue;
    const text = box.open(r.sealed, r.keyId, binding(r));
    if (text === undefined) {
      log(
        `registry auth "${r.name}" (${r.id}) of user ${r.userId} cannot be opened: the key it was sealed with (id ${r.keyId}) is not configured; create it again or configure that key as a previous secrets key`,
      );
      continue;
    }
    const { sealed, keyId } = box.seal(text, binding(r));
    await store.putRegistryAuth({ ...r, sealed, keyId });
    resealed++;
  }
  return resealed;
}

/** One of the user's registry auths, or undefined (another user's is none of theirs). */
export function ownRegistryAuth(m: ManagementContext, userId: string, id: string): RegistryAuthRecord | undefined {
  const r = m.store.registryAuth(id);
  return r && r.userId === userId ? r : undefined;
}

export async function registryAuthRoute(m: ManagementContext, p: Principal, req: IncomingMessage, res: ServerResponse, id: string | undefined): Promise<void> {
  const method = req.method ?? "GET";
  requireAccess(p, "registries", method !== "GET");
  if (method === "GET") {
    req.resume();
    if (id === undefined) return sendJson(res, m.store.registryAuths(p.userId).map(registryAuthJson));
    const r = ownRegistryAuth(m, p.userId, id);
    if (!r) throw new HttpProblem(404, `No container registry auth ${id}`);
    return sendJson(res, registryAuthJson(r));
  }
  if (method === "POST" && id === undefined) {
    const body = await readObjectBody(req);
    const plan = planRegistryAuth(body, m.store.registryAuths(p.userId));
    if (plan.errors.length > 0) {
      const duplicate = plan.errors.length === 1 && plan.errors[0]!.includes("already have");
      throw new HttpProblem(duplicate ? 409 : 422, duplicate ? "A registry auth of that name exists" : "The container registry auth is not valid", {
        errors: plan.errors,
      });
    }
    if (!m.box) throw new HttpProblem(503, "This service keeps no secrets: it was started without a secrets key");
    const record = sealRegistryAuth(m.box, p.userId, plan.name!, { username: plan.username!, password: plan.password! });
    await m.store.putRegistryAuth(record);
    return sendJson(res, registryAuthJson(record), 201);
  }
  if (method === "DELETE" && id !== undefined) {
    req.resume();
    const r = ownRegistryAuth(m, p.userId, id);
    if (!r) throw new HttpProblem(404, `No container registry auth ${id}`);
    const users = m.store.templates(p.userId).filter((t) => t.containerRegistryAuthId === id);
    if (users.length > 0) {
      throw new HttpProblem(409, `Container registry auth ${id} is used by template(s) ${users.map((t) => t.id).join(", ")}`, {
        errors: users.map((t) => `template ${t.id} ("${t.name}") pulls its image with it: update or delete the template first`),
      });
    }
    await m.store.deleteRegistryAuth(id);
    res.writeHead(204);
    res.end();
    return;
  }
  req.resume();
  throw new HttpProblem(405, `${method} is not allowed here`, { headers: { allow: id === undefined ? "GET, POST" : "GET, DELETE" } });
}
