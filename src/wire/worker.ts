// svc's worker protocol (/_worker/v1/*, docs/worker-protocol.md), defined once: the messages a worker sends and the
// answers it gets, the readers the service validates bodies with at its edge, and the codes a worker acts on. The
// runtime (src/runtime/api.ts, loop.ts) speaks it, the service's worker routes read it, the engine takes its results.
// Pure: no I/O, nothing of the service or the runtime.

import type { JobS3Config, JobStatus } from "svc/internal";

/** A take's longest wait for a job, in ms (a worker's long poll). */
export const MAX_TAKE_WAIT_MS = 30_000;
/** A progress report's largest JSON text, in bytes. */
export const MAX_PROGRESS_BYTES = 64 * 1024;
/** The most jobs one take asks for, and the most workers' concurrency. */
export const MAX_TAKE_JOBS = 1000;

// ------------------------------------------------------------------------------------------------ messages

/** `register`'s answer. */
export interface RegisterAnswer {
  endpoint: { id: string; name: string; executionTimeoutMs?: number; maxConcurrency?: number };
  leaseMs: number;
  heartbeatMs: number;
  /** The service records results a `take` carries (older services ignore them: send none then). */
  takeResults?: boolean;
}

/** A job a take hands a worker. */
export interface TakenJob {
  id: string;
  lease: string;
  function?: string;
  input: unknown;
  executionTimeoutMs?: number;
  attempt?: number;
  /** The W3C trace context of the job's run, when the service traces (docs/worker-protocol.md). */
  traceparent?: string;
  /** Where the handler may upload, when the submission named a bucket (the handler's ctx.s3Config). */
  s3Config?: JobS3Config;
}

/** A job's result as a worker reports it (`done`, or carried by a `take`). */
export interface JobResult {
  jobId: string;
  lease: string;
  status: "COMPLETED" | "FAILED";
  output?: unknown;
  /** `retryable: false`: the handler said this failure is final (the SDK's NonRetryableError): no retry. */
  error?: { message?: string; type?: string; stack?: string; retryable?: boolean };
}

/**
 * Why a result was not recorded, as a code a worker acts on: `job-final`, the job had already ended (`status` says
 * how: a result resent after its answer was lost finds its own COMPLETED or FAILED); `lease-lost`, the lease is not
 * the job's current one (it lapsed and the job went back to the queue, or was cancelled).
 */
export type ResultRefusal = "job-final" | "lease-lost";

/** The service's answer for one result. `reason` is for people; programs read `code` and `status`. */
export interface ResultAnswer {
  jobId: string;
  accepted: boolean;
  code?: ResultRefusal;
  /** With `job-final`: the status the job ended with. */
  status?: JobStatus;
  reason?: string;
}

/** `take`'s answer: the jobs given, and the answers for the results it carried. */
export interface TakeAnswer {
  jobs: TakenJob[];
  results?: ResultAnswer[];
}

/** `stream`'s and `progress`'s answer. */
export interface LeaseAnswer {
  ok: boolean;
  code?: "lease-lost";
  reason?: string;
}

/** A worker's log line (`log`). */
export interface LogLine {
  ts: number;
  stream: "stdout" | "stderr" | "log";
  jobId?: string;
  text: string;
}

/** The refusal of a result whose lease is not current: `finalStatus`, how the job ended if it has (and is this worker's endpoint's). */
export function refusedResult(jobId: string, finalStatus: JobStatus | undefined): ResultAnswer {
  return finalStatus === undefined
    ? { jobId, accepted: false, code: "lease-lost", reason: "lease lost" }
    : { jobId, accepted: false, code: "job-final", status: finalStatus, reason: `job is ${finalStatus}` };
}

/** A refusal saying the result was recorded already (an earlier attempt of the same request reached the service). */
export function recordedAlready(answer: Pick<ResultAnswer, "code" | "status">): boolean {
  return answer.code === "job-final" && (answer.status === "COMPLETED" || answer.status === "FAILED");
}

