// The worker protocol (/_worker/v1/...), spoken by workers with their worker tokens: register, fail-start,
// take, stream, progress, done, heartbeat, events, log, release. Their rows (workers/index.ts) declare them: POST only, worker
// tokens only, bodies up to WORKER_BODY_LIMIT.

import { credentialFromHeader, isPlainObject, jsonContentType, parseJson, sendJson, sendText } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import { lbCredentialOfToken } from "../../lb-credential.js";
import type { WorkerEntry } from "../engine/index.js";
import {
  LEASE_LOST,
  MAX_TAKE_JOBS,
  MAX_TAKE_WAIT_MS,
  readInt,
  readProgress,
  readResults,
  readStream,
  readStrings,
  readTake,
  type JobResult,
  type TakeRequest,
} from "../../wire/worker.js";
import { addressProblem } from "../lb/address.js";
import type { EndpointRow, JobRow, LogRow } from "../store/types.js";
import type { Principal } from "../keys/auth.js";
import type { RouteCall } from "../http/router.js";
import type { JobEngine } from "../engine/index.js";
import type { ReleaseManager } from "../releases/manager.js";
import type { StartFailures } from "../releases/start-failures.js";
import type { Scaler } from "./scaler.js";
import type { JobTracing } from "../tracing/index.js";
import type { LargeOutputs } from "../volumes/large-outputs.js";
import type { JobBuckets } from "../volumes/job-bucket.js";
import type { JobS3Config } from "svc/internal";

/** What the worker protocol needs of the service. */
export interface WorkerDeps {
  engine: JobEngine;
  endpoints: ReadonlyMap<string, EndpointRow>;
  leaseMs: number;
  heartbeatMs: number;
  log(message: string): void;
  scaler(): Pick<Scaler, "noticed"> | undefined;
  /** A release's probe workers: their endpoint as the new build makes it, and their start (releases/manager.ts). */
  releases?: Pick<ReleaseManager, "endpointFor" | "failed">;
  startFailures: Pick<StartFailures, "record">;
  /** Jobs' spans, when traces are configured (tracing/index.ts): the take hands each job its run's traceparent. */
  tracing?: { jobs: Pick<JobTracing, "taken" | "reported"> };
  /** Outputs over their endpoint's `largeOutputBytes` go to its network volume, a link in their place. */
  largeOutputs?: Pick<LargeOutputs, "offload">;
  /** A job whose submission named a bucket (`s3Config`) carries a key of its worker's own on it. */
  jobBuckets?: Pick<JobBuckets, "forJobs">;
}

/**
 * The `s3Config` of each taken job whose submission named a bucket (volumes/job-bucket.ts); undefined when none
 * did. When a key cannot be made (the store failing), the jobs go back to the queue and the take answers the
 * failure (this throws).
 */
export async function jobS3Configs(
  ctx: WorkerDeps,
  who: { workerId: string; endpointId: string; worker: WorkerEntry },
  jobs: ReadonlyArray<Pick<JobRow, "id" | "s3Bucket" | "lease">>,
): Promise<Map<string, JobS3Config> | undefined> {
  if (!ctx.jobBuckets || !jobs.some((j) => j.s3Bucket)) return undefined;
  const endpoint = workerEndpoint(ctx, who.workerId, who.endpointId);
  if (!endpoint) return undefined;
  try {
    return await ctx.jobBuckets.forJobs({ workerId: who.workerId, userId: endpoint.userId, endpointName: endpoint.name }, jobs);
  } catch (err) {
    ctx.engine.release(
      who.worker,
      jobs.map((j) => j.lease!),
    );
    throw err;
  }
}

export type WorkerRouteCall = RouteCall<WorkerDeps>;

/** One worker's call: its endpoint (a release's probe sees the endpoint as the new build makes it), entry and body. */
interface WorkerCall {
  call: WorkerRouteCall;
  workerId: string;
  /** The endpoint its token is for. */
  endpointId: string;
  endpoint: EndpointRow;
  worker: WorkerEntry;
  body: Record<string, unknown>;
  errors: string[];
  invalid(): HttpProblem;
}

