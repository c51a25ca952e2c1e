// Endpoints created through the REST API (`{rest_url}/v1/endpoints`): the route that creates, reads, updates and
// deletes them, and the records of the endpoints `svc deploy` made, which its list shows beside them with how their
// workers fare. What an endpoint is planned as is endpoint-plan.ts's, the endpoints kept in memory
// rest-endpoints.ts's, templates templates.ts's.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../keys/auth.js";
import { newId } from "../keys/auth.js";
import { sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import type { EndpointRow } from "../store/types.js";
import { readObjectBody, requireAccess, requireDeploy, type ManagementContext, type ManagementDeps } from "./context.js";
import type { RestEndpointSpec, VolumeRecord } from "./store.js";
import { lbEndpointUrl } from "../lb/address.js";
import { gpuWaitMessage } from "../../gpus/host.js";
import { crashLoopMessage } from "../workers/crash-loop.js";
import { CODE_SETTINGS, needsRestart, planEndpointSpec } from "./endpoint-plan.js";
import type { RestEndpoints } from "./rest-endpoints.js";
import { ownTemplate } from "./templates.js";

function ownVolume(m: ManagementContext, p: Principal, id: string): VolumeRecord | undefined {
  const v = m.store.volume(id);
  return v && v.userId === p.userId ? v : undefined;
}

/**
 * An endpoint that `svc deploy` (or `svc dev`) made, as the endpoint list shows it beside REST-created ones: the
 * same fields where they mean the same, its app and environment, and `source: "deploy"`. It has no template (its
 * code is the app's build). Pure.
 */
export function deployedEndpointRecord(row: EndpointRow, serviceUrl: string) {
  const r = row.resource;
  return {
    id: row.id,
    name: row.name,
    templateId: "",
    source: "deploy" as const,
    app: row.app,
    environment: row.env,
    url: `${serviceUrl}/v2/${row.id}`,
    type: row.type,
    ...(row.type === "lb" ? { lbUrl: lbEndpointUrl(serviceUrl, row.id) } : {}),
    computeType: r.computeType,
    gpuTypeIds: r.gpuTypeIds,
    // A manifest built before gpuCount existed means one GPU per worker.
    gpuCount: r.computeType === "GPU" ? (r.gpuCount ?? 1) : 0,
    workersMin: r.workersMin,
    workersMax: r.workersMax,
    idleTimeout: r.idleTimeout,
    executionTimeoutMs: r.executionTimeoutMs,
    env: r.env,
    networkVolumeId: r.volume,
    models: r.models ?? [],
    status: "READY" as const,
    statusReason: null,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

/**
 * 422 for GPUs this host can never give one worker (more than it has of every listed type, or none of them),
 * where the service knows its GPUs: waiting could not help.
 */
function refuseBeyondHost(rest: RestEndpoints, spec: RestEndpointSpec): void {
  const capacity = rest.gpuCapacity();
  if (!capacity || spec.computeType !== "GPU") return;
  const c = capacity({ typeIds: spec.gpuTypeIds.length > 0 ? spec.gpuTypeIds : ["ANY"], count: spec.gpuCount });
  if (!c.satisfiable) {
    throw new HttpProblem(422, "This host does not have the GPUs the endpoint asks for", {
      errors: [
        `$.${spec.gpuCount > 1 ? "gpuCount" : "gpuTypeIds"}: ${spec.gpuCount} GPU(s) of ${spec.gpuTypeIds.join(", ") || "any type"} per worker, more than this host has (${c.reason})`,
      ],
    });
  }
}

/**
 * What a deployed endpoint's workers got of this host's GPUs, and whether some wait for one (the record then says
 * WAITING, and why).
 */
function deployedGpuState(ctx: ManagementDeps, id: string) {
  const scaler = ctx.scaler();
  const workers = scaler?.workerGpus(id) ?? [];
  const wait = scaler?.gpuWait(id);
  const row = ctx.endpoints.get(id);
  const modelWait = row ? scaler?.modelWait(row) : undefined;
  return {
    ...(workers.length > 0 ? { allocatedGpuType: workers.find((w) => w.gpuType)?.gpuType ?? null, workers } : {}),
    ...(wait ? { status: "WAITING" as const, statusReason: gpuWaitMessage(wait) } : {}),
    // Its models being fetched (or failed): said before a GPU wait, which follows it.
    ...(modelWait ? { status: "WAITING" as const, statusReason: modelWait } : {}),
  };
}

/**
 * An endpoint's record with how its workers fare: those that failed to start recently and the last such error
 * (null: none since the start), and a crash loop its workers are in (statusReason says it too).
 */
function withHealth<R extends { statusReason: string | null }>(ctx: ManagementDeps, id: string, record: R) {
  const loop = ctx.scaler()?.crashLoop(id);
  const reason = loop ? crashLoopMessage(loop, Date.now()) : undefined;
  return {
    ...record,
    unhealthyWorkers: ctx.startFailures.unhealthy(id),
    lastStartError: ctx.startFailures.last(id),
    ...(loop ? { crashLoop: loop, statusReason: record.statusReason ? `${record.statusReason}; ${reason}` : reason! } : {}),
  };
}

export async function endpointRoute(
  ctx: ManagementDeps,
  m: ManagementContext,
  rest: RestEndpoints,
  p: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  id: string | undefined,
): Promise<void> {
  const method = req.method ?? "GET";
  requireAccess(p, "endpoints", method !== "GET");
  const lookup = { template: (t: string) => ownTemplate(m, p, t), volume: (v: string) => ownVolume(m, p, v) };
  const own = (endpointId: string) => {
    const entry = rest.specs.get(endpointId);
    if (!entry || entry.userId !== p.userId) throw new HttpProblem(404, `No endpoint ${endpointId}`);
    return entry;
  };
  if (id === undefined) {
    if (method === "GET") {
      req.resume();
      // One list of all the user's endpoints, as users of the hosted service expect: REST-created ones and those
      // `svc deploy` made (with their app and environment).
      const created = [...rest.specs.entries()]
        .filter(([, e]) => e.userId === p.userId)
        .map(([eid]) => ({ ...withHealth(ctx, eid, rest.record(eid)), source: "rest" as const }));
      const deployed = [...ctx.endpoints.values()]
        .filter((e) => e.userId === p.userId && !rest.specs.has(e.id))
        .map((e) => withHealth(ctx, e.id, { ...deployedEndpointRecord(e, ctx.url), ...deployedGpuState(ctx, e.id) }));
      const all: Array<{ createdAt: number; id: string }> = [...created, ...deployed];
      return sendJson(
        res,
        all.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id)),
      );
    }
    if (method !== "POST") throw new HttpProblem(405, `${method} is not allowed here; use GET or POST`, { headers: { allow: "GET, POST" } });
    requireDeploy(p, "Creating an endpoint");
    const body = await readObjectBody(req);
    const plan = planEndpointSpec(body, undefined, lookup);
    if (!plan.spec) throw new HttpProblem(422, "The endpoint request is not valid", { errors: plan.errors });
    refuseBeyondHost(rest, plan.spec);
    const newEndpointId = newId(8);
    rest.specs.set(newEndpointId, { userId: p.userId, spec: plan.spec, generation: 0 });
    await m.store.putRestEndpoint(newEndpointId, p.userId, plan.spec, 0);
    await rest.lookUpImage(newEndpointId);
    await rest.apply(newEndpointId);
    await rest.checkPing(newEndpointId);
    return sendJson(res, withHealth(ctx, newEndpointId, rest.record(newEndpointId)), 201);
  }
  if (method === "GET") {
    req.resume();
    // An endpoint `svc deploy` made is read here too (changed through its app's deploys, not PATCH).
    const deployed = rest.specs.has(id) ? undefined : ctx.endpoints.get(id);
    if (deployed && deployed.userId === p.userId)
      return sendJson(res, withHealth(ctx, id, { ...deployedEndpointRecord(deployed, ctx.url), ...deployedGpuState(ctx, id) }));
    own(id);
    return sendJson(res, withHealth(ctx, id, rest.record(id)));
  }
  if (method === "PATCH") {
    const entry = own(id);
    const body = await readObjectBody(req);
    const chooses = CODE_SETTINGS.filter((k) => Object.hasOwn(body, k));
    if (chooses.length > 0) requireDeploy(p, `Changing an endpoint's ${chooses.join(", ")}`);
    const plan = planEndpointSpec(body, entry.spec, lookup);
    if (!plan.spec) throw new HttpProblem(422, "The endpoint update is not valid", { errors: plan.errors });
    if (["gpuTypeIds", "gpuCount", "computeType"].some((k) => k in body)) refuseBeyondHost(rest, plan.spec);
    const restart = needsRestart(entry.spec, plan.spec);
    const next = { userId: entry.userId, spec: plan.spec, generation: entry.generation + (restart ? 1 : 0) };
    rest.specs.set(id, next);
    await m.store.putRestEndpoint(id, p.userId, plan.spec, next.generation);
    await rest.lookUpImage(id);
    // A new check on every update: the image may have been rebuilt under the same name.
    rest.forgetPing(id);
    await rest.apply(id);
    await rest.checkPing(id);
    res.setHeader("svc-workers-restarted", restart ? "true" : "false");
    return sendJson(res, withHealth(ctx, id, rest.record(id)));
  }
  if (method === "DELETE") {
    req.resume();
    own(id);
    // Configuration, job history and logs go with it, and the scaler drains its workers.
    rest.specs.delete(id);
    rest.forgetPing(id);
    await m.store.deleteRestEndpoint(id);
    ctx.endpoints.remove(id);
    await ctx.engine.dropEndpoint(id);
    ctx.scaler()?.reconcile();
    res.writeHead(204);
    res.end();
    return;
  }
  throw new HttpProblem(405, `${method} is not allowed here; use GET, PATCH or DELETE`, { headers: { allow: "GET, PATCH, DELETE" } });
}
