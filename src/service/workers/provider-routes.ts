// The provider's worker protocol (wire/provider-worker.ts, docs/provider-workers.md), served on the same engine calls
// as svc's own worker routes (routes.ts): a take is the engine's take, a result its done, a ping its heartbeat,
// the stop poll its events. The provider's workers never see a lease: the service keeps it per (worker, job)
// (engine.leaseOf), so every guarantee of svc's own protocol holds: a lapsed lease requeues the job, a late
// result is refused, cancels and timeouts reach the worker. Authenticated by the worker's own token, sent bare.

import { parseJson, sendText } from "../http/wire.js";
import type { Principal } from "../keys/auth.js";
import { HttpProblem } from "../http/problems.js";
import { MAX_PROGRESS_BYTES, MAX_TAKE_WAIT_MS, type DoneResult, type WorkerEntry } from "../engine/index.js";
import {
  providerIsStream,
  providerPingJobIds,
  providerResult,
  providerStopAnswer,
  providerStreamChunk,
  providerTakeAnswer,
  providerTakeQuery,
  type ProviderRoute,
  type ProviderWorkerCall,
  type ProviderResult,
  type ProviderTakeQuery,
} from "../../wire/provider-worker.js";
import type { EndpointRow } from "../store/types.js";
import type { Scaler } from "./scaler.js";
import { jobS3Configs, offloaded, workerEndpoint, workerEntry, type WorkerDeps, type WorkerRouteCall } from "./routes.js";

/** What the provider's routes need beyond svc's own worker routes: the scaler replaces a worker on request. */
export interface ProviderWorkerDeps extends Omit<WorkerDeps, "scaler"> {
  scaler(): (Pick<Scaler, "noticed"> & Partial<Pick<Scaler, "replace">>) | undefined;
}

type ProviderCall = WorkerRouteCall & { ctx: ProviderWorkerDeps };

/** How long a draining worker is told to wait before it asks again (the SDK backs off 5 s on a 429). */
const DRAINING_RETRY_AFTER_S = 5;

interface ProviderWorker {
  workerId: string;
  endpointId: string;
  endpoint: EndpointRow;
  worker: WorkerEntry;
}

/** The worker that calls: its token's worker and endpoint must be those of the path (else 403). */
function providerWorker(call: ProviderCall): ProviderWorker {
  const { ctx, principal, params } = call;
  const { workerId, endpointId } = principal.worker!;
  if (params.worker !== workerId) throw new HttpProblem(403, `This token belongs to worker ${workerId}, not ${params.worker}`);
  if (params.endpoint !== endpointId) throw new HttpProblem(403, `This token belongs to a worker of endpoint ${endpointId}, not ${params.endpoint}`);
  const endpoint = workerEndpoint(ctx as WorkerDeps, workerId, endpointId);
  if (!endpoint) throw new HttpProblem(404, `Endpoint ${endpointId} no longer exists`);
  const worker = workerEntry(ctx as WorkerDeps, workerId, endpointId, {});
  return { workerId, endpointId, endpoint, worker };
}

/**
 * A provider worker never registers: its first take or ping does it (its concurrency: the most it asked for at
 * once). From then on the scaler counts it ready, as svc's register route does.
 */
function registerOnFirstCall(ctx: ProviderWorkerDeps, w: ProviderWorker, concurrency: number): void {
  if (w.worker.registered) {
    ctx.engine.raiseWorkerConcurrency(w.workerId, concurrency);
    return;
  }
  ctx.engine.register(w.workerId, w.endpointId, concurrency, "provider-call");
}

function refuseDraining(w: ProviderWorker): void {
  // The SDK has no drain signal: a 429 makes it wait and ask again, while its driver stops it (SIGTERM).
  if (w.worker.draining)
    throw new HttpProblem(429, "This worker is being stopped: it takes no more jobs", { headers: { "retry-after": String(DRAINING_RETRY_AFTER_S) } });
}

