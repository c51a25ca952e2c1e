// The service's HTTP API: one table of routes (ROUTES) and the one dispatcher that applies it. A row declares
// its methods, path, who may call it, its body limit, whether it counts against rate limits and whether the
// replica serving jobs answers it; the dispatcher authenticates, forwards, limits, reads or drains bodies,
// answers 404 and 405, and turns every error into application/problem+json (OpenAI's shape under /openai/).
//
//   /v2/{endpoint}/...            job API (user keys: admin, jobs:*, jobs:<endpoint>)
//   /_worker/v1/...               worker protocol (worker tokens only)
//   /v1/apps/..., /v1/endpoints/{id}/logs   apps, releases, state and logs (user keys)
//   /v2/network-volumes, /v1/endpoints, /v1/keys, ...   management (management/index.ts)
//
// Two kinds of address sit outside the table: the public files (the OpenAPI document, the web console), which
// need no key, and load-balanced endpoints (/lb/{id}/... or Host {id}.lb.localhost), whose whole path belongs
// to the user's own server.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "./auth.js";
import { credentialFromHeader, HttpProblem, parseJson, readBody, requestTarget, sendProblem, type RequestTarget } from "./http.js";
import { lbTarget } from "./lb/index.js";
import { isOpenAiPath, openAiRoute } from "./openai-route.js";
import { sendOpenAiProblem } from "../openai/route.js";
import { openAiProblem } from "../openai/format.js";
import { serveConsole } from "./console.js";
import { serveArtifact } from "./artifact-route.js";
import { jobsList } from "./jobs-list.js";
import { RUN_BODY_LIMIT, RUNSYNC_BODY_LIMIT } from "./body-limits.js";
import { asRouteFailure } from "./store/faults.js";
import { forwardRequest } from "./cluster/forward.js";
import { RouteTable, rowFor, type RouteMatch, type RouteRow } from "./router.js";
import type { ApiContext, RouteCall, RouteHandler } from "./api-context.js";
import { handsOffHere, jobRoutes, recordJson, userEndpoint } from "./job-routes.js";
import { workerRoutes } from "./worker-routes.js";
import { logs } from "./state-routes.js";
import { gpuList } from "./gpu-routes.js";
import { MANAGEMENT_ROUTES } from "./management/index.js";
import { DEPLOY_ROUTES } from "./deploy/routes.js";

export type { ApiContext } from "./api-context.js";
export { recordJson, jobClientWorkerCounts, recordParts } from "./job-routes.js";
export { RUN_BODY_LIMIT, RUNSYNC_BODY_LIMIT };
export const WORKER_BODY_LIMIT = 64 * 1024 * 1024;
export const SMALL_BODY_LIMIT = 1024 * 1024;

type Row = RouteRow<RouteHandler>;

const JOB = { auth: "user", bareKey: true, rateLimited: true, jobsReplica: true, purpose: "call the job API" } as const;
const WORKER = { auth: "worker", rateLimited: false, jobsReplica: true, purpose: "call the worker protocol" } as const;
const STATE = { auth: "user", rateLimited: true, body: "none" } as const;