async function workerCall(call: WorkerRouteCall): Promise<WorkerCall> {
  const { ctx, principal } = call;
  const { workerId, endpointId } = principal.worker!;
  const endpoint = workerEndpoint(ctx, workerId, endpointId);
  if (!endpoint) throw new HttpProblem(404, `Endpoint ${endpointId} no longer exists`);
  const body = workerBody(await call.json(), workerId);
  if (body instanceof HttpProblem) throw body;
  const errors: string[] = [];
  const worker = workerEntry(ctx, workerId, endpointId, body);
  const route = call.url.pathname.slice(call.url.pathname.lastIndexOf("/") + 1);
  return {
    call,
    workerId,
    endpointId,
    endpoint,
    worker,
    body,
    errors,
    invalid: () => new HttpProblem(422, `The ${route} body is not valid`, { errors }),
  };
}

/** A worker call's body as an object, or the problem it is (not an object; another worker's id in it). */
function workerBody(parsed: unknown, workerId: string): Record<string, unknown> | HttpProblem {
  // No body is an empty one; `null` (like any other non-object) is not an object.
  const body = parsed === undefined ? {} : parsed;
  if (!isPlainObject(body)) return new HttpProblem(422, "The body must be a JSON object", { errors: ["$: must be an object"] });
  if (body.workerId !== undefined && body.workerId !== workerId)
    return new HttpProblem(403, `This token belongs to worker ${workerId}, not ${String(body.workerId)}`);
  return body;
}

/** The endpoint a worker's token is for. A release's probe runs it as the new build makes it (a new endpoint is not in the service yet). */
export function workerEndpoint(ctx: WorkerDeps, workerId: string, endpointId: string): EndpointRow | undefined {
  return ctx.releases?.endpointFor(workerId) ?? ctx.endpoints.get(endpointId);
}

/** The engine's entry of a worker that called (a worker the service did not start is noticed by the scaler). */
export function workerEntry(ctx: WorkerDeps, workerId: string, endpointId: string, body: Record<string, unknown>): WorkerEntry {
  const worker = ctx.engine.ensureWorker(workerId, endpointId);
  if (!worker.managed) ctx.scaler()?.noticed(endpointId, workerId, typeof body.revision === "string" ? body.revision : undefined);
  return worker;
}

/** The results as they are recorded: oversize outputs written to the endpoint's volume first (large-outputs.ts). */
export function offloaded(ctx: Pick<WorkerDeps, "largeOutputs">, worker: WorkerEntry, results: JobResult[]): Promise<JobResult[]> {
  return ctx.largeOutputs ? ctx.largeOutputs.offload(worker.id, worker.endpointId, results) : Promise.resolve(results);
}

/**
 * A take's answer (its body's JSON text): the results it carries recorded, then the jobs it is given, waited for
 * up to its waitMs. Undefined when the worker went away meanwhile (`gone`): its jobs went straight back to the
 * queue. Shared by the route and the LB front (quickTake).
 */
async function answerTake(
  ctx: WorkerDeps,
  who: { workerId: string; endpointId: string; worker: WorkerEntry },
  take: TakeRequest,
  hangUp: AbortSignal,
  gone: () => boolean,
): Promise<string | undefined> {
  const { engine } = ctx;
  const { workerId, worker } = who;
  if (!worker.registered) engine.register(workerId, who.endpointId, worker.concurrency, "take");
  // Results the take carries are recorded before it waits (not awaited here: jobs taken now share their batch).
  const results = take.results;
  const recorded = results && offloaded(ctx, worker, results).then((r) => engine.done(worker, r));
  if (take.results) ctx.tracing?.jobs.reported(take.results);
  recorded?.catch(() => undefined); // a failed commit is answered below, not an unhandled rejection meanwhile
  const jobs = await engine.take(worker, take.max, take.waitMs, hangUp);
  const acks = recorded && (await recorded);
  if (gone()) {
    // The worker went away while we answered: hand its jobs straight back to the queue.
    engine.release(
      worker,
      jobs.map((j) => j.lease),
    );
    return undefined;
  }
  const s3 = await jobS3Configs(ctx, who, jobs);
  // Each job's W3C trace context, when traces are on: spans its handler makes join the job's trace.
  const parents = ctx.tracing && jobs.length > 0 ? ctx.tracing.jobs.taken(workerId, jobs) : undefined;
  // The input is spliced in as stored (JSON text): no parse and re-encode per job.
  const items = jobs.map(
    (j) =>
      `{"id":${JSON.stringify(j.id)},"lease":"${j.lease}","function":${JSON.stringify(j.function)},"input":${j.input},` +
      `"executionTimeoutMs":${j.executionTimeoutMs ?? "null"},"attempt":${j.attempt}${parents?.has(j.id) ? `,"traceparent":"${parents.get(j.id)}"` : ""}` +
      `${s3?.has(j.id) ? `,"s3Config":${JSON.stringify(s3.get(j.id))}` : ""}}`,
  );
  return `{"jobs":[${items.join(",")}]${acks ? `,"results":${JSON.stringify(acks)}` : ""}}`;
}

