// Routing and handlers of the service's HTTP API. Every request is authenticated first; every error is
// application/problem+json.
//
//   /v2/{endpoint}/...            job API (user keys: admin, jobs:*, jobs:<endpoint>)
//   /_worker/v1/...               worker protocol (worker tokens only)
//   /v1/apps/{app}/environments/{env}, /v1/endpoints/{id}/logs   state and logs (user keys)
//
// Another user's endpoint answers 404, as if it did not exist. Keys come as `Authorization: Bearer <key>`; the
// bare key only on job, OpenAI and load-balanced routes (acceptsBareKey).

import type { IncomingMessage, ServerResponse } from "node:http";
import { canUseJobs, type KeyRing, type Principal } from "./auth.js";
import { isFinal, MAX_TAKE_WAIT_MS, type DoneResult, type JobEngine, type WorkerEntry } from "./engine.js";
import { credentialFromHeader, HttpProblem, intParam, isPlainObject, parseJson, readBody, requestTarget, sendJson, sendPieces, sendProblem, writable, type RequestTarget } from "./http.js";
import { SHARED_OUTPUT_MIN, type ClientGuards } from "./slow-clients.js";
import type { Scaler } from "./scaler.js";
import type { EndpointRow, JobRow, LogRow, Store } from "./store/types.js";
import { deployRoute } from "./deploy/routes.js";
import { MAX_TTL_MS, validateSubmission } from "./validate.js";
import type { Management } from "./management/index.js";
import { addressProblem, lbTarget, type LbRouter } from "./lb/index.js";
import { isOpenAiPath, openAiRoute } from "./openai-route.js";
import { sendOpenAiProblem } from "../openai/route.js";
import { openAiProblem } from "../openai/format.js";
import { serveConsole } from "./console.js";
import { serveArtifact } from "./artifact-route.js";
import type { Secrets } from "./secrets/index.js";
import type { InspectLimits } from "../artifact/inspect.js";
import { isJobsListPath, jobsList } from "./jobs-list.js";

import { RUN_BODY_LIMIT, RUNSYNC_BODY_LIMIT } from "./body-limits.js";

export { RUN_BODY_LIMIT, RUNSYNC_BODY_LIMIT };
export const WORKER_BODY_LIMIT = 64 * 1024 * 1024;
export const SMALL_BODY_LIMIT = 1024 * 1024;
export const RUNSYNC_WAIT_DEFAULT_MS = 90_000;

import type { ReleaseManager } from "./releases/manager.js";
import type { ArtifactStore } from "./artifacts.js";
import { storageCause, StorageUnavailable } from "./store/faults.js";
import { forwardRequest } from "./cluster/forward.js";
import type { EndpointRegistry } from "./endpoint-registry.js";
import type { StartFailures } from "./releases/start-failures.js";

export interface ApiContext {
  engine: JobEngine;
  keyring: KeyRing;
  /** The endpoints served: read here, changed through upsert/remove (endpoint-registry.ts). */
  endpoints: EndpointRegistry;
  url: string;
  scaler(): Scaler | undefined;
  followers: Set<ServerResponse>;
  /** What a slow client may cost: send stall timeout, follower caps, shared large outputs (slow-clients.ts). */
  clients: ClientGuards;
  log(message: string): void;
  leaseMs: number;
  heartbeatMs: number;
  // issue 5: apps, environments, builds
  store: Store;
  dataDir: string;
  /** Build artifacts as every replica reaches them (artifacts.ts). */
  artifacts: ArtifactStore;
  /** Set on a replica that does not serve jobs: the address of the one that does, where job traffic goes (docs/scale-out.md). */
  jobsServedBy?(): string | undefined;
  maxArtifactBytes: number;
  /** How an uploaded archive may expand (tests make these small; defaults: a worker's extraction limits). */
  uploadInspectLimits?: Partial<InspectLimits>;
  uploadIdleMs?: number;
  // issue 4: management API (volumes, REST endpoints, templates, keys), rate limits, OpenAPI
  management?: Management;
  // issue 7: load-balanced endpoints (the proxy and its worker pool)
  lb?: LbRouter;
  /** Users' secrets, given to their endpoints' workers. */
  secrets?: Secrets;
  /** Releases of builds: probe workers first, then the switch (releases/manager.ts). */
  releases: ReleaseManager;
  /** Workers that failed to start, per endpoint (/health's `workers.unhealthy`, an endpoint's last start error). */
  startFailures: StartFailures;
}

