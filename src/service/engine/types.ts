// What the engine's parts and its callers share: the shapes of endpoints, workers and live jobs, the limits, and
// the pure rules over them. Nothing here holds state.

import { FINAL_STATUSES, type JobStatus } from "svc/internal";
import type { JobRow, StoreOp } from "../store/types.js";
import type { WebhookEvent } from "../webhooks/events.js";
import type { StorageState } from "../store/faults.js";
import type { BackoffPolicy } from "./retry-policy.js";
import type { JobResult } from "../../wire/worker.js";
export { MAX_TAKE_WAIT_MS } from "../../wire/worker.js";
import type { DropReason, LogLimits } from "./log-quota.js";
import type { QueueQuotas, QuotaLimit } from "./quotas.js";

export const RUN_RETENTION_MS = 30 * 60_000;
export const RUNSYNC_RETENTION_MS = 60_000;
export const RUNSYNC_WAIT_RETENTION_MAX_MS = 5 * 60_000;
/** The spec's single stream chunk limit. */
export const MAX_CHUNK_BYTES = 1024 * 1024;
/** How long /stream waits for a new chunk before answering with none. */
export const STREAM_WAIT_MS = 1500;

/**
 * A queued job's input longer than this (JSON text) is kept in the store only once its insert is in a batch, and
 * read back when a worker takes the job: memory stays bounded whatever is queued, while small jobs (the hot path)
 * keep theirs and take without a read. The jobs list shows inputs up to the same size.
 */
export const INPUT_HELD_MAX = 64 * 1024;
/**
 * Characters of queued inputs held in memory, service-wide: past this the small ones are kept in the store only too,
 * so what the queue holds stays bounded whatever is queued, by however many users (a normal load stays far below).
 */
export const HELD_INPUTS_MAX = 128 * 1024 * 1024;
/** A live job's `row.input` while its input is kept in the store only (never valid JSON, so a slip shows). */
export const INPUT_IN_STORE = "";

export interface EngineEndpoint {
  id: string;
  /** Its owner, whose queue quota its jobs count against (queue.ts). */
  userId?: string;
  type: "queue" | "lb";
  retries: number;
  /** How long a failed job waits before its retry (absent: DEFAULT_BACKOFF). */
  backoff?: BackoffPolicy;
  executionTimeoutMs: number;
  maxConcurrency: number;
  functions: string[];
}

export type WorkerState = "initializing" | "idle" | "running";

/** Where a worker's driver says it is reachable (each unset where the driver gave none). */
export interface WorkerReach {
  /** The address the service reaches it at (a container's published port): wins over the one it registers. */
  address?: string;
  /** The local socket the driver had it listen on (process driver). */
  socket?: string;
  /** An address that skips the host's port forwarding (a container's IP), to try once it answers. */
  direct?: string;
}

/** A load-balanced worker's server, as it registered it. */
export interface WorkerServes {
  address: string;
  /** The local socket it says it also serves on (used only when its driver gave it that one). */
  socket?: string;
  /** What every request to it must carry (lb-credential.ts); undefined for a prebuilt image, which checks none. */
  credential?: string;
}

/** A worker the service knows: one record per worker, owned by the worker registry (workers.ts). */
export interface WorkerEntry {
  id: string;
  endpointId: string;
  /** The revision it runs, where known (its start, its adoption, what it registered). */
  revision?: string;
  registered: boolean;
  /** It can take work: a queue endpoint's worker once registered, a load-balanced one once /ping said 200. */
  ready: boolean;
  draining: boolean;
  /** Started by the scaler through a driver (vs. a worker that came from outside). */
  managed: boolean;
  reach: WorkerReach;
  /** A load-balanced worker's server (its register call); unset for a queue worker. */
  serves?: WorkerServes;
  concurrency: number;
  /** Leases (job ids) the worker holds. */
  held: Set<string>;
  startedAt: number;
  lastSeen: number;
  /** Since when it holds no job (for idle scale-down). */
  idleSince: number;
  /** In-flight long polls (take/events): a polling worker is alive. */
  polling: number;
  cancel: string[];
  wakeEvents?: () => void;
  /** A release's probe: registered, but takes no job until the release switches (promote). */
  standby?: boolean;
  wakeStandby?: () => void;
}

export function workerState(w: WorkerEntry): WorkerState {
  if (!w.registered || w.standby) return "initializing";
  return w.held.size > 0 ? "running" : "idle";
}

export interface LiveJob {
  row: JobRow;
  leaseExpiresAt: number;
  /** Highest stream chunk seq written. */
  lastSeq: number;
  /** Bumped on every change; a committed final state is dropped from memory only if nothing changed since. */
  version: number;
  /** The commit of its insert, for a job first kept out of the store (a caller about to learn its id waits on it). */
  inserted?: Promise<void>;
  /** UTF-8 bytes of its input, counted against the queue quotas while it waits. */
  inputBytes?: number;
  /** While queued: whose per-user quota it counts against (its endpoint's owner when it was queued). */
  queuedFor?: string;
  /** While queued: the characters of its input it holds in memory (0: kept in the store only). */
  heldChars?: number;
}

