// The service's HTTP API: one table of routes (ROUTES) and the one dispatcher that applies it. A row declares
// its methods, path, who may call it, its body limit, whether it counts against rate limits and whether the
// replica serving jobs answers it; the dispatcher authenticates, forwards, limits, reads or drains bodies,
// answers 404 and 405, and turns every error into application/problem+json (OpenAI's shape under /openai/).
//
//   /v2/{endpoint}/...            job API (user keys: admin, jobs:*, jobs:<endpoint>)
//   /_worker/v1/...               worker protocol (worker tokens only)
//   /v1/apps/..., /v1/endpoints/{id}/logs   apps, releases, state and logs (user keys)
//   /v2/network-volumes, /v1/endpoints, /v1/keys, ...   management (management/index.ts)
//   /metrics, /v1/endpoints/{id}/metrics, /v1/metrics, /v1/usage   what the service tells of itself (metrics/routes.ts)
//
// Two kinds of address sit outside the table: the public files (the OpenAPI document, the web console), which
// need no key, and load-balanced endpoints (/lb/{id}/... or Host {id}.lb.localhost), whose whole path belongs
// to the user's own server.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "./keys/auth.js";
import { credentialFromHeader, parseJson, readBody, requestTarget, type RequestTarget } from "./http/wire.js";
import { HttpProblem, problemOf, sendProblem } from "./http/problems.js";
import { lbTarget } from "./lb/address.js";
import { isOpenAiPath } from "./jobs/openai-route.js";
import { sendOpenAiProblem } from "../openai/route.js";
import { openAiProblem } from "../openai/format.js";
import { serveConsole } from "./http/console.js";
import { WEBHOOK_ROUTES } from "./webhooks/routes.js";
import { RUN_BODY_LIMIT, RUNSYNC_BODY_LIMIT, SMALL_BODY_LIMIT, WORKER_BODY_LIMIT } from "./http/body-limits.js";
import { asRouteFailure, StorageUnavailable } from "./store/faults.js";
import { forwardRequest } from "./cluster/forward.js";
import { RouteTable, rowFor, type RouteMatch, type RouteRow } from "./http/router.js";
import type { ApiContext, RouteCall, RouteHandler } from "./api-context.js";
import { handsOffHere } from "./jobs/routes.js";
import { JOB_ROUTES } from "./jobs/index.js";
import { GPU_ROUTES, WORKER_ROUTES } from "./workers/index.js";
import { logs } from "./state-routes.js";
import { MANAGEMENT_ROUTES } from "./management/index.js";
import { DEPLOY_ROUTES } from "./deploy/routes.js";
import { METRICS_ROUTES } from "./metrics/routes.js";
import { MODEL_ROUTES } from "./models/routes.js";

export type { ApiContext } from "./api-context.js";
export { recordJson, jobClientWorkerCounts, recordParts } from "./jobs/routes.js";
export { RUN_BODY_LIMIT, RUNSYNC_BODY_LIMIT, SMALL_BODY_LIMIT, WORKER_BODY_LIMIT };

type Row = RouteRow<RouteHandler>;

const STATE = { auth: "user", rateLimited: true, body: "none" } as const;

/**
 * Every authenticated route: each feature's rows, over that feature's own dependencies. A path belongs to the
 * first pattern that matches it (http/router.ts).
 */
export const ROUTES: readonly Row[] = [
  ...MANAGEMENT_ROUTES,
  // Endpoints' webhook settings and jobs' delivery logs (webhooks/routes.ts).
  ...WEBHOOK_ROUTES,
  ...JOB_ROUTES,
  ...WORKER_ROUTES,
  ...DEPLOY_ROUTES,
  // A follower's lines arrive on the replica serving jobs; stored lines are read anywhere.
  { ...STATE, methods: ["GET"], pattern: "/v1/endpoints/:endpoint/logs", purpose: "read logs", jobsReplica: followsLogs, handler: logs },
  ...GPU_ROUTES,
  ...MODEL_ROUTES,
  // Prometheus' /metrics, an endpoint's and all endpoints' recent series, usage (metrics/routes.ts).
  ...METRICS_ROUTES,
];

const TABLE = new RouteTable(ROUTES);