export const LEASE_LOST: LeaseAnswer = { ok: false, code: "lease-lost", reason: "lease lost" };

// ------------------------------------------------------------------------------------------------ readers
// Each reads one body field by field, pushing what is wrong (JSON-path first) to `errors`; the route answers 422
// with them. They accept exactly what the messages above describe.

type Body = Record<string, unknown>;

const isObject = (v: unknown): v is Body => typeof v === "object" && v !== null && !Array.isArray(v);

/** An optional integer field from `min` to `max`, else `fallback`. */
export function readInt(body: Body, key: string, min: number, max: number, fallback: number, errors: string[]): number {
  const v = body[key];
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    errors.push(`$.${key}: must be an integer from ${min} to ${max}`);
    return fallback;
  }
  return v;
}

/** An optional list of strings (leases). */
export function readStrings(body: Body, key: string, errors: string[]): string[] {
  const v = body[key];
  if (v === undefined) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
    errors.push(`$.${key}: must be a list of strings`);
    return [];
  }
  return v as string[];
}

/** The `results` list of a `done` (or of a `take` that carries results). */
export function readResults(body: Body, errors: string[]): JobResult[] {
  if (!Array.isArray(body.results)) errors.push("$.results: must be a list");
  const results = (Array.isArray(body.results) ? body.results : []) as unknown[];
  results.forEach((r, i) => {
    if (!isObject(r)) return errors.push(`$.results[${i}]: must be an object`);
    if (typeof r.jobId !== "string") errors.push(`$.results[${i}].jobId: is required`);
    if (typeof r.lease !== "string") errors.push(`$.results[${i}].lease: is required`);
    if (r.status !== "COMPLETED" && r.status !== "FAILED") errors.push(`$.results[${i}].status: must be COMPLETED or FAILED`);
    if (r.error !== undefined && !isObject(r.error)) errors.push(`$.results[${i}].error: must be an object {message, type?, stack?, retryable?}`);
    else if (isObject(r.error) && r.error.retryable !== undefined && typeof r.error.retryable !== "boolean") {
      errors.push(`$.results[${i}].error.retryable: must be a boolean (false: the job fails without a retry)`);
    }
    return undefined;
  });
  return results as JobResult[];
}

/** What a take asks: how many jobs at most, how long to wait for one, and the results it carries. */
export interface TakeRequest {
  max: number;
  waitMs: number;
  results?: JobResult[];
}

export function readTake(body: Body, errors: string[]): TakeRequest {
  const max = readInt(body, "max", 1, MAX_TAKE_JOBS, 1, errors);
  const waitMs = readInt(body, "waitMs", 0, MAX_TAKE_WAIT_MS, 0, errors);
  const results = body.results === undefined ? undefined : readResults(body, errors);
  return { max, waitMs, results };
}

/** A running job's lease (`stream`, `progress`). */
function readJobLease(body: Body, errors: string[]): { jobId: string; lease: string } {
  if (typeof body.jobId !== "string") errors.push("$.jobId: is required");
  if (typeof body.lease !== "string") errors.push("$.lease: is required");
  return { jobId: body.jobId as string, lease: body.lease as string };
}

/** `stream`: chunks of a running job's output. */
export function readStream(body: Body, errors: string[]): { jobId: string; lease: string; chunks: unknown[] } {
  const held = readJobLease(body, errors);
  if (!Array.isArray(body.chunks)) errors.push("$.chunks: must be a list");
  return { ...held, chunks: body.chunks as unknown[] };
}

/** `progress`: a running job's progress, as its JSON text. */
export function readProgress(body: Body, errors: string[]): { jobId: string; lease: string; json: string } {
  const held = readJobLease(body, errors);
  if (!Object.hasOwn(body, "progress") || body.progress === undefined) errors.push("$.progress: is required (any JSON value)");
  const json = JSON.stringify(body.progress ?? null);
  if (Buffer.byteLength(json) > MAX_PROGRESS_BYTES) errors.push(`$.progress: must be at most ${MAX_PROGRESS_BYTES} bytes of JSON`);
  return { ...held, json };
}