/**
 * A take (`POST /_worker/v1/take`) answered without node:http (the LB front, lb/front.ts), when nothing in it
 * needs more than the common case: a worker's token, its endpoint known, a JSON object body that is a valid take,
 * and this replica serving jobs (another one's workers' calls are passed on by api.ts). What to run once the
 * front commits to it (given the signal of the worker hanging up and whether it has), or undefined when
 * node:http must serve it (and answer whatever problem there is). Nothing is changed before the front commits.
 */
export function quickTake(
  ctx: WorkerDeps & { jobsServedBy?: () => string | null | undefined },
  principal: Principal,
  body: Buffer,
  contentType: string | undefined,
): ((hangUp: AbortSignal, gone: () => boolean) => Promise<string | undefined>) | undefined {
  if (!principal.worker || !jsonContentType(contentType) || ctx.jobsServedBy?.() !== undefined) return undefined;
  const { workerId, endpointId } = principal.worker;
  if (!workerEndpoint(ctx, workerId, endpointId)) return undefined;
  let parsed: unknown;
  try {
    parsed = parseJson(body);
  } catch {
    return undefined;
  }
  const fields = workerBody(parsed, workerId);
  if (fields instanceof HttpProblem) return undefined;
  const errors: string[] = [];
  const take = readTake(fields, errors);
  if (errors.length) return undefined;
  return async (hangUp, gone) => answerTake(ctx, { workerId, endpointId, worker: workerEntry(ctx, workerId, endpointId, fields) }, take, hangUp, gone);
}