/** The leases of the jobs the worker names that it still holds (the others it lost, or never had). */
function leasesOf(ctx: ProviderWorkerDeps, worker: WorkerEntry, jobIds: readonly string[]): { leases: string[]; lost: string[] } {
  const leases: string[] = [];
  const lost: string[] = [];
  for (const id of jobIds) {
    const lease = ctx.engine.leaseOf(worker, id);
    if (lease) leases.push(lease);
    else lost.push(id);
  }
  return { leases, lost };
}

function invalid(route: string, errors: string[], status = 422): HttpProblem {
  return new HttpProblem(status, `The ${route} request is not valid`, { errors });
}

/**
 * What a call answers: JSON text (200), null (204: no job came, nothing to stop), or undefined when the worker went
 * away while it waited (what it would have been given went back). A problem is thrown.
 */
type ProviderAnswer = string | null | undefined;

/** A call read and checked, ready to run: given the signal of the worker hanging up, and whether it has. */
type PreparedCall = (hangUp: AbortSignal, gone: () => boolean) => Promise<ProviderAnswer>;

/** The routes with a body (JSON text, whatever the content type says). */
const WITH_BODY: ReadonlySet<ProviderRoute> = new Set(["done", "stream"]);

/**
 * A call read and checked, shared by the routes (node:http) and the LB front: problems with its query or body go
 * to `errors`; a draining worker's take or stop poll is refused (thrown). Reads only: nothing changes until the
 * prepared call runs.
 */
function prepare(
  ctx: ProviderWorkerDeps,
  w: ProviderWorker,
  route: ProviderRoute,
  query: URLSearchParams,
  jobId: string | undefined,
  body: unknown,
  errors: string[],
): PreparedCall {
  switch (route) {
    case "take":
    case "takeBatch": {
      const batch = route === "takeBatch";
      const take = providerTakeQuery(query, batch, errors);
      if (errors.length === 0) refuseDraining(w);
      return (hangUp, gone) => answerTake(ctx, w, take, batch, hangUp, gone);
    }
    case "stop":
      refuseDraining(w);
      return (_hangUp, gone) => answerStop(ctx, w, gone);
    case "ping": {
      const jobIds = providerPingJobIds(query);
      return async () => answerPing(ctx, w, jobIds);
    }
    case "done": {
      providerIsStream(query, errors);
      const result = providerResult(body, errors);
      return () => answerDone(ctx, w, jobId!, result);
    }
    case "stream": {
      const chunk = providerStreamChunk(body, errors);
      return () => answerStream(ctx, w, jobId!, chunk);
    }
  }
}

async function answerTake(
  ctx: ProviderWorkerDeps,
  w: ProviderWorker,
  query: ProviderTakeQuery,
  batch: boolean,
  hangUp: AbortSignal,
  gone: () => boolean,
): Promise<ProviderAnswer> {
  registerOnFirstCall(ctx, w, query.max);
  if (query.jobInProgress === false && w.worker.held.size > 0) {
    // The worker says it runs nothing, yet holds jobs: their take never reached it, or it posted no result (the
    // SDK gives up on a result after its retries). They go back to the queue now rather than when leases lapse.
    ctx.engine.release(w.worker, leasesOf(ctx, w.worker, [...w.worker.held]).leases);
  }
  // A long poll well within the SDK's 90 s (rp_scale.py jobs_fetcher_timeout).
  const jobs = await ctx.engine.take(w.worker, query.max, MAX_TAKE_WAIT_MS, hangUp);
  if (gone()) {
    ctx.engine.release(
      w.worker,
      jobs.map((j) => j.lease),
    );
    return undefined;
  }
  if (jobs.length === 0) return null;
  const s3 = await jobS3Configs(ctx as WorkerDeps, w, jobs);
  ctx.tracing?.jobs.taken(w.workerId, jobs);
  return providerTakeAnswer(jobs, batch, s3);
}

