import { lbEndpointUrl } from "../lb/index.js";
// The service's app, environment and build routes (all under /v1/apps, user keys; changes need an
// admin key). The service is the one truth about what exists: apps, environments, uploaded builds, and which
// build each environment runs.
//
//   GET    /v1/apps                                      apps with their environment names
//   GET    /v1/apps/{app}                                one app, its environments and their endpoints
//   DELETE /v1/apps/{app}                                the app, its environments, endpoints and builds
//   GET    /v1/apps/{app}/environments                   environments of an app
//   PUT    /v1/apps/{app}/environments/{env}             create (the app too) when absent; {created}
//   GET    /v1/apps/{app}/environments/{env}             endpoints, build, fingerprint
//   DELETE /v1/apps/{app}/environments/{env}             the environment and its endpoints
//   GET    /v1/apps/{app}/builds/{sha256}                a build already uploaded (404 otherwise)
//   POST   /v1/apps/{app}/builds                         upload (gzip tar, header x-svc-sha256)
//   POST   /v1/apps/{app}/environments/{env}/plan        {build} -> what activating it would do
//   POST   /v1/apps/{app}/environments/{env}/activate    {build, confirmRemove} -> provision
//   POST   /v1/apps/{app}/environments/{env}/undeploy    {endpoints: [name] | all: true}
//   POST   /v1/apps/{app}/environments/{env}/config      {resources, dryRun} -> configuration-only update