export const workerRoutes = {
  async register(call: WorkerRouteCall): Promise<void> {
    const { ctx } = call;
    const { workerId, endpointId, endpoint, body, errors, invalid } = await workerCall(call);
    const concurrency = readInt(body, "concurrency", 1, MAX_TAKE_JOBS, endpoint.resource.maxConcurrency, errors);
    // A load-balanced worker says where its HTTP server listens...
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
    const revision = body.revision;
    if (revision !== undefined && (typeof revision !== "string" || revision.length === 0 || revision.length > 200)) {
      errors.push("$.revision: must be the revision the worker was given (SVC_WORKER_REVISION)");
    }
    if (errors.length) throw invalid();
    // A load-balanced worker's server, with the credential its route server asks of every request: from the token
    // this call was authenticated with (the hash of which is what the keys table holds), so nothing to keep, and
    // the same on any replica. The pool joins it on the registry's event; a queue worker is ready from here.
    const serves =
      typeof lbAddress === "string"
        ? {
            address: lbAddress,
            ...(lbSocket !== undefined ? { socket: lbSocket as string } : {}),
            credential: lbCredentialOfToken(credentialFromHeader(call.req.headers.authorization)!.key),
          }
        : undefined;
    ctx.engine.register(workerId, endpointId, concurrency, "register", serves);
    sendJson(call.res, {
      endpoint: {
        id: endpoint.id,
        name: endpoint.name,
        executionTimeoutMs: endpoint.resource.executionTimeoutMs,
        maxConcurrency: endpoint.resource.maxConcurrency,
      },
      leaseMs: ctx.leaseMs,
      heartbeatMs: ctx.heartbeatMs,
      // `take` may carry results (a worker that knows this sends one request per batch instead of two)
      takeResults: true,
    });
  },

  async failStart(call: WorkerRouteCall): Promise<void> {
    const { ctx } = call;
    const { workerId, endpointId, endpoint, body } = await workerCall(call);
    const message = typeof body.error === "string" ? body.error : JSON.stringify(body.error ?? "unknown error");
    await ctx.engine.appendLogs([{ ts: Date.now(), endpointId, workerId, jobId: null, stream: "stderr", text: `worker failed to start: ${message}` }]);
    ctx.log(`worker ${workerId} of endpoint ${endpoint.name} failed to start: ${message}`);
    ctx.startFailures.record(endpointId, workerId, message);
    ctx.releases?.failed(workerId, message);
    sendJson(call.res, { ok: true });
  },

  async take(call: WorkerRouteCall): Promise<void> {
    const { res } = call;
    const { workerId, endpointId, worker, body, errors, invalid } = await workerCall(call);
    const take = readTake(body, errors);
    if (errors.length) throw invalid();
    const hangUp = new AbortController();
    const onClose = () => hangUp.abort();
    res.once("close", onClose);
    try {
      const text = await answerTake(call.ctx, { workerId, endpointId, worker }, take, hangUp.signal, () => res.destroyed);
      if (text !== undefined) sendText(res, text);
    } finally {
      res.off("close", onClose);
    }
  },

  async stream(call: WorkerRouteCall): Promise<void> {
    const { worker, body, errors, invalid } = await workerCall(call);
    const { jobId, lease, chunks } = readStream(body, errors);
    if (errors.length) throw invalid();
    const ok = await call.ctx.engine.appendStream(worker, jobId, lease, chunks);
    sendJson(call.res, ok ? { ok: true } : LEASE_LOST);
  },

  async progress(call: WorkerRouteCall): Promise<void> {
    const { worker, body, errors, invalid } = await workerCall(call);
    const { jobId, lease, json } = readProgress(body, errors);
    if (errors.length) throw invalid();
    const ok = await call.ctx.engine.progress(worker, jobId, lease, json);
    sendJson(call.res, ok ? { ok: true } : LEASE_LOST);
  },

  async done(call: WorkerRouteCall): Promise<void> {
    const { worker, body, errors, invalid } = await workerCall(call);
    const results = readResults(body, errors);
    if (errors.length) throw invalid();
    call.ctx.tracing?.jobs.reported(results);
    sendJson(call.res, { results: await call.ctx.engine.done(worker, await offloaded(call.ctx, worker, results)) });
  },

  async heartbeat(call: WorkerRouteCall): Promise<void> {
    const { worker, body, errors, invalid } = await workerCall(call);
    const leases = readStrings(body, "leases", errors);
    if (errors.length) throw invalid();
    sendJson(call.res, { lost: call.ctx.engine.heartbeat(worker, leases) });
  },

  async events(call: WorkerRouteCall): Promise<void> {
    const { worker, body, errors, invalid } = await workerCall(call);
    const waitMs = readInt(body, "waitMs", 0, MAX_TAKE_WAIT_MS, 0, errors);
    if (errors.length) throw invalid();
    const events = await call.ctx.engine.events(worker, waitMs);
    if (call.res.destroyed) {
      // Nobody heard these cancellations: give them to the next poll.
      worker.cancel.unshift(...events.cancel);
      return;
    }
    sendJson(call.res, events);
  },

  async log(call: WorkerRouteCall): Promise<void> {
    const { workerId, endpointId, body, errors, invalid } = await workerCall(call);
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
        text: l.text,
      });
      return undefined;
    });
    if (errors.length) throw invalid();
    await call.ctx.engine.appendLogs(rows);
    sendJson(call.res, { ok: true });
  },

  async release(call: WorkerRouteCall): Promise<void> {
    const { worker, body, errors, invalid } = await workerCall(call);
    const leases = readStrings(body, "leases", errors);
    if (errors.length) throw invalid();
    sendJson(call.res, { released: call.ctx.engine.release(worker, leases) });
  },
};