/** Record what a job-done body says: `{}` when it counted; a 409 problem thrown when the job is no longer this worker's. */
async function answerDone(ctx: ProviderWorkerDeps, w: ProviderWorker, jobId: string, result: ProviderResult): Promise<ProviderAnswer> {
  const lease = ctx.engine.leaseOf(w.worker, jobId);
  if (result.kind === "progress") {
    const json = JSON.stringify(result.progress ?? null);
    if (Buffer.byteLength(json) > MAX_PROGRESS_BYTES)
      throw invalid("job-done", [`$.output: a progress update must be at most ${MAX_PROGRESS_BYTES} bytes of JSON`]);
    const ok = lease !== undefined && (await ctx.engine.progress(w.worker, jobId, lease, json));
    if (!ok) throw leaseLost(jobId, "lease lost");
    return "{}";
  }
  const done: DoneResult = {
    jobId,
    // No lease: the engine tells why (the job ended, or another attempt owns it).
    lease: lease ?? "",
    status: result.kind === "completed" ? "COMPLETED" : "FAILED",
    ...(result.output !== undefined ? { output: result.output } : {}),
    ...(result.kind === "failed" ? { error: result.error } : {}),
  };
  ctx.tracing?.jobs.reported([done]);
  const [answer] = await ctx.engine.done(w.worker, await offloaded(ctx, w.worker, [done]));
  // The SDK stops the worker after this job whatever became of its result (rp_scale.py handle_job).
  if (result.stopPod) await replaceAfterJob(ctx, w, jobId);
  if (!answer?.accepted) throw leaseLost(jobId, answer?.reason ?? "lease lost");
  return "{}";
}

async function answerStream(ctx: ProviderWorkerDeps, w: ProviderWorker, jobId: string, chunk: { output: unknown }): Promise<ProviderAnswer> {
  const lease = ctx.engine.leaseOf(w.worker, jobId);
  // Chunks over the 1 MB rule are split by the engine, as for svc's own workers.
  const ok = lease !== undefined && (await ctx.engine.appendStream(w.worker, jobId, lease, [chunk]));
  if (!ok) throw leaseLost(jobId, "lease lost");
  return "{}";
}

async function answerStop(ctx: ProviderWorkerDeps, w: ProviderWorker, gone: () => boolean): Promise<ProviderAnswer> {
  const events = await ctx.engine.events(w.worker, MAX_TAKE_WAIT_MS);
  if (gone()) {
    // Nobody heard these: give them to the next poll.
    w.worker.cancel.unshift(...events.cancel);
    return undefined;
  }
  return events.cancel.length === 0 ? null : providerStopAnswer(events.cancel);
}

function answerPing(ctx: ProviderWorkerDeps, w: ProviderWorker, jobIds: string[]): ProviderAnswer {
  registerOnFirstCall(ctx, w, 1);
  const { leases, lost } = leasesOf(ctx, w.worker, jobIds);
  ctx.engine.heartbeat(w.worker, leases);
  // Jobs it still runs that are no longer its own (cancelled, timed out, or lost to another worker): told again
  // on the stop channel. A stop that reached the SDK before it started the job's task found nothing to stop.
  const unheard = lost.filter((id) => !w.worker.cancel.includes(id));
  if (unheard.length > 0) {
    w.worker.cancel.push(...unheard);
    w.worker.wakeEvents?.();
  }
  // svc's addition: the jobs named that this worker no longer holds (the SDK reads nothing here).
  return JSON.stringify({ lost });
}

/** The SDK's name of each route, for the problems it is answered. */
const ROUTE_NAMES: Record<ProviderRoute, string> = {
  take: "job-take",
  takeBatch: "job-take-batch",
  stop: "job-stop",
  ping: "ping",
  done: "job-done",
  stream: "job-stream",
};