/** A load-balanced endpoint's address, as if it were a row: the proxy reads the body as it streams it. */
const LB_ROW = { auth: "user", bareKey: true, rateLimited: true, jobsReplica: true, purpose: "call load-balanced endpoints", body: "handler" } as const;

function followsLogs(query: URLSearchParams): boolean {
  return ["1", "true"].includes(query.get("follow") ?? "");
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

/** On a replica that does not serve jobs: whether it answers this request itself by handing its job off (jobs/routes.ts handsOffHere). */
function handedOffHere(ctx: ApiContext, row: object | undefined, match: RouteMatch<RouteHandler> | undefined): boolean {
  return row !== undefined && "handedOff" in row && row.handedOff === true && handsOffHere(ctx, match?.params.endpoint ?? "");
}

export function handleRequest(ctx: ApiContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  // Traced only when the operator configured traces (tracing/index.ts); otherwise no span, no context, no cost.
  return ctx.tracing ? ctx.tracing.request(req, res, () => measured(ctx, req, res)) : measured(ctx, req, res);
}

/** The route label a request is counted under in the metrics: its row's pattern, never the raw path. */
function routeLabel(lb: boolean, match: RouteMatch<RouteHandler> | undefined, row: { pattern?: string } | undefined): string {
  if (lb) return "/lb/*";
  return row?.pattern ?? match?.rows[0]?.pattern ?? "unmatched";
}

/** A request counted in the metrics (when they are on) under its route's pattern, status and duration. */
async function measured(ctx: ApiContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const metrics = ctx.metrics?.prometheus ? ctx.metrics : undefined;
  if (!metrics) return dispatch(ctx, req, res);
  const started = performance.now();
  const seen: Seen = {};
  let failed = false;
  try {
    await dispatch(ctx, req, res, seen);
  } catch (err) {
    // Answered 500 by the caller (index.ts).
    failed = true;
    throw err;
  } finally {
    if (seen.route !== undefined) metrics.request(req.method ?? "GET", seen.route, failed ? 500 : res.statusCode, started, seen.endpoint);
  }
}

/** What the dispatcher learnt of a request, for its metrics: the route label and the endpoint (unset: a public file). */
interface Seen {
  route?: string;
  endpoint?: string;
}

async function dispatch(ctx: ApiContext, req: IncomingMessage, res: ServerResponse, seen?: Seen): Promise<void> {
  try {
    if (ctx.management?.public(ctx, req, res)) return;
    if (serveConsole(req, res)) return;
    const raw = req.url ?? "/";
    const lb = lbTarget(raw, req.headers.host) ? LB_ROW : undefined;
    const target = lb ? undefined : resolve(raw);
    const match = target && "match" in target ? target.match : undefined;
    if (seen) {
      seen.route = routeLabel(lb !== undefined, match, undefined);
      seen.endpoint = match?.params.endpoint;
    }
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
    if (seen && row && "pattern" in row) seen.route = row.pattern;

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
      // No address to pass it to (the database did not answer who serves jobs): refused as the store failing.
      if (jobsServedBy === null) throw new StorageUnavailable("unavailable", new Error("the replica serving jobs is not known"));
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
    ctx.tracing?.route(req.method, row.pattern);
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
    const problem = problemOf(err);
    if (problem) {
      req.resume();
      // Under /openai/ errors also carry OpenAI's `error` object, which OpenAI clients read.
      if (isOpenAiPath(req.url)) return sendOpenAiProblem(res, openAiProblem(problem.status, problem.message, problem.errors ?? []), problem.headers);
      sendProblem(res, problem.status, problem.message, { errors: problem.errors, headers: problem.headers, members: problem.members });
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
 * job routes (/v2/{endpoint_id}/run, ...), its OpenAI route and load-balanced addresses take both forms, and so
 * do the provider's worker routes (its SDK sends the worker's key bare). Every other route (management, app
 * state, logs, svc's worker protocol) uses bearer authentication only. Read from the route table. Pure.
 */
export function acceptsBareKey(rawUrl: string, host: string | undefined): boolean {
  if (lbTarget(rawUrl, host)) return true;
  const resolved = resolve(rawUrl);
  return "match" in resolved && resolved.match !== undefined && resolved.match.rows.some((r) => r.bareKey === true);
}