/** The job record as the job API returns it (JSON text; output is spliced in without re-encoding). */
export function recordJson(row: JobRow, now: number): string {
  const { head, tail } = recordParts(row, now);
  return row.output === null ? head + tail : head + row.output + tail;
}

/** The job record's JSON around its output: `head + output + tail` (or `head + tail` without output) is recordJson. Pure. */
export function recordParts(row: JobRow, now: number): { head: string; tail: string } {
  const delayTime = Math.max(0, Math.round((row.startedAt ?? (isFinal(row.status) ? row.completedAt ?? now : now)) - row.createdAt));
  const executionTime = row.startedAt === null ? 0 : Math.max(0, Math.round((row.completedAt ?? now) - row.startedAt));
  let text = `{"id":${JSON.stringify(row.id)},"status":"${row.status}","delayTime":${delayTime},"executionTime":${executionTime}`;
  if (row.output !== null) text += `,"output":`;
  let tail = "";
  if (row.error !== null) {
    tail += `,"error":${JSON.stringify(row.error)}`;
    if (row.errorType !== null) tail += `,"errorType":${JSON.stringify(row.errorType)}`;
    if (row.errorStack !== null) tail += `,"errorStack":${JSON.stringify(row.errorStack)}`;
  }
  if (row.retried > 0) tail += `,"retries":${row.retried}`;
  return { head: text, tail: `${tail}}` };
}

/**
 * Send a job record. A large output goes out as one Buffer shared by every answer sending the same job's output
 * right now, in pieces with backpressure (never one multi-MB string per request). `outputBytes`: the size of a
 * stored output the record was read without (engine.recordHead); it is read here once for all its readers.
 */
async function sendRecord(ctx: ApiContext, res: ServerResponse, row: JobRow, now: number, outputBytes: number | null = null): Promise<void> {
  const stallMs = ctx.clients.limits.sendStallMs;
  const text = row.output;
  const size = outputBytes ?? (text === null ? 0 : text.length);
  const stored = outputBytes !== null;
  if (!stored && (text === null || size < SHARED_OUTPUT_MIN || !isFinal(row.status))) {
    const { head, tail } = recordParts(row, now);
    return sendPieces(res, text === null ? [head, tail] : [head, text, tail], stallMs);
  }
  const { head, tail } = recordParts(stored ? { ...row, output: "" } : row, now);
  const shared = await ctx.clients.outputs.acquire(`${row.id}:${row.completedAt ?? 0}`, stored ? size : Buffer.byteLength(text!), async () =>
    stored ? ctx.engine.storedOutput(row.id) : Buffer.from(text!, "utf8"),
  );
  try {
    await sendPieces(res, [head, shared.buffer, tail], stallMs);
  } finally {
    shared.release();
  }
}

