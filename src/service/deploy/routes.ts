// The service's app, environment and build routes (all under /v1/apps, user keys; changes need the deploy scope).
// The service is the one truth about what exists: apps, environments, uploaded builds, and which build each
// environment runs. Each route parses its request, asks the deploy module (deployments.ts) and answers; the
// module's refusals become problem+json here.
//
//   GET    /v1/apps                                      apps with their environment names
//   GET    /v1/apps/{app}                                one app, its environments and their endpoints
//   DELETE /v1/apps/{app}                                the app, its environments, endpoints and builds
//   GET    /v1/apps/{app}/environments                   environments of an app
//   PUT    /v1/apps/{app}/environments/{env}             create (the app too) when absent; {created}
//   GET    /v1/apps/{app}/environments/{env}             endpoints, build, fingerprint
//   DELETE /v1/apps/{app}/environments/{env}             the environment and its endpoints
//   GET    /v1/apps/{app}/environments/{env}/releases    its recent releases, newest first
//   GET    /v1/apps/{app}/builds/{sha256}                a build already uploaded (404 otherwise)
//   POST   /v1/apps/{app}/builds                         upload (gzip tar, header x-svc-sha256)
//   POST   /v1/apps/{app}/environments/{env}/plan        {build} -> what activating it would do
//   POST   /v1/apps/{app}/environments/{env}/activate    {build, confirmRemove} -> provision
//   POST   /v1/apps/{app}/environments/{env}/undeploy    {endpoints: [name] | all: true}
//   POST   /v1/apps/{app}/environments/{env}/config      {resources, dryRun} -> configuration-only update