/** Every authenticated route. A path belongs to the first pattern that matches it (router.ts). */
export const ROUTES: readonly Row[] = [
  ...MANAGEMENT_ROUTES,

  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/run", body: RUN_BODY_LIMIT, handedOff: true, handler: jobRoutes.run },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/runsync", body: RUNSYNC_BODY_LIMIT, handler: jobRoutes.runsync },
  { ...JOB, methods: ["GET", "POST"], pattern: "/v2/:endpoint/status/:job", body: "none", handler: jobRoutes.status },
  { ...JOB, methods: ["GET", "POST"], pattern: "/v2/:endpoint/status-sync/:job", body: "none", handler: jobRoutes.statusSync },
  { ...JOB, methods: ["GET", "POST"], pattern: "/v2/:endpoint/stream/:job", body: "none", handler: jobRoutes.stream },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/cancel/:job", body: "none", handler: jobRoutes.cancel },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/retry/:job", body: "none", handler: jobRoutes.retry },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/purge-queue", body: "none", handler: jobRoutes.purgeQueue },
  { ...JOB, methods: ["GET"], pattern: "/v2/:endpoint/health", body: "none", handler: jobRoutes.health },
  { ...JOB, methods: ["GET"], pattern: "/v2/:endpoint/jobs", body: "none", purpose: "list jobs", handler: jobsList },
  // OpenAI's paths under the endpoint (openai-route.ts reads their bodies, within OpenAI's own limit).
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/openai/v1/chat/completions", body: "handler", handler: openAi },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/openai/v1/responses", body: "handler", handler: openAi },
  { ...JOB, methods: ["GET"], pattern: "/v2/:endpoint/openai/v1/responses/:response", body: "none", handler: openAi },
  { ...JOB, methods: ["GET"], pattern: "/v2/:endpoint/openai/v1/models", body: "none", handler: openAi },
  // Any other path there: a 404 that names the OpenAI base.
  { ...JOB, methods: ["GET", "POST", "PUT", "PATCH", "DELETE"], pattern: "/v2/:endpoint/openai/*rest", body: "none", handler: openAi },

  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/register", body: WORKER_BODY_LIMIT, handler: workerRoutes.register },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/fail-start", body: WORKER_BODY_LIMIT, handler: workerRoutes.failStart },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/take", body: WORKER_BODY_LIMIT, handler: workerRoutes.take },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/stream", body: WORKER_BODY_LIMIT, handler: workerRoutes.stream },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/progress", body: WORKER_BODY_LIMIT, handler: workerRoutes.progress },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/done", body: WORKER_BODY_LIMIT, handler: workerRoutes.done },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/heartbeat", body: WORKER_BODY_LIMIT, handler: workerRoutes.heartbeat },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/events", body: WORKER_BODY_LIMIT, handler: workerRoutes.events },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/log", body: WORKER_BODY_LIMIT, handler: workerRoutes.log },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/release", body: WORKER_BODY_LIMIT, handler: workerRoutes.release },
  { ...WORKER, methods: ["GET", "HEAD"], pattern: "/_worker/v1/artifacts/:sha", body: "none", purpose: "download artifacts", handler: serveArtifact },

  ...DEPLOY_ROUTES,
  // A follower's lines arrive on the replica serving jobs; stored lines are read anywhere.
  { ...STATE, methods: ["GET"], pattern: "/v1/endpoints/:endpoint/logs", purpose: "read logs", jobsReplica: followsLogs, handler: logs },
  { ...STATE, methods: ["GET"], pattern: "/v1/gpus", purpose: "read the host's GPUs", handler: gpuList },
];

const TABLE = new RouteTable(ROUTES);

/** A load-balanced endpoint's address, as if it were a row: the proxy reads the body as it streams it. */
const LB_ROW = { auth: "user", bareKey: true, rateLimited: true, jobsReplica: true, purpose: "call load-balanced endpoints", body: "handler" } as const;

function followsLogs(query: URLSearchParams): boolean {
  return ["1", "true"].includes(query.get("follow") ?? "");
}

function openAi(call: RouteCall): Promise<void> {
  const endpoint = userEndpoint(call.ctx, call.principal, call.params.endpoint!);
  const rest = call.url.pathname.split("/").filter(Boolean).slice(3).map(decodeURIComponent);
  return openAiRoute(call.ctx, call.req, call.res, ["v2", endpoint.id, "openai", ...rest], endpoint);
}

/** Where a request target leads: its parsed path and the route rows it belongs to, or the problem it is. */
function resolve(raw: string): { url: RequestTarget; match?: RouteMatch<RouteHandler> } | { problem: unknown } {
  try {
    const url = requestTarget(raw);
    return { url, match: TABLE.match(url.pathname) };
  } catch (err) {
    // Told only once the caller is known to hold a key: an unauthenticated caller learns nothing of paths.
    return { problem: err };
  }
}

function unauthorized(detail: string): HttpProblem {
  return new HttpProblem(401, detail, { headers: { "www-authenticate": "Bearer" } });
}

/** The kind of caller a row admits, or the 403 a wrong kind gets. */
function checkCaller(row: { auth: string; purpose?: string }, principal: Principal): void {
  if (row.auth === "user" && principal.worker) throw new HttpProblem(403, `A worker token cannot ${row.purpose ?? "call this route"}`);
  if (row.auth === "worker" && !principal.worker) throw new HttpProblem(403, `Only worker tokens may ${row.purpose ?? "call this route"}`);
}

function servedByJobsReplica(row: { jobsReplica?: Row["jobsReplica"] } | undefined, method: string | undefined, url: RequestTarget | undefined): boolean {
  if (method !== "GET" && method !== "HEAD") return true;
  const on = row?.jobsReplica;
  return typeof on === "function" ? url !== undefined && on(url.searchParams) : on === true;
}

/** On a replica that does not serve jobs: whether it answers this request itself by handing its job off (job-routes.ts handsOffHere). */
function handedOffHere(ctx: ApiContext, row: object | undefined, match: RouteMatch<RouteHandler> | undefined): boolean {
  return row !== undefined && "handedOff" in row && row.handedOff === true && handsOffHere(ctx, match?.params.endpoint ?? "");
}