import { gpuShortfalls } from "../../gpus/host.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ApiContext, RouteCall, RouteHandler } from "../api-context.js";
import type { RouteRow } from "../http/router.js";
import { appEnvironment } from "../state-routes.js";
import { canUseJobs, type Principal } from "../keys/auth.js";
import { canDeploy } from "../management/context.js";
import { isPlainObject, parseJson, readBody, sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import type { EndpointRow, StoreOp } from "../store/types.js";
import { planActivation, planConfigUpdate, type ActivationPlan } from "./plan.js";
import type { BuildRow, EnvironmentRow, ReleaseRow } from "./types.js";
import { receiveArtifact } from "./upload.js";
import { missingSecrets } from "../secrets/check.js";
import { reservedEnvInResources, scalerProblemsInResources } from "./resource-rules.js";
import { DEPLOY_NAME_RULE, isDeployName } from "../../deploy/names.js";

const SHA = /^[a-f0-9]{64}$/;
const JSON_LIMIT = 8 * 1024 * 1024;
/** Removing endpoints answers only once their workers have exited, or fails after this long. */
const WORKERS_GONE_TIMEOUT_MS = 30_000;

function checkName(kind: string, name: string): void {
  if (!isDeployName(name)) {
    throw new HttpProblem(422, `Invalid ${kind} name "${name}"`, { errors: [`${kind} names are ${DEPLOY_NAME_RULE}`] });
  }
}

function allow(req: IncomingMessage, methods: string[]): void {
  if (!methods.includes(req.method ?? "")) {
    req.resume();
    throw new HttpProblem(405, `${req.method} is not allowed here; use ${methods.join(" or ")}`, { headers: { allow: methods.join(", ") } });
  }
}

/** Apps, builds and releases decide what code workers run: the deploy scope (or admin). */
function needDeploy(principal: Principal): void {
  if (!canDeploy(principal)) throw new HttpProblem(403, "Changing apps and environments needs an API key with the deploy (or admin) scope");
}

/** The members each environment action reads; any other member (`__proto__` and `constructor` included) is 422. */
const ACTION_MEMBERS: Record<string, readonly string[]> = {
  plan: ["build", "manifest"],
  activate: ["build", "confirmRemove", "wait", "rollback"],
  undeploy: ["endpoints", "all"],
  config: ["resources", "dryRun"],
};

async function jsonBody(req: IncomingMessage, members?: readonly string[]): Promise<Record<string, unknown>> {
  const body = parseJson(await readBody(req, JSON_LIMIT));
  if (!isPlainObject(body)) throw new HttpProblem(422, "The request body must be a JSON object");
  const unknown = members ? Object.keys(body).filter((key) => !members.includes(key)) : [];
  if (unknown.length > 0) throw new HttpProblem(422, "The request body has unknown properties", { errors: unknown.map((key) => `$.${key}: unknown property`) });
  return body;
}

/** Queue endpoints are addressed by their job API base; load-balanced ones by their own address. */
function endpointUrl(serviceUrl: string, id: string, type: string): string {
  return type === "lb" ? lbEndpointUrl(serviceUrl, id) : `${serviceUrl}/v2/${id}`;
}

function endpointsOf(ctx: ApiContext, userId: string, app: string, env?: string): EndpointRow[] {
  return [...ctx.endpoints.values()]
    .filter((e) => e.userId === userId && e.app === app && (env === undefined || e.env === env))
    .sort((a, b) => a.name.localeCompare(b.name));
}

function endpointJson(ctx: ApiContext, e: EndpointRow, routes: Record<string, Record<string, string>> = {}) {
  return {
    name: e.name,
    id: e.id,
    url: endpointUrl(ctx.url, e.id, e.type),
    type: e.type,
    routes: Object.keys((Object.hasOwn(routes, e.name) ? routes[e.name] : undefined) ?? {}).sort(),
    // What the console's "Try it" offers: each function, with the example input the build derived from its type.
    functions: e.resource.functions.map((f) => ({ name: f.name, kind: f.kind, ...(f.class === undefined ? {} : { class: f.class }), ...(f.exampleInput === undefined ? {} : { exampleInput: f.exampleInput }) })),
    workersMin: e.resource.workersMin,
    workersMax: e.resource.workersMax,
    gpuTypeIds: e.resource.gpuTypeIds,
    idleTimeout: e.resource.idleTimeout,
    // The scaling policy its workers follow; null: the default (one worker per maxConcurrency jobs).
    scaler: e.resource.scaler ?? null,
    unhealthyWorkers: ctx.startFailures.unhealthy(e.id),
    lastStartError: ctx.startFailures.last(e.id),
  };
}

/** /v1/apps routes; an environment this module does not know (deployed by svc dev) is answered by the state route. */
async function appsRoute(call: RouteCall): Promise<void> {
  const segments = call.url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (!(await deployRoute(call.ctx, call.principal, call.req, call.res, segments))) appEnvironment(call);
}

const APPS = { auth: "user", body: "handler", rateLimited: true, purpose: "manage apps", handler: appsRoute } as const;

/** Apps, their builds (uploads) and environments (releases). */
export const DEPLOY_ROUTES: Array<RouteRow<RouteHandler>> = [
  { ...APPS, methods: ["GET"], pattern: "/v1/apps" },
  { ...APPS, methods: ["GET", "DELETE"], pattern: "/v1/apps/:app" },
  { ...APPS, methods: ["POST"], pattern: "/v1/apps/:app/builds" },
  { ...APPS, methods: ["GET"], pattern: "/v1/apps/:app/builds/:build" },
  { ...APPS, methods: ["GET"], pattern: "/v1/apps/:app/environments" },
  { ...APPS, methods: ["GET", "PUT", "DELETE"], pattern: "/v1/apps/:app/environments/:env" },
  { ...APPS, methods: ["GET"], pattern: "/v1/apps/:app/environments/:env/releases" },
  { ...APPS, methods: ["POST"], pattern: "/v1/apps/:app/environments/:env/:action" },
];

/** Handles /v1/apps routes; false when the request is for the older state route this does not cover. */
async function deployRoute(ctx: ApiContext, principal: Principal, req: IncomingMessage, res: ServerResponse, segments: string[]): Promise<boolean> {
  if (principal.worker) {
    if (segments.length === 5 && segments[3] === "environments" && req.method === "GET") return false;
    req.resume();
    throw new HttpProblem(403, "A worker token cannot manage apps");
  }
  const [, , app, section, name, action] = segments as [string, string, string | undefined, string | undefined, string | undefined, string | undefined];
  const store = ctx.store;
  const userId = principal.userId;

  if (app === undefined) {
    allow(req, ["GET"]);
    const apps = await store.apps(userId);
    const listed = [];
    for (const a of apps) {
      const environments = await store.environments(userId, a.name);
      listed.push({ name: a.name, createdAt: a.createdAt, environments: environments.map((e) => e.name) });
    }
    sendJson(res, { apps: listed });
    return true;
  }
  if (req.method !== "GET") checkName("app", app);
  const appRow = (await store.apps(userId)).find((a) => a.name === app);

  if (section === undefined) {
    allow(req, ["GET", "DELETE"]);
    if (!appRow) throw new HttpProblem(404, `No app "${app}"`);
    const environments = await store.environments(userId, app);
    if (req.method === "GET") {
      sendJson(res, { name: app, createdAt: appRow.createdAt, environments: await Promise.all(environments.map((e) => environmentJson(ctx, e))) });
      return true;
    }
    needDeploy(principal);
    const removed = await removeEndpoints(ctx, endpointsOf(ctx, userId, app));
    await ctx.engine.write([{ op: "deleteApp", userId, name: app }]);
    sendJson(res, { deleted: app, environments: environments.map((e) => e.name), removed });
    return true;
  }

  if (section === "builds") {
    if (name === undefined) {
      allow(req, ["POST"]);
      needDeploy(principal);
      const sha = String(req.headers["x-svc-sha256"] ?? "").toLowerCase();
      if (!SHA.test(sha)) {
        req.resume();
        throw new HttpProblem(422, "Send the artifact's sha256 (hex) in the x-svc-sha256 header");
      }
      const existing = await store.build(userId, sha);
      if (existing) {
        req.resume();
        sendJson(res, buildJson(existing));
        return true;
      }
      const received = await receiveArtifact(req, ctx.dataDir, sha, { maxBytes: ctx.maxArtifactBytes, inspect: ctx.uploadInspectLimits, idleMs: ctx.uploadIdleMs });
      // Reachable from every replica before the upload is acknowledged.
      await ctx.artifacts.publish(received.path);
      const now = Date.now();
      const build = { id: received.sha256, userId, app, size: received.size, fingerprint: received.manifest.fingerprint, manifest: received.manifest, path: received.path, createdAt: now };
      await ctx.engine.write([{ op: "upsertApp", app: { userId, name: app, createdAt: now } }, { op: "insertBuild", build }]);
      sendJson(res, buildJson(build), 201);
      return true;
    }
    allow(req, ["GET"]);
    const build = SHA.test(name) ? await store.build(userId, name) : undefined;
    if (!build || build.app !== app) throw new HttpProblem(404, `No build ${name} of app "${app}"`);
    sendJson(res, buildJson(build));
    return true;
  }

  if (section !== "environments") {
    req.resume();
    throw new HttpProblem(404, `No route /v1/apps/${app}/${section}`);
  }
  if (name === undefined) {
    allow(req, ["GET"]);
    if (!appRow) throw new HttpProblem(404, `No app "${app}"`);
    const environments = await store.environments(userId, app);
    sendJson(res, { app, environments: await Promise.all(environments.map((e) => environmentJson(ctx, e))) });
    return true;
  }
  if (req.method !== "GET") checkName("environment", name);
  const envRow = (await store.environments(userId, app)).find((e) => e.name === name);

  if (action === undefined) {
    allow(req, ["GET", "PUT", "DELETE"]);
    if (req.method === "GET") {
      // Environments deployed without this module (svc dev) are answered by the older state route.
      if (!envRow) return false;
      const body = await environmentJson(ctx, envRow);
      const visible = body.endpoints.filter((e) => canUseJobs(principal, e.id));
      if (body.endpoints.length > 0 && visible.length === 0) throw new HttpProblem(403, `This API key has no access to app "${app}", environment "${name}"`);
      sendJson(res, { ...body, endpoints: visible });
      return true;
    }
    needDeploy(principal);
    if (req.method === "PUT") {
      req.resume();
      if (envRow) {
        sendJson(res, { ...(await environmentJson(ctx, envRow)), created: false });
        return true;
      }
      const now = Date.now();
      const environment: EnvironmentRow = { userId, app, name, buildId: null, createdAt: now, activatedAt: null };
      await ctx.engine.write([{ op: "upsertApp", app: { userId, name: app, createdAt: now } }, { op: "upsertEnvironment", environment }]);
      sendJson(res, { ...(await environmentJson(ctx, environment)), created: true }, 201);
      return true;
    }
    req.resume();
    if (!envRow) throw new HttpProblem(404, `No app "${app}" with environment "${name}"`);
    const removed = await removeEndpoints(ctx, endpointsOf(ctx, userId, app, name));
    await ctx.engine.write([{ op: "deleteEnvironment", userId, app, name }]);
    sendJson(res, { deleted: name, app, removed });
    return true;
  }

  if (action === "releases") {
    allow(req, ["GET"]);
    if (!envRow) throw new HttpProblem(404, `No app "${app}" with environment "${name}"`);
    sendJson(res, { app, env: name, releases: await store.releases(userId, app, name, RELEASES_LISTED) });
    return true;
  }

  allow(req, ["POST"]);
  needDeploy(principal);
  const body = await jsonBody(req, Object.hasOwn(ACTION_MEMBERS, action ?? "") ? ACTION_MEMBERS[action!] : undefined);
  if (!envRow) throw new HttpProblem(404, `No app "${app}" with environment "${name}"`, { errors: [`create it with \`svc env create ${name} --app ${app}\` or \`svc deploy --env ${name}\``] });
  const existing = endpointsOf(ctx, userId, app, name);

  if (action === "plan" || action === "activate") {
    const buildId = typeof body.build === "string" ? body.build : "";
    let build = SHA.test(buildId) ? await store.build(userId, buildId) : undefined;
    // A dry run plans a build the service does not have yet from its manifest; only activation needs the bytes.
    if (!build && action === "plan" && SHA.test(buildId) && isPlainObject(body.manifest) && isPlainObject(body.manifest.resources)) {
      const manifest = body.manifest as unknown as BuildRow["manifest"];
      manifest.routes ??= {};
      build = { id: buildId, userId, app, size: 0, fingerprint: String(manifest.fingerprint), manifest, path: "", createdAt: Date.now() };
    }
    if (!build || build.app !== app) throw new HttpProblem(404, `No build ${buildId || "(missing)"} of app "${app}"`, { errors: ["upload it first: POST /v1/apps/{app}/builds"] });
    const reserved = reservedEnvInResources(build.manifest.resources);
    if (reserved.length > 0) throw new HttpProblem(422, "The build sets environment variables that configuration may not set; nothing was activated", { errors: reserved });
    const policies = scalerProblemsInResources(build.manifest.resources);
    if (policies.length > 0) throw new HttpProblem(422, "The build names a scaling policy the service cannot follow; nothing was activated", { errors: policies });
    const volumes = ctx.management?.deployVolumes(userId, build.manifest.resources) ?? { create: [], errors: [] };
    if (volumes.errors.length > 0) throw new HttpProblem(422, "The build names network volumes it cannot use; nothing was activated", { errors: volumes.errors });
    const current = envRow.buildId ? await store.build(userId, envRow.buildId) : undefined;
    const now = Date.now();
    const plan = planActivation(existing, { userId, app, env: name, build, current, artifactPath: build.path }, now);
    if (action === "plan") {
      sendJson(res, planJson(ctx, plan, build.manifest.routes, false));
      return true;
    }
    const unset = missingSecrets(ctx.secrets, userId, app, name, build.manifest.resources);
    if (unset.length > 0) throw new HttpProblem(422, "The release names secrets that are not set; nothing was activated", { errors: unset });
    const beyond = gpuShortfalls(ctx.gpus?.(), build.manifest.resources);
    if (beyond.length > 0) throw new HttpProblem(422, "The release asks for GPUs this host does not have; nothing was activated", { errors: beyond });
    const confirmed = new Set(Array.isArray(body.confirmRemove) ? body.confirmRemove.map(String) : []);
    const unconfirmed = plan.remove.filter((r) => !confirmed.has(r.name));
    if (unconfirmed.length > 0) {
      throw new HttpProblem(409, "Activating this build removes endpoints that were not confirmed", {
        errors: unconfirmed.map((r) => `would remove endpoint "${r.name}" (${r.id})`),
      });
    }
    // Volumes its endpoints name that the user does not have yet: theirs from now on, kept like any volume.
    await ctx.management?.createVolumes(volumes.create);
    // Surge, then switch: the created and changed endpoints' new workers must come up before anything changes
    // (releases/manager.ts); the switch below is written only then, in one batch.
    const { release, settled } = await ctx.releases.begin({
      userId,
      app,
      env: name,
      buildId: build.id,
      previousBuildId: envRow.buildId,
      kind: body.rollback === true ? "rollback" : "deploy",
      probe: plan.upsert.map((row) => ({ row, action: ctx.endpoints.has(row.id) ? "update" : "create" })),
      commit: async (extra) => {
        for (const row of plan.removeRows) {
          ctx.endpoints.remove(row.id);
          await ctx.engine.dropEndpoint(row.id);
        }
        await ctx.engine.write([
          ...plan.upsert.map((endpoint) => ({ op: "upsertEndpoint", endpoint }) as StoreOp),
          { op: "upsertEnvironment", environment: { ...envRow, buildId: build.id, activatedAt: Date.now() } },
          ...extra,
        ]);
        for (const row of plan.upsert) ctx.endpoints.upsert(row);
      },
    });
    const answer = (r: ReleaseRow) => ({ ...planJson(ctx, plan, build.manifest.routes, r.state === "live"), build: build.id, fingerprint: build.fingerprint, release: r });
    // `wait: false`: answer now (202 while new workers come up); the outcome is in GET .../releases.
    if (body.wait === false && release.state === "starting") {
      sendJson(res, answer(release), 202);
      return true;
    }
    const outcome = await settled;
    if (outcome.state !== "live") throw releaseProblem(outcome);
    ctx.scaler()?.reconcile();
    await waitWorkersGone(ctx, plan.removeRows.map((r) => r.id));
    sendJson(res, answer(outcome));
    return true;
  }

  if (action === "undeploy") {
    const all = body.all === true;
    const names = Array.isArray(body.endpoints) ? body.endpoints.map(String) : [];
    if (!all && names.length === 0) throw new HttpProblem(422, "Say which endpoints to remove", { errors: ["send {endpoints: [name, ...]} or {all: true}"] });
    const unknown = names.filter((n) => !existing.some((e) => e.name === n));
    if (unknown.length > 0) {
      throw new HttpProblem(404, `No endpoint ${unknown.map((n) => `"${n}"`).join(", ")} in app "${app}", environment "${name}"`, {
        errors: [`deployed: ${existing.map((e) => e.name).join(", ") || "nothing"}`],
      });
    }
    const targets = all ? existing : existing.filter((e) => names.includes(e.name));
    const removed = await removeEndpoints(ctx, targets);
    // Everything gone: the environment runs no build any more, so the next deploy provisions afresh.
    if (all) await ctx.engine.write([{ op: "upsertEnvironment", environment: { ...envRow, buildId: null } }]);
    sendJson(res, { app, env: name, removed });
    return true;
  }

  if (action === "config") {
    if (!isPlainObject(body.resources)) throw new HttpProblem(422, "Send {resources} with each endpoint's configuration");
    const reserved = isPlainObject(body.resources) ? reservedEnvInResources(body.resources as never) : [];
    if (reserved.length > 0) throw new HttpProblem(422, "The configuration sets environment variables that configuration may not set; nothing was changed", { errors: reserved });
    const policies = scalerProblemsInResources(body.resources as never);
    if (policies.length > 0) throw new HttpProblem(422, "The configuration names a scaling policy the service cannot follow; nothing was changed", { errors: policies });
    const now = Date.now();
    const plan = planConfigUpdate(existing, body.resources as never, now);
    if (plan.problems.length > 0) {
      throw new HttpProblem(409, "These changes need a new build: run `svc deploy`", { errors: plan.problems });
    }
    if (body.dryRun !== true && plan.rows.length > 0) {
      await ctx.engine.write(plan.rows.map((endpoint) => ({ op: "upsertEndpoint", endpoint }) as StoreOp));
      for (const row of plan.rows) ctx.endpoints.upsert(row);
      ctx.scaler()?.reconcile();
    }
    sendJson(res, { app, env: name, dryRun: body.dryRun === true, changes: plan.changes });
    return true;
  }

  throw new HttpProblem(404, `No route /v1/apps/${app}/environments/${name}/${action}`);
}

/** Releases an environment's record lists (newest first). */
const RELEASES_LISTED = 10;

/** The answer to an activation whose release did not switch: which endpoint, the worker's error, what serves. */
function releaseProblem(release: ReleaseRow): HttpProblem {
  if (release.state === "superseded") return new HttpProblem(409, "A newer activation of this environment took over before this one switched", { members: { release } });
  const why = release.error;
  const serving = release.previousBuildId ? `build ${release.previousBuildId.slice(0, 12)} keeps serving` : "nothing was deployed";
  return new HttpProblem(422, `The release failed: ${why?.endpoint ? `endpoint ${why.endpoint}'s new workers could not start` : "it could not switch"}; ${serving}`, {
    errors: why ? [why.message] : [],
    members: { release },
  });
}