/** A route served through node:http: the same prepared call as the LB front runs, its answer written. */
async function serve(call: ProviderCall, route: ProviderRoute): Promise<void> {
  const { ctx, res } = call;
  const w = providerWorker(call);
  const errors: string[] = [];
  const prepared = prepare(ctx, w, route, call.url.searchParams, call.params.job, WITH_BODY.has(route) ? await call.json() : undefined, errors);
  // A bad take query is a 400: the SDK reads it as "no job" (rp_job.py get_job) rather than failing.
  if (errors.length) throw invalid(ROUTE_NAMES[route], errors, route === "take" || route === "takeBatch" ? 400 : 422);
  const hangUp = new AbortController();
  const onClose = () => hangUp.abort();
  res.once("close", onClose);
  try {
    const answer = await prepared(hangUp.signal, () => res.destroyed);
    if (answer === null) res.writeHead(204).end();
    else if (answer !== undefined) sendText(res, answer);
  } finally {
    res.off("close", onClose);
  }
}

function leaseLost(jobId: string, reason: string): HttpProblem {
  return new HttpProblem(409, `The result for job ${jobId} was not recorded: ${reason}`, { members: { reason } });
}

/**
 * `stopPod` (the handler's `refresh_worker`): the worker takes no more jobs and is replaced. The scaler replaces a
 * worker it started; the request is said in the job's logs either way.
 */
async function replaceAfterJob(ctx: ProviderWorkerDeps, w: ProviderWorker, jobId: string): Promise<void> {
  const replaced = ctx.scaler()?.replace?.(w.workerId) ?? false;
  if (!replaced) ctx.engine.drain(w.workerId);
  const text = `worker ${w.workerId} asked to be replaced after job ${jobId} (refresh_worker)${replaced ? "; a new worker takes its place" : ""}`;
  await ctx.engine.appendLogs([{ ts: Date.now(), endpointId: w.endpointId, workerId: "svc", jobId, stream: "log", text }]);
  ctx.log(text);
}

export const providerWorkerRoutes = {
  take: (call: ProviderCall) => serve(call, "take"),
  takeBatch: (call: ProviderCall) => serve(call, "takeBatch"),
  stop: (call: ProviderCall) => serve(call, "stop"),
  ping: (call: ProviderCall) => serve(call, "ping"),
  done: (call: ProviderCall) => serve(call, "done"),
  stream: (call: ProviderCall) => serve(call, "stream"),
};

/**
 * A provider worker's call answered without node:http (the LB front, lb/front.ts), when nothing in it needs more
 * than the common case: the worker's own token for the path's worker and endpoint, a valid query and body (JSON
 * text), a worker not draining, and this replica serving jobs. The prepared call to run once the front commits to
 * it (a problem it throws is the front's to answer), or undefined when node:http must serve it and answer
 * whatever problem there is. Nothing is changed before the front commits but the worker's entry, which node:http's
 * route makes first thing too.
 */
export function quickProviderCall(
  ctx: ProviderWorkerDeps & { jobsServedBy?: () => string | null | undefined },
  principal: Principal,
  call: ProviderWorkerCall,
  body: Buffer,
): PreparedCall | undefined {
  const owner = principal.worker;
  if (!owner || owner.workerId !== call.workerId || owner.endpointId !== call.endpointId || ctx.jobsServedBy?.() !== undefined) return undefined;
  const endpoint = workerEndpoint(ctx as WorkerDeps, call.workerId, call.endpointId);
  if (!endpoint) return undefined;
  let parsed: unknown;
  if (WITH_BODY.has(call.route)) {
    try {
      parsed = parseJson(body);
    } catch {
      return undefined;
    }
  }
  const w: ProviderWorker = {
    workerId: call.workerId,
    endpointId: call.endpointId,
    endpoint,
    worker: workerEntry(ctx as WorkerDeps, call.workerId, call.endpointId, {}),
  };
  const errors: string[] = [];
  try {
    const prepared = prepare(ctx, w, call.route, new URLSearchParams(call.query), call.jobId, parsed, errors);
    return errors.length ? undefined : prepared;
  } catch (err) {
    // (A draining worker's 429: node:http answers it.)
    if (err instanceof HttpProblem) return undefined;
    throw err;
  }
}
