// The shapes of the service's read answers that other programs read: the console (bundled for the browser), the
// CLI's rendering, and the service's own routes, which build them against these types so that a change on one side
// is a compile error on the other. Types only, importing nothing: the console type-checks this file under its own
// DOM configuration, without Node's types.

/** The worker a GPU is given to, as its owner (or the operator) sees it. */
export interface GpuHolderAnswer {
  workerId: string;
  endpointId: string;
  /** The type of the endpoint's list it was allocated as (null: rebuilt after a restart without it). */
  typeId: string | null;
}

/** One GPU of the service's host (docs/gpus.md, "Seeing the GPUs"). */
export interface GpuAnswer {
  index: number;
  uuid: string;
  name: string;
  typeIds: string[];
  memoryTotalMiB: number;
  memoryUsedMiB: number | null;
  utilizationPercent: number | null;
  migMode: string | null;
  /** null: free; `{held: true}`: another user's worker holds it. */
  holder: GpuHolderAnswer | { held: true } | null;
}

/** `GET /v1/gpus`. */
export interface GpuListAnswer {
  gpus: GpuAnswer[];
  driverVersion: string | null;
  cudaVersion: string | null;
  /** Whether workers get GPUs of their own (the host has GPUs and the service's workers run on it). */
  assigning: boolean;
  /** Whether the service's workers run on this host (process or Docker): with no GPU here, GPU endpoints run on its CPU. */
  workersOnHost: boolean;
  /** Why the last read of nvidia-smi failed (the GPUs shown are those last read). */
  error?: string;
}

/** One hour of one endpoint's use (`GET /v1/usage`'s `hours`). */
export interface UsageHourAnswer {
  /** The hour's start, ISO 8601. */
  hour: string;
  userId: string;
  endpointId: string;
  gpuType: string | null;
  workerSeconds: number;
  gpuSeconds: number;
  jobs: number;
  /** A load-balanced endpoint's requests answered. */
  requests: number;
}

/** `GET /v1/usage`: the span asked (whole hours) and its rows, with their totals. */
export interface UsageAnswer {
  from: string;
  to: string;
  hours: UsageHourAnswer[];
  totals: { workerSeconds: number; gpuSeconds: number; jobs: number; requests: number; gpuSecondsByType: Record<string, number> };
}

/**
 * An endpoint whose workers keep dying (docs/job-api.md, "Crash loops"): `deaths` within `windowMs` since
 * `since`, the last one, and when the next worker may start (null: now). Absent while the endpoint is in none.
 */
export interface CrashLoopAnswer {
  deaths: number;
  windowMs: number;
  since: number;
  /** reason: sigkill (out of memory, or killed from outside), signal, exit_error, exit_zero, start_failed. */
  lastDeath: { at: number; reason: "sigkill" | "signal" | "exit_error" | "exit_zero" | "start_failed"; message: string };
  nextStartAt: number | null;
}

/** `GET /v2/{endpoint}/health`: the interface's fields and what svc adds to them. */
export interface HealthAnswer {
  jobs: { completed: number; failed: number; inProgress: number; inQueue: number; retried: number };
  workers: { idle: number; running: number; initializing?: number; draining?: number; unhealthy?: number; throttled?: number };
  /** Each worker: state, and since when (idle: since its last job ended; else since it started). */
  workerList?: Array<{ id: string; state: "initializing" | "idle" | "running"; since: number; draining: boolean }>;
  /** Why workers are held back: "waiting for a GPU (HOPPER_141: 2 of 2 in use)"; absent when none waits. */
  throttledReason?: string;
  /** The host's GPUs this endpoint's workers hold (absent where the service assigns no GPUs). */
  gpus?: GpuAnswer[];
  coldStarts: { count: number; lastMs: number | null };
  /** Its workers keep dying and their restarts back off; absent when they do not. */
  crashLoop?: CrashLoopAnswer;
  /** The last error of a worker that failed to start (absent: none since the service started). */
  lastStartError?: { message: string; at: number };
  /** Whether the service can write its store (ok false: submissions answer 503 until it clears). */
  storage?: { ok: boolean; cause?: string; message?: string; since?: number; droppedLogLines?: number };
  /**
   * A load-balanced endpoint's requests since the service started: in flight, waiting for a worker, answered by a
   * worker, and failed (the worker did not answer in time, or failed mid-answer). Absent for a queue endpoint.
   */
  requests?: { inFlight: number; waiting: number; served: number; failed: number };
  /** A load-balanced endpoint's workers by their /ping: ready for requests, or not (yet). */
  pool?: { ready: number; notReady: number };
}

/** Why a model could not be fetched, as a code a program acts on (docs/models.md, "Progress and failures"). */
export type ModelFetchCode = "hub_unreachable" | "not_found" | "unauthorized" | "hub_error" | "bad_listing" | "size_mismatch" | "hash_mismatch" | "disk_error";

/** A model of the host's model cache, in it or being fetched (`GET /v1/models`'s `models`). */
export interface ModelStatusAnswer {
  /** org/name@revision, as endpoints name it. */
  model: string;
  state: "ready" | "fetching" | "failed";
  /** The commit the revision was resolved to (ready models). */
  commit?: string;
  bytes?: number;
  /** A fetch's bytes so far, and the model's (absent while its listing is read). */
  doneBytes?: number;
  totalBytes?: number;
  /** When a worker last started with it, epoch ms. */
  lastUsed?: number;
  /** The running or starting workers that use it. */
  inUse: number;
  error?: { code: ModelFetchCode; message: string };
}

/** `GET /v1/models`: the host's model cache (hub and root null where the service starts no workers). */
export interface ModelCacheAnswer {
  hub: string | null;
  root: string | null;
  usedBytes: number;
  limitBytes: number | null;
  models: ModelStatusAnswer[];
}