function buildJson(b: { id: string; app: string; size: number; fingerprint: string; createdAt: number }) {
  return { id: b.id, app: b.app, size: b.size, fingerprint: b.fingerprint, createdAt: b.createdAt };
}

function planJson(ctx: ApiContext, plan: ActivationPlan, routes: Record<string, Record<string, string>>, applied: boolean) {
  return {
    applied,
    endpoints: plan.endpoints.map((e) => ({ ...e, url: endpointUrl(ctx.url, e.id, e.type), routes: Object.keys((Object.hasOwn(routes, e.name) ? routes[e.name] : undefined) ?? {}).sort() })),
    remove: plan.remove,
  };
}

async function environmentJson(ctx: ApiContext, e: EnvironmentRow) {
  const build = e.buildId ? await ctx.store.build(e.userId, e.buildId) : undefined;
  return {
    app: e.app,
    env: e.name,
    createdAt: e.createdAt,
    activatedAt: e.activatedAt,
    build: e.buildId,
    fingerprint: build?.fingerprint ?? null,
    endpoints: endpointsOf(ctx, e.userId, e.app, e.name).map((row) => endpointJson(ctx, row, build?.manifest.routes)),
    // The environment's recent releases, newest first, with their outcome (a failed one says which endpoint and why).
    releases: await ctx.store.releases(e.userId, e.app, e.name, RELEASES_LISTED),
  };
}

/** Drop endpoints (jobs, logs) and answer only once none of their workers runs. */
async function removeEndpoints(ctx: ApiContext, rows: EndpointRow[]): Promise<Array<{ name: string; id: string; env: string }>> {
  for (const row of rows) {
    ctx.endpoints.remove(row.id);
    await ctx.engine.dropEndpoint(row.id);
  }
  ctx.scaler()?.reconcile();
  await waitWorkersGone(ctx, rows.map((r) => r.id));
  return rows.map((r) => ({ name: r.name, id: r.id, env: r.env }));
}

async function waitWorkersGone(ctx: ApiContext, ids: string[]): Promise<void> {
  const scaler = ctx.scaler();
  if (!scaler || ids.length === 0) return;
  const gone = await scaler.stopWorkersOf(new Set(ids), WORKERS_GONE_TIMEOUT_MS);
  if (!gone) throw new HttpProblem(503, "The endpoints were removed but some of their workers are still running", { errors: ["check again with `svc env get`"] });
}