import type { IncomingMessage } from "node:http";
import type { RouteCall as Call, RouteHandler as Handler, Route } from "../http/router.js";
import { appEnvironment, type StateDeps } from "../state-routes.js";
import type { InspectLimits } from "../../artifact/inspect.js";
import type { StartFailures } from "../releases/start-failures.js";
import { oneLive } from "../releases/state.js";
import type { Store } from "../store/types.js";
import type { Deployments } from "./deployments.js";
import { canUseJobs, type Principal } from "../keys/auth.js";
import { canDeploy } from "../management/context.js";
import { isPlainObject, parseJson, readBody, sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import type { EndpointRow } from "../store/types.js";
import type { ActivationPlan } from "./plan.js";
import type { EnvironmentRef } from "./deployments.js";
import { DeployError, ReleaseFailedError } from "./deployments.js";
import type { EnvironmentRow, ReleaseRow } from "../store/deploy-rows.js";
import { receiveArtifact } from "./upload.js";
import { lbEndpointUrl } from "../lb/address.js";
import { DEPLOY_NAME_RULE, isDeployName } from "../../deploy/names.js";

/** What the deploy routes need: the Deployments module that does the work, and what they read to answer. */
export interface DeployRouteDeps extends StateDeps {
  deployments: Deployments;
  store: Pick<Store, "apps" | "environments" | "build" | "releases">;
  startFailures: Pick<StartFailures, "unhealthy" | "last">;
  dataDir: string;
  maxArtifactBytes: number;
  /** How an uploaded archive may expand (tests make these small; defaults: a worker's extraction limits). */
  uploadInspectLimits?: Partial<InspectLimits>;
  uploadIdleMs?: number;
}

type RouteCall = Call<DeployRouteDeps>;
type RouteHandler = Handler<DeployRouteDeps>;

const SHA = /^[a-f0-9]{64}$/;
const JSON_LIMIT = 8 * 1024 * 1024;

function checkName(kind: string, name: string): void {
  if (!isDeployName(name)) {
    throw new HttpProblem(422, `Invalid ${kind} name "${name}"`, { errors: [`${kind} names are ${DEPLOY_NAME_RULE}`] });
  }
}

/** Apps, builds and releases decide what code workers run: the deploy scope (or admin). */
function needDeploy(principal: Principal): void {
  if (!canDeploy(principal)) throw new HttpProblem(403, "Changing apps and environments needs an API key with the deploy (or admin) scope");
}

/**
 * These routes answer GET and refuse HEAD (405) after checking the names, as they always have: the route table
 * alone would serve HEAD as a GET without its body.
 */
function refuseHead(call: RouteCall, allowed: string[]): void {
  if (call.req.method !== "HEAD") return;
  if (call.params.app !== undefined) checkName("app", call.params.app);
  if (call.params.env !== undefined) checkName("environment", call.params.env);
  throw new HttpProblem(405, `HEAD is not allowed here; use ${allowed.join(" or ")}`, { headers: { allow: allowed.join(", ") } });
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

function endpointJson(ctx: DeployRouteDeps, e: EndpointRow, routes: Record<string, Record<string, string>> = {}) {
  return {
    name: e.name,
    id: e.id,
    url: endpointUrl(ctx.url, e.id, e.type),
    type: e.type,
    routes: Object.keys((Object.hasOwn(routes, e.name) ? routes[e.name] : undefined) ?? {}).sort(),
    // What the console's "Try it" offers: each function, with the example input the build derived from its type.
    functions: e.resource.functions.map((f) => ({
      name: f.name,
      kind: f.kind,
      ...(f.class === undefined ? {} : { class: f.class }),
      ...(f.exampleInput === undefined ? {} : { exampleInput: f.exampleInput }),
    })),
    workersMin: e.resource.workersMin,
    workersMax: e.resource.workersMax,
    gpuTypeIds: e.resource.gpuTypeIds,
    idleTimeout: e.resource.idleTimeout,
    // The rest of its settings, for the console's endpoint page (secret names only: values never leave the service).
    computeType: e.resource.computeType,
    gpuCount: e.resource.computeType === "GPU" ? (e.resource.gpuCount ?? 1) : 0,
    executionTimeoutMs: e.resource.executionTimeoutMs,
    maxConcurrency: e.resource.maxConcurrency,
    retries: e.resource.retries,
    secrets: e.resource.secrets ?? [],
    // The scaling policy its workers follow; null: the default (one worker per maxConcurrency jobs).
    scaler: e.resource.scaler ?? null,
    unhealthyWorkers: ctx.startFailures.unhealthy(e.id),
    lastStartError: ctx.startFailures.last(e.id),
  };
}

/** The problem+json a refused or unfinished deploy operation is answered with. */
const FAILURE_STATUS: Record<DeployError["failure"], number> = { "not-found": 404, invalid: 422, conflict: 409, "workers-running": 503 };

function asProblem(err: unknown): unknown {
  if (err instanceof ReleaseFailedError) return releaseProblem(err.release);
  if (err instanceof DeployError) return new HttpProblem(FAILURE_STATUS[err.failure], err.message, { errors: err.problems });
  return err;
}

/** A route of this module: the deploy module's refusals become problem+json answers. */
function route(handler: RouteHandler): RouteHandler {
  return async (call) => {
    try {
      await handler(call);
    } catch (err) {
      throw asProblem(err);
    }
  };
}

/** The app and environment a request names; names are checked where the request changes something. */
function environmentRef(call: RouteCall): EnvironmentRef {
  const { app, env } = call.params as { app: string; env: string };
  if (call.req.method !== "GET") {
    checkName("app", app);
    checkName("environment", env);
  }
  return { userId: call.principal.userId, app, env };
}

async function findApp(ctx: DeployRouteDeps, userId: string, app: string) {
  return (await ctx.store.apps(userId)).find((a) => a.name === app);
}

/** GET /v1/apps: apps with their environment names. */
async function listApps(call: RouteCall): Promise<void> {
  const { ctx, res, principal } = call;
  refuseHead(call, ["GET"]);
  const listed = [];
  for (const a of await ctx.store.apps(principal.userId)) {
    const environments = await ctx.store.environments(principal.userId, a.name);
    listed.push({ name: a.name, createdAt: a.createdAt, environments: environments.map((e) => e.name) });
  }
  sendJson(res, { apps: listed });
}

/** GET /v1/apps/{app}: the app, its environments and their endpoints. */
async function getApp(call: RouteCall): Promise<void> {
  const { ctx, res, principal, params } = call;
  refuseHead(call, ["GET", "DELETE"]);
  const app = params.app!;
  const appRow = await findApp(ctx, principal.userId, app);
  if (!appRow) throw new HttpProblem(404, `No app "${app}"`);
  const environments = await ctx.store.environments(principal.userId, app);
  sendJson(res, { name: app, createdAt: appRow.createdAt, environments: await Promise.all(environments.map((e) => environmentJson(ctx, e))) });
}

/** DELETE /v1/apps/{app}: the app, its environments, endpoints (once their workers exited) and builds. */
async function deleteApp({ ctx, res, principal, params }: RouteCall): Promise<void> {
  const app = params.app!;
  checkName("app", app);
  // Unknown to any key before it is refused to a key that may not delete.
  if (!(await findApp(ctx, principal.userId, app))) throw new HttpProblem(404, `No app "${app}"`);
  needDeploy(principal);
  const { environments, removed } = await ctx.deployments.deleteApp(principal.userId, app);
  sendJson(res, { deleted: app, environments, removed });
}

/** POST /v1/apps/{app}/builds: upload (gzip tar, header x-svc-sha256); an artifact already kept is not sent again. */
async function uploadBuild({ ctx, req, res, principal, params }: RouteCall): Promise<void> {
  const app = params.app!;
  checkName("app", app);
  needDeploy(principal);
  const sha = String(req.headers["x-svc-sha256"] ?? "").toLowerCase();
  if (!SHA.test(sha)) {
    req.resume();
    throw new HttpProblem(422, "Send the artifact's sha256 (hex) in the x-svc-sha256 header");
  }
  const existing = await ctx.store.build(principal.userId, sha);
  if (existing) {
    req.resume();
    sendJson(res, buildJson(existing));
    return;
  }
  const received = await receiveArtifact(req, ctx.dataDir, sha, { maxBytes: ctx.maxArtifactBytes, inspect: ctx.uploadInspectLimits, idleMs: ctx.uploadIdleMs });
  sendJson(res, buildJson(await ctx.deployments.upload(principal.userId, app, received)), 201);
}

/** GET /v1/apps/{app}/builds/{sha256}: a build already uploaded. */
async function getBuild(call: RouteCall): Promise<void> {
  const { ctx, res, principal, params } = call;
  refuseHead(call, ["GET"]);
  const { app, build: id } = params as { app: string; build: string };
  const build = SHA.test(id) ? await ctx.store.build(principal.userId, id) : undefined;
  if (!build || build.app !== app) throw new HttpProblem(404, `No build ${id} of app "${app}"`);
  sendJson(res, buildJson(build));
}

/** GET /v1/apps/{app}/environments */
async function listEnvironments(call: RouteCall): Promise<void> {
  const { ctx, res, principal, params } = call;
  refuseHead(call, ["GET"]);
  const app = params.app!;
  if (!(await findApp(ctx, principal.userId, app))) throw new HttpProblem(404, `No app "${app}"`);
  const environments = await ctx.store.environments(principal.userId, app);
  sendJson(res, { app, environments: await Promise.all(environments.map((e) => environmentJson(ctx, e))) });
}

/** GET /v1/apps/{app}/environments/{env}: endpoints (those this key may call), build, fingerprint, releases. */
async function getEnvironment(call: RouteCall): Promise<void> {
  const { ctx, res, principal } = call;
  refuseHead(call, ["GET", "PUT", "DELETE"]);
  const ref = environmentRef(call);
  const environment = await ctx.deployments.environment(ref);
  // Environments deployed without a record (by an older svc dev) are answered from the endpoints alone.
  if (!environment) return appEnvironment(call);
  const body = await environmentJson(ctx, environment);
  const visible = body.endpoints.filter((e) => canUseJobs(principal, e.id));
  if (body.endpoints.length > 0 && visible.length === 0) throw new HttpProblem(403, `This API key has no access to app "${ref.app}", environment "${ref.env}"`);
  sendJson(res, { ...body, endpoints: visible });
}

/** PUT /v1/apps/{app}/environments/{env}: create it (the app too) when absent; {created}. */
async function createEnvironment(call: RouteCall): Promise<void> {
  const ref = environmentRef(call);
  needDeploy(call.principal);
  call.req.resume();
  const { environment, created } = await call.ctx.deployments.createEnvironment(ref);
  sendJson(call.res, { ...(await environmentJson(call.ctx, environment)), created }, created ? 201 : 200);
}

/** DELETE /v1/apps/{app}/environments/{env}: the environment and its endpoints (once their workers exited). */
async function deleteEnvironment(call: RouteCall): Promise<void> {
  const ref = environmentRef(call);
  needDeploy(call.principal);
  call.req.resume();
  const removed = await call.ctx.deployments.deleteEnvironment(ref);
  sendJson(call.res, { deleted: ref.env, app: ref.app, removed });
}

/** GET /v1/apps/{app}/environments/{env}/releases: its recent releases, newest first. */
async function listReleases(call: RouteCall): Promise<void> {
  const { ctx, res } = call;
  refuseHead(call, ["GET"]);
  const ref = environmentRef(call);
  if (!(await ctx.deployments.environment(ref))) throw new HttpProblem(404, `No app "${ref.app}" with environment "${ref.env}"`);
  const releases = ctx.deployments.withWaits(oneLive(await ctx.store.releases(ref.userId, ref.app, ref.env, RELEASES_LISTED)));
  sendJson(res, { app: ref.app, env: ref.env, releases });
}

/** An environment action (POST .../{action}): names checked, the deploy scope, its JSON body. */
async function actionCall(call: RouteCall, action: string): Promise<{ ref: EnvironmentRef; body: Record<string, unknown> }> {
  const ref = environmentRef(call);
  needDeploy(call.principal);
  return { ref, body: await jsonBody(call.req, Object.hasOwn(ACTION_MEMBERS, action) ? ACTION_MEMBERS[action] : undefined) };
}

/** POST .../plan {build, manifest?}: what activating the build would do. */
async function planAction(call: RouteCall): Promise<void> {
  const { ref, body } = await actionCall(call, "plan");
  const { build, plan } = await call.ctx.deployments.plan(ref, { build: typeof body.build === "string" ? body.build : "", manifest: body.manifest });
  sendJson(call.res, { ...planJson(call.ctx, plan, build.manifest.routes, false), warnings: call.ctx.deployments.hostWarnings(build.manifest.resources) });
}

/** POST .../activate {build, confirmRemove, wait, rollback}: release the build; 202 with `wait: false` while it starts. */
async function activateAction(call: RouteCall): Promise<void> {
  const { ref, body } = await actionCall(call, "activate");
  const { build, plan, release, done } = await call.ctx.deployments.activate(ref, {
    build: typeof body.build === "string" ? body.build : "",
    confirmRemove: Array.isArray(body.confirmRemove) ? body.confirmRemove.map(String) : [],
    rollback: body.rollback === true,
  });
  const answer = (r: ReleaseRow) => ({
    ...planJson(call.ctx, plan, build.manifest.routes, r.state === "live"),
    build: build.id,
    fingerprint: build.fingerprint,
    release: r,
    warnings: call.ctx.deployments.hostWarnings(build.manifest.resources),
  });
  // `wait: false`: answer now (202 while new workers come up); the outcome is in GET .../releases.
  if (body.wait === false && release.state === "starting") return sendJson(call.res, answer(release), 202);
  sendJson(call.res, answer(await done));
}

/** POST .../undeploy {endpoints: [name] | all: true}: remove endpoints, once their workers exited. */
async function undeployAction(call: RouteCall): Promise<void> {
  const { ref, body } = await actionCall(call, "undeploy");
  const removed = await call.ctx.deployments.undeploy(ref, {
    endpoints: Array.isArray(body.endpoints) ? body.endpoints.map(String) : [],
    all: body.all === true,
  });
  sendJson(call.res, { app: ref.app, env: ref.env, removed });
}

/** POST .../config {resources, dryRun}: a configuration-only update. */
async function configAction(call: RouteCall): Promise<void> {
  const { ref, body } = await actionCall(call, "config");
  const changes = await call.ctx.deployments.configure(ref, { resources: body.resources, dryRun: body.dryRun === true });
  sendJson(call.res, { app: ref.app, env: ref.env, dryRun: body.dryRun === true, changes });
}

/** Any other action: after the checks every action makes, there is none of that name. */
async function unknownAction(call: RouteCall): Promise<void> {
  const action = call.params.action!;
  const { ref } = await actionCall(call, action);
  await call.ctx.deployments.requireEnvironment(ref);
  throw new HttpProblem(404, `No route /v1/apps/${ref.app}/environments/${ref.env}/${action}`);
}

const APPS = { auth: "user", body: "handler", rateLimited: true, purpose: "manage apps" } as const;

/** Apps, their builds (uploads) and environments (releases): one row per route, each parsing, calling Deployments, answering. */
export const DEPLOY_ROUTES: Array<Route<DeployRouteDeps>> = [
  { ...APPS, methods: ["GET"], pattern: "/v1/apps", handler: route(listApps) },
  { ...APPS, methods: ["GET"], pattern: "/v1/apps/:app", handler: route(getApp) },
  { ...APPS, methods: ["DELETE"], pattern: "/v1/apps/:app", handler: route(deleteApp) },
  { ...APPS, methods: ["POST"], pattern: "/v1/apps/:app/builds", handler: route(uploadBuild) },
  { ...APPS, methods: ["GET"], pattern: "/v1/apps/:app/builds/:build", handler: route(getBuild) },
  { ...APPS, methods: ["GET"], pattern: "/v1/apps/:app/environments", handler: route(listEnvironments) },
  { ...APPS, methods: ["GET"], pattern: "/v1/apps/:app/environments/:env", handler: route(getEnvironment) },
  { ...APPS, methods: ["PUT"], pattern: "/v1/apps/:app/environments/:env", handler: route(createEnvironment) },
  { ...APPS, methods: ["DELETE"], pattern: "/v1/apps/:app/environments/:env", handler: route(deleteEnvironment) },
  { ...APPS, methods: ["GET"], pattern: "/v1/apps/:app/environments/:env/releases", handler: route(listReleases) },
  { ...APPS, methods: ["POST"], pattern: "/v1/apps/:app/environments/:env/plan", handler: route(planAction) },
  { ...APPS, methods: ["POST"], pattern: "/v1/apps/:app/environments/:env/activate", handler: route(activateAction) },
  { ...APPS, methods: ["POST"], pattern: "/v1/apps/:app/environments/:env/undeploy", handler: route(undeployAction) },
  { ...APPS, methods: ["POST"], pattern: "/v1/apps/:app/environments/:env/config", handler: route(configAction) },
  { ...APPS, methods: ["POST"], pattern: "/v1/apps/:app/environments/:env/:action", handler: route(unknownAction) },
];

/** Releases an environment's record lists (newest first). */
const RELEASES_LISTED = 10;

/** The answer to an activation whose release did not switch: which endpoint, the worker's error, what serves. */
function releaseProblem(release: ReleaseRow): HttpProblem {
  if (release.state === "superseded")
    return new HttpProblem(409, "A newer activation of this environment took over before this one switched", { members: { release } });
  const why = release.error;
  const serving = release.previousBuildId ? `build ${release.previousBuildId.slice(0, 12)} keeps serving` : "nothing was deployed";
  return new HttpProblem(
    422,
    `The release failed: ${why?.endpoint ? `endpoint ${why.endpoint}'s new workers could not start` : "it could not switch"}; ${serving}`,
    {
      errors: why ? [why.message] : [],
      members: { release },
    },
  );
}

function buildJson(b: { id: string; app: string; size: number; fingerprint: string; createdAt: number }) {
  return { id: b.id, app: b.app, size: b.size, fingerprint: b.fingerprint, createdAt: b.createdAt };
}

function planJson(ctx: DeployRouteDeps, plan: ActivationPlan, routes: Record<string, Record<string, string>>, applied: boolean) {
  return {
    applied,
    endpoints: plan.endpoints.map((e) => ({
      ...e,
      url: endpointUrl(ctx.url, e.id, e.type),
      routes: Object.keys((Object.hasOwn(routes, e.name) ? routes[e.name] : undefined) ?? {}).sort(),
    })),
    remove: plan.remove,
  };
}

async function environmentJson(ctx: DeployRouteDeps, e: EnvironmentRow) {
  const build = e.buildId ? await ctx.store.build(e.userId, e.buildId) : undefined;
  return {
    app: e.app,
    env: e.name,
    createdAt: e.createdAt,
    activatedAt: e.activatedAt,
    build: e.buildId,
    fingerprint: build?.fingerprint ?? null,
    endpoints: ctx.deployments.endpointsOf(e.userId, e.app, e.name).map((row) => endpointJson(ctx, row, build?.manifest.routes)),
    // The environment's recent releases, newest first, with their outcome (a failed one says which endpoint and why).
    releases: ctx.deployments.withWaits(oneLive(await ctx.store.releases(e.userId, e.app, e.name, RELEASES_LISTED))),
  };
}
