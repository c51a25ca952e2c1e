// Volume access keys: credentials for the S3 API on a user's network volumes, made like API keys
// (`{rest_url}/v1/volume-keys`, `svc volume keys create|list|revoke`). The secret is shown once, at creation; it
// is kept sealed (secrets/box.ts), never hashed, because checking a Signature V4 needs the secret itself.
// A key reads and writes the user's volumes (all of them, or those it names), or only reads them; revoking it
// refuses it from the next request on.

import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../keys/auth.js";
import { sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import type { SecretBox } from "../secrets/box.js";
import type { ManagementStore } from "../management/store.js";
import { readObjectBody, requireAccess } from "../management/context.js";
import type { VolumeKeyRecord, VolumeKeyStore } from "./key-store.js";

/** What the sealed secret is bound to: it opens only as this user's key of this id. */
export function keyBinding(k: Pick<VolumeKeyRecord, "userId" | "id">): string {
  return `volume-key\u0000${k.userId}\u0000${k.id}`;
}

const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** An access key id shaped like AWS's (20 upper-case letters and digits), so every client accepts it. */
export function newAccessKeyId(): string {
  const bytes = randomBytes(17);
  return `SVC${[...bytes].map((b) => BASE32[b & 31]).join("")}`;
}

/** A secret of 40 characters, as AWS's are (240 random bits). */
export function newSecretAccessKey(): string {
  return randomBytes(30).toString("base64");
}

export interface VolumeKeysDeps {
  keys: VolumeKeyStore;
  box: SecretBox;
  volumes: Pick<ManagementStore, "volumes">;
  /** The S3 API's address and the region clients sign for. */
  endpoint: string;
  region: string;
}

/** A key as the API shows it: never its secret (except in the creation answer). */
export function volumeKeyJson(k: VolumeKeyRecord, deps: Pick<VolumeKeysDeps, "endpoint" | "region">) {
  return {
    id: k.id,
    accessKeyId: k.id,
    name: k.name,
    userId: k.userId,
    readOnly: k.readOnly,
    volumeIds: k.volumeIds,
    endpoint: deps.endpoint,
    region: deps.region,
    createdAt: k.createdAt,
    revokedAt: k.revokedAt,
  };
}

/** The key a create body asks for, or the `$.path: message` failures. Pure. */
export function planVolumeKey(
  body: Record<string, unknown>,
  ownVolumeIds: string[],
): { key?: { name: string | null; readOnly: boolean; volumeIds: string[] | null }; errors: string[] } {
  const errors: string[] = [];
  const known = new Set(["name", "readOnly", "volumeIds"]);
  for (const k of Object.keys(body)) if (!known.has(k)) errors.push(`$.${k}: is not a volume key setting (name, readOnly, volumeIds)`);
  if (body.name !== undefined && body.name !== null && (typeof body.name !== "string" || body.name.length === 0 || body.name.length > 100))
    errors.push("$.name: must be a string of 1 to 100 characters");
  if (body.readOnly !== undefined && typeof body.readOnly !== "boolean") errors.push("$.readOnly: must be true or false");
  let volumeIds: string[] | null = null;
  if (body.volumeIds !== undefined && body.volumeIds !== null) {
    if (!Array.isArray(body.volumeIds) || body.volumeIds.length === 0 || body.volumeIds.some((v) => typeof v !== "string")) {
      errors.push("$.volumeIds: must be a non-empty list of network volume ids");
    } else {
      volumeIds = [...new Set(body.volumeIds as string[])];
      for (const [i, id] of volumeIds.entries()) if (!ownVolumeIds.includes(id)) errors.push(`$.volumeIds[${i}]: "${id}" is not one of your network volumes`);
    }
  }
  if (errors.length > 0) return { errors };
  return { key: { name: (body.name as string | undefined) ?? null, readOnly: body.readOnly === true, volumeIds }, errors };
}

export async function volumeKeyRoute(deps: VolumeKeysDeps, p: Principal, req: IncomingMessage, res: ServerResponse, id: string | undefined): Promise<void> {
  const method = req.method ?? "GET";
  requireAccess(p, "volumes", method !== "GET");
  const own = async (keyId: string) => {
    const k = await deps.keys.key(keyId);
    if (!k || k.userId !== p.userId) throw new HttpProblem(404, `No volume access key ${keyId}`);
    return k;
  };
  if (id === undefined) {
    if (method === "GET") {
      req.resume();
      return sendJson(
        res,
        (await deps.keys.keys(p.userId)).map((k) => volumeKeyJson(k, deps)),
      );
    }
    if (method !== "POST") throw new HttpProblem(405, `${method} is not allowed here; use GET or POST`, { headers: { allow: "GET, POST" } });
    const body = await readObjectBody(req);
    const plan = planVolumeKey(
      body,
      deps.volumes.volumes(p.userId).map((v) => v.id),
    );
    if (!plan.key) throw new HttpProblem(422, "The volume access key request is not valid", { errors: plan.errors });
    const secret = newSecretAccessKey();
    const base = { id: newAccessKeyId(), userId: p.userId, ...plan.key, createdAt: Date.now(), revokedAt: null };
    const { sealed, keyId } = deps.box.seal(secret, keyBinding(base));
    const record: VolumeKeyRecord = { ...base, sealed, keyId };
    await deps.keys.insert(record);
    return sendJson(res, { ...volumeKeyJson(record, deps), secretAccessKey: secret }, 201);
  }
  if (method === "GET") {
    req.resume();
    return sendJson(res, volumeKeyJson(await own(id), deps));
  }
  if (method === "DELETE") {
    req.resume();
    await own(id);
    await deps.keys.revoke(id, Date.now());
    return sendJson(res, volumeKeyJson((await deps.keys.key(id))!, deps));
  }
  throw new HttpProblem(405, `${method} is not allowed here; use GET or DELETE`, { headers: { allow: "GET, DELETE" } });
}
