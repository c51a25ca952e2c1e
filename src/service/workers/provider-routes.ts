// The provider's worker protocol (wire/provider-worker.ts, docs/provider-workers.md), served on the same engine calls
// as svc's own worker routes (routes.ts): a take is the engine's take, a result its done, a ping its heartbeat,
// the stop poll its events. The provider's workers never see a lease: the service keeps it per (worker, job)
// (engine.leaseOf), so every guarantee of svc's own protocol holds: a lapsed lease requeues the job, a late
// result is refused, cancels and timeouts reach the worker. Authenticated by the worker's own token, sent bare.

import { sendText } from "../http/wire.js";
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
  type ProviderResult,
} from "../../wire/provider-worker.js";
import type { EndpointRow } from "../store/types.js";
import type { Scaler } from "./scaler.js";
import { jobS3Configs, offloaded, workerEndpoint, workerEntry, type WorkerDeps, type WorkerRouteCall } from "./routes.js";

/** What the provider's routes need beyond svc's own worker routes: the scaler replaces a worker on request. */
export interface ProviderWorkerDeps extends Omit<WorkerDeps, "scaler"> {
  scaler(): (Pick<Scaler, "noticed" | "registered"> & Partial<Pick<Scaler, "replace">>) | undefined;
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
    if (concurrency > w.worker.concurrency) w.worker.concurrency = concurrency;
    return;
  }
  ctx.engine.register(w.workerId, w.endpointId, concurrency);
  ctx.scaler()?.registered(w.endpointId);
  if (w.endpoint.type === "queue") ctx.releases?.ready(w.workerId);
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

async function take(call: ProviderCall, batch: boolean): Promise<void> {
  const { ctx, res } = call;
  const w = providerWorker(call);
  const errors: string[] = [];
  const query = providerTakeQuery(call.url.searchParams, batch, errors);
  // 400: the SDK reads it as "no job" (rp_job.py get_job) rather than failing.
  if (errors.length) throw invalid(batch ? "job-take-batch" : "job-take", errors, 400);
  refuseDraining(w);
  registerOnFirstCall(ctx, w, query.max);
  if (query.jobInProgress === false && w.worker.held.size > 0) {
    // The worker says it runs nothing, yet holds jobs: their take never reached it, or it posted no result (the
    // SDK gives up on a result after its retries). They go back to the queue now rather than when leases lapse.
    ctx.engine.release(w.worker, leasesOf(ctx, w.worker, [...w.worker.held]).leases);
  }
  const hangUp = new AbortController();
  const onClose = () => hangUp.abort();
  res.once("close", onClose);
  try {
    // A long poll well within the SDK's 90 s (rp_scale.py jobs_fetcher_timeout).
    const jobs = await ctx.engine.take(w.worker, query.max, MAX_TAKE_WAIT_MS, hangUp.signal);
    if (res.destroyed) {
      // The worker went away while we answered: its jobs go straight back to the queue.
      ctx.engine.release(
        w.worker,
        jobs.map((j) => j.lease),
      );
      return;
    }
    if (jobs.length === 0) {
      res.writeHead(204).end();
      return;
    }
    const s3 = await jobS3Configs(ctx as WorkerDeps, w, jobs);
    ctx.tracing?.jobs.taken(w.workerId, jobs);
    sendText(res, providerTakeAnswer(jobs, batch, s3));
  } finally {
    res.off("close", onClose);
  }
}

/** Record what a job-done body says; answers 200 `{}` when it counted, 409 when the job is no longer this worker's. */
async function recordResult(call: ProviderCall, w: ProviderWorker, jobId: string, result: ProviderResult): Promise<void> {
  const { ctx, res } = call;
  const lease = ctx.engine.leaseOf(w.worker, jobId);
  if (result.kind === "progress") {
    const json = JSON.stringify(result.progress ?? null);
    if (Buffer.byteLength(json) > MAX_PROGRESS_BYTES)
      throw invalid("job-done", [`$.output: a progress update must be at most ${MAX_PROGRESS_BYTES} bytes of JSON`]);
    const ok = lease !== undefined && (await ctx.engine.progress(w.worker, jobId, lease, json));
    if (!ok) throw leaseLost(jobId, "lease lost");
    sendText(res, "{}");
    return;
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
  sendText(res, "{}");
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
  async take(call: ProviderCall): Promise<void> {
    await take(call, false);
  },

  async takeBatch(call: ProviderCall): Promise<void> {
    await take(call, true);
  },

  async done(call: ProviderCall): Promise<void> {
    const w = providerWorker(call);
    const errors: string[] = [];
    providerIsStream(call.url.searchParams, errors);
    const result = providerResult(await call.json(), errors);
    if (errors.length) throw invalid("job-done", errors);
    await recordResult(call, w, call.params.job!, result);
  },

  async stream(call: ProviderCall): Promise<void> {
    const w = providerWorker(call);
    const errors: string[] = [];
    const chunk = providerStreamChunk(await call.json(), errors);
    if (errors.length) throw invalid("job-stream", errors);
    const jobId = call.params.job!;
    const lease = call.ctx.engine.leaseOf(w.worker, jobId);
    // Chunks over the 1 MB rule are split by the engine, as for svc's own workers.
    const ok = lease !== undefined && (await call.ctx.engine.appendStream(w.worker, jobId, lease, [chunk]));
    if (!ok) throw leaseLost(jobId, "lease lost");
    sendText(call.res, "{}");
  },

  async stop(call: ProviderCall): Promise<void> {
    const { ctx, res } = call;
    const w = providerWorker(call);
    refuseDraining(w);
    const events = await ctx.engine.events(w.worker, MAX_TAKE_WAIT_MS);
    if (res.destroyed) {
      // Nobody heard these: give them to the next poll.
      w.worker.cancel.unshift(...events.cancel);
      return;
    }
    if (events.cancel.length === 0) {
      res.writeHead(204).end();
      return;
    }
    sendText(res, providerStopAnswer(events.cancel));
  },

  async ping(call: ProviderCall): Promise<void> {
    const { ctx } = call;
    const w = providerWorker(call);
    registerOnFirstCall(ctx, w, 1);
    const { leases, lost } = leasesOf(ctx, w.worker, providerPingJobIds(call.url.searchParams));
    ctx.engine.heartbeat(w.worker, leases);
    // Jobs it still runs that are no longer its own (cancelled, timed out, or lost to another worker): told again
    // on the stop channel. A stop that reached the SDK before it started the job's task found nothing to stop.
    const unheard = lost.filter((id) => !w.worker.cancel.includes(id));
    if (unheard.length > 0) {
      w.worker.cancel.push(...unheard);
      w.worker.wakeEvents?.();
    }
    // svc's addition: the jobs named that this worker no longer holds (the SDK reads nothing here).
    sendText(call.res, JSON.stringify({ lost }));
  },
};
