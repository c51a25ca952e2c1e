// Templates created through the REST API (`{rest_url}/v1/templates`): a worker image and the defaults of the
// endpoints made from it (env, container disk, /dev/shm, the registry auth its image is pulled with). Their JSON,
// their validation and their route.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../keys/auth.js";
import { newId } from "../keys/auth.js";
import { sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import { SCHEMAS, validate } from "../http/schema.js";
import { readObjectBody, requireAccess, requireDeploy, type ManagementContext } from "./context.js";
import { LIMITS, reservedEnvProblems } from "svc/internal";
import type { TemplateRecord } from "./store.js";
import { ownRegistryAuth } from "./registry-auths.js";

export function templateJson(t: TemplateRecord) {
  return {
    id: t.id,
    name: t.name,
    imageName: t.imageName,
    env: t.env,
    containerDiskInGb: t.containerDiskInGb,
    shmSizeMb: t.shmSizeMb ?? null,
    containerRegistryAuthId: t.containerRegistryAuthId ?? null,
    createdAt: t.createdAt,
  };
}

/** The user's template `id`, when it is theirs. */
export function ownTemplate(m: ManagementContext, p: Principal, id: string): TemplateRecord | undefined {
  const t = m.store.template(id);
  return t && t.userId === p.userId ? t : undefined;
}

/**
 * A template as a create or update body makes it (`before`: the template updated): every failure, the registry
 * auth it names among them when it is not one of the user's. Pure.
 */
export function planTemplate(
  body: Record<string, unknown>,
  before: TemplateRecord | undefined,
  ownsRegistryAuth: (id: string) => boolean,
): { template?: Omit<TemplateRecord, "id" | "userId" | "createdAt">; errors: string[] } {
  const errors = validate(before ? SCHEMAS.UpdateTemplateRequest : SCHEMAS.CreateTemplateRequest, body);
  if (errors.length > 0) return { errors };
  if (body.env !== undefined) errors.push(...reservedEnvProblems(Object.keys(body.env as object), "$.env."));
  const shm = body.shmSizeMb as number | null | undefined;
  if (typeof shm === "number" && (shm < 64 || shm > 262144)) errors.push("$.shmSizeMb: must be 64 to 262144 (MiB), or null");
  const auth = body.containerRegistryAuthId as string | null | undefined;
  if (typeof auth === "string" && !ownsRegistryAuth(auth)) errors.push(`$.containerRegistryAuthId: no container registry auth "${auth}" of yours`);
  if (errors.length > 0) return { errors };
  return {
    template: {
      name: (body.name as string | undefined) ?? before!.name,
      imageName: (body.imageName as string | undefined) ?? before!.imageName,
      env: (body.env as Record<string, string> | undefined) ?? before?.env ?? {},
      containerDiskInGb: (body.containerDiskInGb as number | undefined) ?? before?.containerDiskInGb ?? LIMITS.containerDiskInGbDefault,
      shmSizeMb: shm === undefined ? (before?.shmSizeMb ?? null) : shm,
      containerRegistryAuthId: auth === undefined ? (before?.containerRegistryAuthId ?? null) : auth,
    },
    errors,
  };
}

export async function templateRoute(
  m: ManagementContext,
  p: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  id: string | undefined,
  /** A template changed: the endpoints made from it are planned again. */
  changed: () => Promise<void> = async () => undefined,
): Promise<void> {
  const method = req.method ?? "GET";
  requireAccess(p, "templates", method !== "GET");
  if (method === "GET") {
    req.resume();
    if (id === undefined) return sendJson(res, m.store.templates(p.userId).map(templateJson));
    const t = ownTemplate(m, p, id);
    if (!t) throw new HttpProblem(404, `No template ${id}`);
    return sendJson(res, templateJson(t));
  }
  if (method === "POST" && id === undefined) {
    requireDeploy(p, "Creating a template");
    const body = await readObjectBody(req);
    const plan = planTemplate(body, undefined, (auth) => ownRegistryAuth(m, p.userId, auth) !== undefined);
    if (!plan.template) throw new HttpProblem(422, "The template is not valid", { errors: plan.errors });
    const t: TemplateRecord = { id: `tpl${newId(6)}`, userId: p.userId, ...plan.template, createdAt: Date.now() };
    await m.store.putTemplate(t);
    return sendJson(res, templateJson(t), 201);
  }
  if (method === "PATCH" && id !== undefined) {
    const before = ownTemplate(m, p, id);
    if (!before) {
      req.resume();
      throw new HttpProblem(404, `No template ${id}`);
    }
    requireDeploy(p, "Changing a template");
    const body = await readObjectBody(req);
    const plan = planTemplate(body, before, (auth) => ownRegistryAuth(m, p.userId, auth) !== undefined);
    if (!plan.template) throw new HttpProblem(422, "The template update is not valid", { errors: plan.errors });
    const t: TemplateRecord = { ...before, ...plan.template };
    await m.store.putTemplate(t);
    await changed();
    return sendJson(res, templateJson(t));
  }
  if (method === "DELETE" && id !== undefined) {
    req.resume();
    if (!ownTemplate(m, p, id)) throw new HttpProblem(404, `No template ${id}`);
    await m.store.deleteTemplate(id);
    res.writeHead(204);
    res.end();
    return;
  }
  req.resume();
  throw new HttpProblem(405, `${method} is not allowed here`, { headers: { allow: id === undefined ? "GET, POST" : "GET, PATCH, DELETE" } });
}