function sendText(res: ServerResponse, text: string): void {
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function notFound(what: string): HttpProblem {
  return new HttpProblem(404, what);
}

function methodCheck(req: IncomingMessage, allowed: readonly string[]): void {
  if (!allowed.includes(req.method ?? "")) {
    throw new HttpProblem(405, `${req.method} is not allowed here; use ${allowed.join(" or ")}`, { headers: { allow: allowed.join(", ") } });
  }
}

/**
 * The worker counts the job API's official clients type beside svc's own: `ready` (started and able to take a job:
 * idle or running) and `throttled` (workers the queue calls for beyond workersMax). Pure.
 */
export function jobClientWorkerCounts(
  health: { jobs: { inQueue: number; inProgress: number }; workers: { idle: number; running: number } },
  resource: { workersMax: number; maxConcurrency: number },
): { ready: number; throttled: number } {
  const wanted = Math.ceil((health.jobs.inQueue + health.jobs.inProgress) / Math.max(1, resource.maxConcurrency));
  return { ready: health.workers.idle + health.workers.running, throttled: Math.max(0, wanted - resource.workersMax) };
}

export async function handleRequest(ctx: ApiContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    // issue 4: GET /openapi.json needs no key
    if (ctx.management?.public(ctx, req, res)) return;
    // issue 8: the web console's static files need no key (the page holds no data)
    if (serveConsole(req, res)) return;
    const credential = credentialFromHeader(req.headers.authorization);
    if (!credential) {
      req.resume();
      throw new HttpProblem(401, "Send an API key in the Authorization header: `Authorization: Bearer <key>`", { headers: { "www-authenticate": "Bearer" } });
    }
    if (!credential.bearer && !acceptsBareKey(req.url ?? "/", req.headers.host)) {
      req.resume();
      throw new HttpProblem(
        401,
        "This route uses bearer authentication: send `Authorization: Bearer <key>` (only the job API, the OpenAI route and load-balanced endpoints also take the bare key)",
        { headers: { "www-authenticate": "Bearer" } },
      );
    }
    const principal = await ctx.keyring.authenticate(credential.key);
    if (!principal) {
      req.resume();
      throw new HttpProblem(401, "The API key is not valid (unknown, revoked or expired)", { headers: { "www-authenticate": "Bearer" } });
    }
    // Job traffic and changes on a replica that does not serve jobs go to the one that does (which counts their
    // rate limits); reads are answered here.
    const jobsServedBy = ctx.jobsServedBy?.();
    if (jobsServedBy !== undefined && goesToJobsReplica(req.method, req.url ?? "/", req.headers.host)) return await forwardRequest(jobsServedBy, req, res);
    // issue 4: per-user rate limits on every authenticated request; management routes before the job API
    ctx.management?.limit(principal, res);
    // issue 7: load-balanced endpoints: /lb/{endpoint_id}/... or Host {endpoint_id}.lb.localhost
    if (ctx.lb && (await ctx.lb.route(principal, req, res))) return;
    const url = requestTarget(req.url ?? "/");
    const segments = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
    if (ctx.management && (await ctx.management.route(ctx, principal, req, res, segments))) return;
    // issue 8: an endpoint's recent jobs (the console's job list)
    if (isJobsListPath(segments)) return await jobsList(ctx, principal, req, res, new URL(req.url ?? "/", "http://svc.invalid"), segments[1]!);
    if (segments[0] === "v2" && segments.length >= 3) return await jobRoute(ctx, principal, req, res, url, segments);
    if (segments[0] === "_worker" && segments[1] === "v1" && segments.length === 3) return await workerRoute(ctx, principal, req, res, segments[2]!);
    if (segments[0] === "_worker" && segments[1] === "v1" && segments[2] === "artifacts" && segments.length === 4) return await serveArtifact(ctx, principal, req, res, segments[3]!);
    // issue 5: apps, environments, builds (falls through for environments only the older route knows)
    if (segments[0] === "v1" && segments[1] === "apps" && segments.length <= 6 && (await deployRoute(ctx, principal, req, res, segments))) return;
    if (segments[0] === "v1" && segments[1] === "apps" && segments[3] === "environments" && segments.length === 5) {
      methodCheck(req, ["GET"]);
      return appEnvironment(ctx, principal, res, segments[2]!, segments[4]!);
    }
    if (segments[0] === "v1" && segments[1] === "endpoints" && segments[3] === "logs" && segments.length === 4) {
      methodCheck(req, ["GET"]);
      return await logs(ctx, principal, req, res, url, segments[2]!);
    }
    req.resume();
    throw notFound(`No route ${url.pathname}`);
  } catch (thrown) {
    // A store that cannot be reached or written (a read on a database that is down) is a 503 naming the cause.
    const cause = thrown instanceof HttpProblem ? undefined : storageCause(thrown);
    const err = cause ? new StorageUnavailable(cause, thrown) : thrown;
    if (err instanceof HttpProblem) {
      req.resume();
      // issue 7: under /openai/ errors also carry OpenAI's `error` object, which OpenAI clients read
      if (isOpenAiPath(req.url)) return sendOpenAiProblem(res, openAiProblem(err.status, err.message, err.errors ?? []), err.headers);
      sendProblem(res, err.status, err.message, { errors: err.errors, headers: err.headers, members: err.members });
      return;
    }
    if (err instanceof URIError) {
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
 * follows (the lines arrive there). Reads stay on every replica. Pure.
 */
export function goesToJobsReplica(method: string | undefined, target: string, host: string | undefined): boolean {
  if (method !== "GET" && method !== "HEAD") return true;
  const [path, query = ""] = target.split("?") as [string, string | undefined];
  if (/^\/(v2\/[^/]+\/|_worker\/)/.test(path) && !path.startsWith("/v2/network-volumes")) return true;
  if (/^\/v1\/endpoints\/[^/]+\/logs$/.test(path) && /(^|&)follow=(1|true)(&|$)/.test(query)) return true;
  return lbTarget(target, host) !== undefined;
}

// ------------------------------------------------------------------------------------------- job API

const JOB_ACTIONS: Record<string, { methods: string[]; id: boolean }> = {
  run: { methods: ["POST"], id: false },
  runsync: { methods: ["POST"], id: false },
  status: { methods: ["GET", "POST"], id: true },
  "status-sync": { methods: ["GET", "POST"], id: true },
  stream: { methods: ["GET", "POST"], id: true },
  cancel: { methods: ["POST"], id: true },
  retry: { methods: ["POST"], id: true },
  "purge-queue": { methods: ["POST"], id: false },
  health: { methods: ["GET"], id: false },
};

/** What may follow /v2/{endpoint_id}/ on a route that takes the bare key: the job API, the job list, the OpenAI route. */
const BARE_KEY_ACTIONS = new Set([...Object.keys(JOB_ACTIONS), "jobs", "openai"]);
/** Management families under /v2: their second segment is never an endpoint id. */
const MANAGEMENT_V2 = new Set(["network-volumes", "data-centers", "endpoints"]);

/**
 * Whether a request may send its key bare, without "Bearer". The spec's job API examples send it so: an endpoint's
 * job routes (/v2/{endpoint_id}/run, ...), its OpenAI route and load-balanced addresses take both forms. Every
 * other route (management, app state, logs, the worker protocol) uses bearer authentication only. Pure.
 */
export function acceptsBareKey(rawUrl: string, host: string | undefined): boolean {
  if (lbTarget(rawUrl, host)) return true;
  const seg = rawUrl.split("?", 1)[0]!.split("/").filter(Boolean);
  return seg.length >= 3 && seg[0] === "v2" && !MANAGEMENT_V2.has(seg[1]!) && BARE_KEY_ACTIONS.has(seg[2]!);
}

function userEndpoint(ctx: ApiContext, principal: Principal, id: string): EndpointRow {
  const endpoint = ctx.endpoints.get(id);
  if (!endpoint || endpoint.userId !== principal.userId) throw notFound(`No endpoint ${id}`);
  if (!canUseJobs(principal, id)) throw new HttpProblem(403, `This API key has no access to endpoint ${id}`);
  return endpoint;
}

async function jobRoute(ctx: ApiContext, principal: Principal, req: IncomingMessage, res: ServerResponse, url: RequestTarget, seg: string[]): Promise<void> {
  if (principal.worker) throw new HttpProblem(403, "A worker token cannot call the job API");
  const [, endpointId, action, jobId] = seg as [string, string, string, string | undefined];
  // issue 7: the OpenAI-compatible chat route
  if (action === "openai") return await openAiRoute(ctx, req, res, seg, userEndpoint(ctx, principal, endpointId));
  const spec = JOB_ACTIONS[action];
  if (!spec || (spec.id ? seg.length !== 4 : seg.length !== 3)) throw notFound(`No route ${url.pathname}`);
  methodCheck(req, spec.methods);
  const endpoint = userEndpoint(ctx, principal, endpointId);
  if (endpoint.type !== "queue" && action !== "health") throw new HttpProblem(400, `Endpoint ${endpointId} is load-balanced; it has no job API`);
  const { engine } = ctx;
  const now = () => Date.now();

  switch (action) {
    case "run":
    case "runsync": {
      const sync = action === "runsync";
      const wait = sync ? intParam(url, "wait", 1000, 300_000) : undefined;
      const body = parseJson(await readBody(req, sync ? RUNSYNC_BODY_LIMIT : RUN_BODY_LIMIT));
      const { value, errors } = validateSubmission(body, endpoint.resource.functions.map((f) => f.name));
      if (!value) throw new HttpProblem(422, "The job submission is not valid", { errors });
      const row = await engine.submit(endpointId, { ...value, sync, waitMs: wait });
      if (!sync) return sendText(res, `{"id":${JSON.stringify(row.id)},"status":"IN_QUEUE"}`);
      const final = await engine.waitFinalHead(endpointId, row.id, wait ?? RUNSYNC_WAIT_DEFAULT_MS);
      return final ? sendRecord(ctx, res, final.row, now(), final.outputBytes) : sendRecord(ctx, res, row, now());
    }
    case "status":
    case "status-sync": {
      req.resume();
      const ttl = intParam(url, "ttl", 1, MAX_TTL_MS);
      const wait = action === "status-sync" ? intParam(url, "wait", 1000, 300_000) ?? RUNSYNC_WAIT_DEFAULT_MS : 0;
      if (ttl === undefined) {
        // Without its output: a large one is read once for all concurrent readers (sendRecord).
        const head = action === "status-sync" ? await engine.waitFinalHead(endpointId, jobId!, wait) : await engine.recordHead(endpointId, jobId!);
        if (!head) throw notFound(`No job ${jobId} on endpoint ${endpointId} (unknown, or its result expired)`);
        return sendRecord(ctx, res, head.row, now(), head.outputBytes);
      }
      let row: JobRow | undefined = action === "status-sync" ? await engine.waitFinal(endpointId, jobId!, wait) : await engine.record(endpointId, jobId!);
      if (row) row = await engine.setTtl(endpointId, jobId!, ttl);
      if (!row) throw notFound(`No job ${jobId} on endpoint ${endpointId} (unknown, or its result expired)`);
      return sendRecord(ctx, res, row, now());
    }
    case "stream": {
      req.resume();
      const result = await engine.readStream(endpointId, jobId!);
      if (!result) throw notFound(`No job ${jobId} on endpoint ${endpointId} (unknown, or its result expired)`);
      const pieces: string[] = [`{"status":"${result.status}","stream":[`];
      result.chunks.forEach((chunk, i) => (i === 0 ? pieces.push(chunk) : pieces.push(",", chunk)));
      pieces.push("]}");
      return sendPieces(res, pieces, ctx.clients.limits.sendStallMs);
    }
    case "cancel": {
      req.resume();
      const row = await engine.cancel(endpointId, jobId!);
      if (!row) throw notFound(`No job ${jobId} on endpoint ${endpointId} (unknown, or its result expired)`);
      return sendJson(res, { id: row.id, status: row.status });
    }
    case "retry": {
      req.resume();
      const row = await engine.retry(endpointId, jobId!);
      if (!row) throw notFound(`No job ${jobId} on endpoint ${endpointId} (unknown, or its result expired)`);
      // Back in the queue, as /run answers: a waiting worker may already hold it by the time this is sent.
      return sendJson(res, { id: row.id, status: "IN_QUEUE" });
    }
    case "purge-queue": {
      req.resume();
      const removed = await engine.purge(endpointId);
      return sendJson(res, { removed, status: "completed" });
    }
    case "health": {
      req.resume();
      const health = engine.health(endpointId);
      const coldStarts = ctx.scaler()?.coldStarts.get(endpointId) ?? { count: 0, lastMs: null };
      const workers = { ...health.workers, ...jobClientWorkerCounts(health, endpoint.resource), unhealthy: ctx.startFailures.unhealthy(endpointId) };
      const lastStartError = ctx.startFailures.last(endpointId);
      // issue 7: an LB endpoint's cold starts and requests come from its proxy
      return sendJson(res, {
        ...health,
        workers,
        coldStarts,
        ...(endpoint.type === "lb" ? ctx.lb?.health(endpointId) : {}),
        ...(lastStartError ? { lastStartError } : {}),
        // Whether the service can write (a full disk makes every write 503 until it clears).
        storage: engine.storageState(),
      });
    }
  }
}

// ------------------------------------------------------------------------------------------- worker protocol

const WORKER_ROUTES = new Set(["register", "fail-start", "take", "stream", "done", "heartbeat", "events", "log", "release"]);

function optionalInt(body: Record<string, unknown>, key: string, min: number, max: number, fallback: number, errors: string[]): number {
  const v = body[key];
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    errors.push(`$.${key}: must be an integer from ${min} to ${max}`);
    return fallback;
  }
  return v;
}

function stringList(body: Record<string, unknown>, key: string, errors: string[]): string[] {
  const v = body[key];
  if (v === undefined) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
    errors.push(`$.${key}: must be a list of strings`);
    return [];
  }
  return v as string[];
}

/** The `results` list of a done (or of a take that carries results); problems go to `errors`. */
function doneResults(body: Record<string, unknown>, errors: string[]): DoneResult[] {
  if (!Array.isArray(body.results)) errors.push("$.results: must be a list");
  const results = (Array.isArray(body.results) ? body.results : []) as unknown[];
  results.forEach((r, i) => {
    if (!isPlainObject(r)) return errors.push(`$.results[${i}]: must be an object`);
    if (typeof r.jobId !== "string") errors.push(`$.results[${i}].jobId: is required`);
    if (typeof r.lease !== "string") errors.push(`$.results[${i}].lease: is required`);
    if (r.status !== "COMPLETED" && r.status !== "FAILED") errors.push(`$.results[${i}].status: must be COMPLETED or FAILED`);
    if (r.error !== undefined && !isPlainObject(r.error)) errors.push(`$.results[${i}].error: must be an object {message, type?, stack?}`);
    return undefined;
  });
  return results as DoneResult[];
}

async function workerRoute(ctx: ApiContext, principal: Principal, req: IncomingMessage, res: ServerResponse, route: string): Promise<void> {
  if (!principal.worker) throw new HttpProblem(403, "Only worker tokens may call /_worker routes");
  if (!WORKER_ROUTES.has(route)) throw notFound(`No worker route ${route}`);
  methodCheck(req, ["POST"]);
  const { workerId, endpointId } = principal.worker;
  // A release's probe runs the endpoint as the new build makes it (a new endpoint is not in the service yet).
  const endpoint = ctx.releases?.endpointFor(workerId) ?? ctx.endpoints.get(endpointId);
  if (!endpoint) throw notFound(`Endpoint ${endpointId} no longer exists`);
  // No body is an empty one; `null` (like any other non-object) is not an object.
  const parsed = parseJson(await readBody(req, WORKER_BODY_LIMIT));
  const body = parsed === undefined ? {} : parsed;
  if (!isPlainObject(body)) throw new HttpProblem(422, "The body must be a JSON object", { errors: ["$: must be an object"] });
  if (body.workerId !== undefined && body.workerId !== workerId) {
    throw new HttpProblem(403, `This token belongs to worker ${workerId}, not ${String(body.workerId)}`);
  }
  const { engine } = ctx;
  const worker: WorkerEntry = engine.ensureWorker(workerId, endpointId);
  const errors: string[] = [];
  const invalid = () => new HttpProblem(422, `The ${route} body is not valid`, { errors });

  switch (route) {
    case "register": {
      const concurrency = optionalInt(body, "concurrency", 1, 1000, endpoint.resource.maxConcurrency, errors);
      // issue 7: a load-balanced worker says where its HTTP server listens
      const lbAddress = endpoint.type === "lb" && body.address !== undefined ? body.address : undefined;
      if (lbAddress !== undefined) {
        const problem = addressProblem(lbAddress);
        if (problem) errors.push(problem);
      }
      // ...and the local socket it also serves on, if its driver gave it one (used only when the driver agrees).
      const lbSocket = lbAddress !== undefined && body.socket !== undefined ? body.socket : undefined;
      if (lbSocket !== undefined && (typeof lbSocket !== "string" || lbSocket.length === 0 || lbSocket.length > 200)) {
        errors.push("$.socket: must be the socket path the worker was given (SVC_LB_SOCKET)");
      }
      if (errors.length) throw invalid();
      engine.register(workerId, endpointId, concurrency);
      if (typeof lbAddress === "string") ctx.lb?.registered(workerId, endpointId, lbAddress, lbSocket as string | undefined);
      ctx.scaler()?.registered(endpointId);
      // A queue worker registers once its handler loaded (a load-balanced one early: its /ping decides).
      if (endpoint.type === "queue") ctx.releases?.ready(workerId);
      return sendJson(res, {
        endpoint: { id: endpoint.id, name: endpoint.name, executionTimeoutMs: endpoint.resource.executionTimeoutMs, maxConcurrency: endpoint.resource.maxConcurrency },
        leaseMs: ctx.leaseMs,
        heartbeatMs: ctx.heartbeatMs,
        // `take` may carry results (a worker that knows this sends one request per batch instead of two)
        takeResults: true,
      });
    }
    case "fail-start": {
      const message = typeof body.error === "string" ? body.error : JSON.stringify(body.error ?? "unknown error");
      await engine.appendLogs([{ ts: Date.now(), endpointId, workerId, jobId: null, stream: "stderr", text: `worker failed to start: ${message}` }]);
      ctx.log(`worker ${workerId} of endpoint ${endpoint.name} failed to start: ${message}`);
      ctx.startFailures.record(endpointId, workerId, message);
      ctx.releases?.failed(workerId, message);
      return sendJson(res, { ok: true });
    }
    case "take": {
      const max = optionalInt(body, "max", 1, 1000, 1, errors);
      const waitMs = optionalInt(body, "waitMs", 0, MAX_TAKE_WAIT_MS, 0, errors);
      const results = body.results === undefined ? undefined : doneResults(body, errors);
      if (errors.length) throw invalid();
      if (!worker.registered) engine.register(workerId, endpointId, worker.concurrency);
      // Results the take carries are recorded before it waits (not awaited here: jobs taken now share their batch).
      const recorded = results && engine.done(worker, results);
      recorded?.catch(() => undefined); // a failed commit is answered below, not an unhandled rejection meanwhile
      const hangUp = new AbortController();
      const onClose = () => hangUp.abort();
      res.once("close", onClose);
      const jobs = await engine.take(worker, max, waitMs, hangUp.signal);
      res.off("close", onClose);
      const acks = recorded && (await recorded);
      if (res.destroyed) {
        // The worker went away while we answered: hand its jobs straight back to the queue.
        engine.release(worker, jobs.map((j) => j.lease));
        return;
      }
      // The input is spliced in as stored (JSON text): no parse and re-encode per job.
      const items = jobs.map(
        (j) =>
          `{"id":${JSON.stringify(j.id)},"lease":"${j.lease}","function":${JSON.stringify(j.function)},"input":${j.input},` +
          `"executionTimeoutMs":${j.executionTimeoutMs ?? "null"},"attempt":${j.attempt}}`,
      );
      return sendText(res, `{"jobs":[${items.join(",")}]${acks ? `,"results":${JSON.stringify(acks)}` : ""}}`);
    }
    case "stream": {
      if (typeof body.jobId !== "string") errors.push("$.jobId: is required");
      if (typeof body.lease !== "string") errors.push("$.lease: is required");
      if (!Array.isArray(body.chunks)) errors.push("$.chunks: must be a list");
      if (errors.length) throw invalid();
      const ok = await engine.appendStream(worker, body.jobId as string, body.lease, body.chunks as unknown[]);
      return sendJson(res, ok ? { ok: true } : { ok: false, reason: "lease lost" });
    }
    case "done": {
      const results = doneResults(body, errors);
      if (errors.length) throw invalid();
      return sendJson(res, { results: await engine.done(worker, results) });
    }
    case "heartbeat": {
      const leases = stringList(body, "leases", errors);
      if (errors.length) throw invalid();
      return sendJson(res, { lost: engine.heartbeat(worker, leases) });
    }
    case "events": {
      const waitMs = optionalInt(body, "waitMs", 0, MAX_TAKE_WAIT_MS, 0, errors);
      if (errors.length) throw invalid();
      const events = await engine.events(worker, waitMs);
      if (res.destroyed) {
        // Nobody heard these cancellations: give them to the next poll.
        worker.cancel.unshift(...events.cancel);
        return;
      }
      return sendJson(res, events);
    }
    case "log": {
      const lines = body.lines;
      if (!Array.isArray(lines)) errors.push("$.lines: must be a list");
      const rows: LogRow[] = [];
      (Array.isArray(lines) ? lines : []).forEach((l: unknown, i) => {
        if (!isPlainObject(l) || typeof l.text !== "string") return errors.push(`$.lines[${i}].text: is required`);
        rows.push({
          ts: typeof l.ts === "number" ? l.ts : Date.now(),
          endpointId,
          workerId,
          jobId: typeof l.jobId === "string" ? l.jobId : null,
          stream: l.stream === "stdout" || l.stream === "stderr" ? l.stream : "log",
          text: l.text.slice(0, 64 * 1024),
        });
        return undefined;
      });
      if (errors.length) throw invalid();
      await engine.appendLogs(rows);
      return sendJson(res, { ok: true });
    }
    case "release": {
      const leases = stringList(body, "leases", errors);
      if (errors.length) throw invalid();
      return sendJson(res, { released: engine.release(worker, leases) });
    }
  }
}

// ------------------------------------------------------------------------------------------- state and logs

function appEnvironment(ctx: ApiContext, principal: Principal, res: ServerResponse, app: string, env: string): void {
  if (principal.worker) throw new HttpProblem(403, "A worker token cannot read app state");
  const endpoints = [...ctx.endpoints.values()].filter((e) => e.userId === principal.userId && e.app === app && e.env === env);
  if (endpoints.length === 0) throw notFound(`No app "${app}" with environment "${env}"`);
  const visible = endpoints.filter((e) => canUseJobs(principal, e.id));
  if (visible.length === 0) throw new HttpProblem(403, `This API key has no access to app "${app}", environment "${env}"`);
  sendJson(res, {
    app,
    env,
    endpoints: visible
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((e) => ({ name: e.name, id: e.id, url: `${ctx.url}/v2/${e.id}`, type: e.type })),
  });
}

function logJson(l: LogRow): string {
  return JSON.stringify({ ts: l.ts, workerId: l.workerId, jobId: l.jobId, stream: l.stream, text: l.text });
}

async function logs(ctx: ApiContext, principal: Principal, req: IncomingMessage, res: ServerResponse, url: RequestTarget, endpointId: string): Promise<void> {
  req.resume();
  if (principal.worker) throw new HttpProblem(403, "A worker token cannot read logs");
  userEndpoint(ctx, principal, endpointId);
  const jobId = url.searchParams.get("job") ?? undefined;
  const since = intParam(url, "since", 0, Number.MAX_SAFE_INTEGER);
  const follow = ["1", "true"].includes(url.searchParams.get("follow") ?? "");
  if (!follow) {
    const rows = await ctx.engine.queryLogs({ endpointId, jobId, since, limit: LOG_LINES_MAX });
    const pieces: string[] = ['{"lines":['];
    rows.forEach((row, i) => pieces.push(i === 0 ? logJson(row) : `,${logJson(row)}`));
    pieces.push("]}");
    return sendPieces(res, pieces, ctx.clients.limits.sendStallMs);
  }
  const release = ctx.clients.followers.admit(principal.userId);
  const { sendStallMs, followerQueueBytes } = ctx.clients.limits;
  let stall: NodeJS.Timeout | undefined;
  let stop: (() => void) | undefined;
  const end = () => {
    stop?.();
    clearTimeout(stall);
    release();
    ctx.followers.delete(res);
  };
  // res "close" is the client going away (req "close" fires as soon as the request body is read).
  res.on("close", end);
  ctx.followers.add(res);
  res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
  // Send the headers now: a follower with no lines yet must still see the stream open.
  res.flushHeaders();
  /** A follower that reads nothing for the stall timeout is dropped. */
  const watchStall = () => {
    if (!res.writableNeedDrain || stall) return;
    stall = setTimeout(() => res.destroy(), sendStallMs);
    res.once("drain", () => {
      clearTimeout(stall);
      stall = undefined;
    });
  };
  const subscribe = () =>
    ctx.engine.followLogs(endpointId, (lines) => {
      const wanted = lines.filter((l) => (!jobId || l.jobId === jobId) && (since === undefined || l.ts >= since));
      if (wanted.length === 0 || res.destroyed) return;
      res.write(`${wanted.map(logJson).join("\n")}\n`);
      // A follower that falls this far behind is dropped rather than buffered without end.
      if (res.writableLength > followerQueueBytes) return res.destroy();
      watchStall();
    });
  // The backlog (its first LOG_LINES_MAX lines), a page at a time as the client reads it: a paused follower holds
  // one page, not the whole backlog.
  let afterId: number | undefined;
  for (let sent = 0; !res.destroyed; ) {
    const page = await ctx.engine.queryLogs({ endpointId, jobId, since, afterId, limit: Math.min(FOLLOW_PAGE, LOG_LINES_MAX - sent) });
    const last = page.length < FOLLOW_PAGE || sent + page.length >= LOG_LINES_MAX;
    // Follow before anything else runs: no line lands between this read and the follow.
    if (last && !res.destroyed) stop = subscribe();
    if (page.length === 0) return;
    sent += page.length;
    afterId = page[page.length - 1]!.seq;
    const ok = res.write(`${page.map(logJson).join("\n")}\n`);
    if (last) return watchStall();
    if (!ok && !(await writable(res, sendStallMs))) return;
    // One page per turn of the event loop: other requests are served between pages of many followers.
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Stored log lines a logs request returns (before following). */
const LOG_LINES_MAX = 10_000;
/** Backlog lines read and written to a follower at once. */
const FOLLOW_PAGE = 25;