export async function handleRequest(ctx: ApiContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    if (ctx.management?.public(ctx, req, res)) return;
    if (serveConsole(req, res)) return;
    const raw = req.url ?? "/";
    const lb = lbTarget(raw, req.headers.host) ? LB_ROW : undefined;
    const target = lb ? undefined : resolve(raw);
    const match = target && "match" in target ? target.match : undefined;
    // A path that names a route but not with this method is 405 only to a caller with a key (below).
    let row: Row | typeof LB_ROW | undefined = lb;
    let wrongMethod: unknown;
    if (match) {
      try {
        row = rowFor(match, req.method);
      } catch (err) {
        wrongMethod = err;
      }
    }

    const credential = credentialFromHeader(req.headers.authorization);
    if (!credential) throw unauthorized("Send an API key in the Authorization header: `Authorization: Bearer <key>`");
    if (!credential.bearer && !(row?.bareKey ?? match?.rows.some((r) => r.bareKey))) {
      throw unauthorized(
        "This route uses bearer authentication: send `Authorization: Bearer <key>` (only the job API, the OpenAI route and load-balanced endpoints also take the bare key)",
      );
    }
    const principal = await ctx.keyring.authenticate(credential.key);
    if (!principal) throw unauthorized("The API key is not valid (unknown, revoked or expired)");

    // Job traffic and changes on a replica that does not serve jobs go to the one that does (which counts their
    // rate limits); reads are answered here.
    const jobsServedBy = ctx.jobsServedBy?.();
    const url = target && "url" in target ? target.url : undefined;
    const handOff = jobsServedBy !== undefined && handedOffHere(ctx, row, match);
    if (jobsServedBy !== undefined && !handOff && servedByJobsReplica(row ?? match?.rows[0], req.method, url)) {
      const nameTarget = ctx.workersDirect === true && url?.pathname.startsWith("/_worker/") === true;
      return await forwardRequest(jobsServedBy, req, res, { nameTarget });
    }
    // Every authenticated request counts against its user's quotas, an unknown path's included; workers never do.
    if (row?.rateLimited !== false) ctx.management?.limit(principal, res);

    if (lb) {
      checkCaller(lb, principal);
      if (await ctx.lb?.route(principal, req, res)) return;
    }
    if (target && "problem" in target) throw target.problem;
    if (wrongMethod) throw wrongMethod;
    if (!row || !("handler" in row) || !match || !url) throw new HttpProblem(404, `No route ${url?.pathname ?? raw.split("?")[0]}`);
    checkCaller(row, principal);
    const route = row;
    if (route.body === "none") req.resume();
    const call: RouteCall = {
      ctx,
      req,
      res,
      url,
      params: match.params,
      principal,
      json: async () => parseJson(await readBody(req, typeof route.body === "number" ? route.body : 0)),
      handOffAs: handOff ? ctx.handOffAs : undefined,
    };
    await route.handler(call);
    // A body the handler never read is drained, so the connection can serve the next request.
    if (!req.readableEnded) req.resume();
  } catch (thrown) {
    const err = asRouteFailure(thrown);
    if (err instanceof HttpProblem) {
      req.resume();
      // Under /openai/ errors also carry OpenAI's `error` object, which OpenAI clients read.
      if (isOpenAiPath(req.url)) return sendOpenAiProblem(res, openAiProblem(err.status, err.message, err.errors ?? []), err.headers);
      sendProblem(res, err.status, err.message, { errors: err.errors, headers: err.headers, members: err.members });
      return;
    }
    if (err instanceof URIError) {
      req.resume();
      sendProblem(res, 400, "The request path is not valid");
      return;
    }
    throw err;
  }
}

/**
 * What a replica that does not serve jobs passes to the one that does: job routes (their OpenAI routes
 * included), the worker protocol and load-balanced endpoints; every request that changes something (a deploy
 * starts and switches workers there; one writer keeps the engine's view and the database in step); and log
 * follows (the lines arrive there). Reads stay on every replica. Read from the route table. Pure.
 */
export function goesToJobsReplica(method: string | undefined, target: string, host: string | undefined): boolean {
  if (lbTarget(target, host)) return true;
  const resolved = resolve(target);
  const match = "match" in resolved ? resolved.match : undefined;
  const row = match ? (match.rows.find((r) => r.methods.includes(method ?? "GET")) ?? match.rows[0]) : undefined;
  return servedByJobsReplica(row, method, "url" in resolved ? resolved.url : undefined);
}

/**
 * Whether a request may send its key bare, without "Bearer". The spec's job API examples send it so: an endpoint's
 * job routes (/v2/{endpoint_id}/run, ...), its OpenAI route and load-balanced addresses take both forms. Every
 * other route (management, app state, logs, the worker protocol) uses bearer authentication only. Read from the
 * route table. Pure.
 */
export function acceptsBareKey(rawUrl: string, host: string | undefined): boolean {
  if (lbTarget(rawUrl, host)) return true;
  const resolved = resolve(rawUrl);
  return "match" in resolved && resolved.match !== undefined && resolved.match.rows.some((r) => r.bareKey === true);
}