export interface EndpointStats {
  completed: number;
  failed: number;
  retried: number;
  inQueue: number;
  /** UTF-8 bytes of the queued jobs' inputs (the queue quotas). */
  inQueueBytes: number;
  inProgress: number;
}

export type CounterKey = "completed" | "failed" | "retried";

/** A worker's result for one of its jobs, as the worker protocol defines it. */
export type DoneResult = JobResult;

export interface EngineHooks {
  /** Jobs are waiting on this endpoint (the scaler may start workers). */
  onDemand?(endpointId: string): void;
  /** A job reached a final state and it is committed. */
  onFinal?(row: JobRow): void;
  /**
   * The webhook message telling `event` of the job (webhooks/index.ts), to write in the same batch as the change it
   * tells of; none when the job has no webhook or its filter leaves the event out. `output`: a progress event's
   * reported value (the record's output in the message).
   */
  webhookOps?(row: JobRow, event: "started" | "progress" | "completed" | "failed", output?: unknown): StoreOp[];
  /** A running job's handler reported progress (row.progress, committed). */
  onProgress?(row: JobRow): void;
  /** A webhook entered the outbox (committed): deliver soon. */
  onWebhook?(): void;
  /** A failed attempt was queued again for an automatic retry. */
  onRetry?(row: JobRow): void;
  /** The store committed one batch of the group commit, taking `seconds`. */
  onCommit?(seconds: number): void;
  /** A worker took jobs (cold start accounting). */
  onTaken?(endpointId: string, workerId: string): void;
  /** The store began refusing writes, or takes them again (said once each way). */
  onStorage?(state: StorageState): void;
  /** Jobs were handed off to the replica serving jobs (committed): tell it (engine/handoff.ts). */
  onHandedOff?(): void;
  /** A subscriber of the worker registry's events (worker-events.ts) threw: said, the others still told. */
  onWorkerEventError?(event: string, err: unknown): void;
  /** Worker log lines dropped: over a quota (engine/log-quota.ts), or refused by the store. */
  onLogsDropped?(reason: DropReason | "storage", count: number): void;
  /** Log lines the retention sweep removed, past their age or beyond their endpoint's size. */
  onLogsRemoved?(reason: "age" | "size", count: number): void;
  /** A submission was refused: its queue quota was used up (engine/quotas.ts). */
  onQuotaRefused?(endpointId: string, limit: QuotaLimit): void;
}

export interface EngineOptions {
  leaseMs: number;
  heartbeatMs: number;
  /** Quotas and retention of worker logs (default DEFAULT_LOG_LIMITS). */
  logLimits?: Partial<LogLimits>;
  /** Queued jobs and input bytes per user and endpoint (default DEFAULT_QUEUE_QUOTAS). */
  queueQuotas?: QueueQuotas;
  /** Characters of queued inputs held in memory before small ones are kept in the store only too (default HELD_INPUTS_MAX). */
  heldInputsMax?: number;
  /**
   * How long a job's record (status, times, attempts, error, worker) is kept as history after its result expired
   * (default JOB_HISTORY_MS_DEFAULT, 7 days; 0: not kept, the job goes with its result).
   */
  jobHistoryMs?: number;
}

export const JOB_HISTORY_MS_DEFAULT = 7 * 24 * 3600_000;

/** What a job submission asks for, once validated (jobs/validate.ts checks a body against the RunRequest schema). */
export interface Submission {
  input: unknown;
  function?: string;
  webhook?: string;
  /** Which events the webhook gets (svc's addition; default: its endpoint's filter, else completed and failed). */
  webhookEvents?: WebhookEvent[];
  executionTimeoutMs?: number;
  /** `policy.ttl`: the job's whole life from submission, queue included (engine/lifetime.ts). */
  lifetimeMs?: number;
  lowPriority?: boolean;
  /** The network volume its `s3Config` named (checked to be its endpoint owner's). */
  s3Bucket?: string;
}

/** A validated submission, and how it came. */
export interface SubmitInput extends Submission {
  sync: boolean;
  /** The `wait` of /runsync when given (longer retention). */
  waitMs?: number;
  /** Automatic retries for this job instead of its endpoint's. */
  maxRetries?: number;
  /**
   * The caller learns the job's id only from its answer (/runsync): the job is written to the store when it ends
   * or when the caller is answered (`JobEngine.persist`), not before. A /runsync then costs one commit, not two,
   * and a job lost to a crash before either was never acknowledged to anyone.
   */
  deferWrite?: boolean;
  /** The job's id when the caller chose it first (an idempotent submit claims its key under it). */
  id?: string;
}

/** How a job ends (FAILED with retries left requeues it instead). */
export interface FinishResult {
  status: "COMPLETED" | "FAILED" | "CANCELLED" | "TIMED_OUT";
  output?: string | null;
  /** FAILED: the handler's error; TIMED_OUT: why, when not its execution timeout (its ttl ran out). */
  error?: DoneResult["error"];
}

export function isFinal(status: JobStatus): boolean {
  return FINAL_STATUSES.includes(status);
}
