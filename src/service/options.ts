// What `startService` is given: the data directory, listeners, drivers, limits and the replicas' settings.

import type { WorkerDriver, WorkerLogLine } from "../drivers/types.js";
import { type LogLimits, type QueueQuotas } from "./engine/index.js";
import type { InspectLimits } from "../artifact/inspect.js";
import type { RetryPolicy } from "./webhooks/schedule.js";
import type { WebhookLookup } from "./webhooks/address-policy.js";
import { type VolumeQuotaMode } from "./volumes/storage.js";
import type { Tracing } from "./tracing/index.js";
import type { Log } from "./logging.js";
import type { DataCenter } from "./management/datacenters.js";
import { type RateWindow } from "./keys/ratelimit.js";
import { type ClientLimits } from "./http/slow-clients.js";
import { type GpuInventory } from "../gpus/inventory.js";

export interface ServiceOptions {
  dataDir: string;
  /**
   * Why this service must serve one user only (`svc server` with process workers and no sandbox, unless the
   * operator says single-tenant): it refuses to start over a store holding keys of several users, and refuses
   * keys for a new user (409).
   */
  singleUser?: string;
  /** A PostgreSQL URL: the state goes there instead of the data directory's SQLite file (storage.ts). */
  storeUrl?: string;
  /**
   * This replica served jobs and lost the lease to (the database did not answer for a lease period): another
   * replica may serve them now, so this one must not go on. `svc server` exits (its supervisor restarts it as a
   * follower); without this hook it is only logged.
   */
  onJobsLeaseLost?(): void;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 = any free port (the default). */
  port?: number;
  /**
   * The S3 API's own port, apart from the console and the job API (volumes/s3-origin.ts): 0 = any free port (the
   * default), null = none (the API is then only under /s3 of `port`). `svc server`: defaultS3Port.
   */
  s3Port?: number | null;
  /**
   * `s3Port` is a default rule's, not the operator's: when another process holds it, the S3 API takes any free port
   * and the log says which (an operator's own port taken stays an error).
   */
  s3PortIsDefault?: boolean;
  /** The address S3 clients use, when it differs from the S3 listener's (default: publicUrl's host at the S3 port). */
  s3PublicUrl?: string;
  /** Where workers run; none => workers come from outside (tests acting as workers). */
  driver?: WorkerDriver;
  /**
   * The host's model cache (docs/models.md): the Hugging Face-compatible hub models are fetched from (default
   * https://huggingface.co), its token, and the size past which least recently used models are evicted (bytes;
   * unset: none). The cache is `<dataDir>/models`.
   */
  models?: { hub?: string; token?: string; cacheSizeBytes?: number; retryMs?: number };
  /** Accepted as admin keys of the default user (e.g. SVC_API_KEY). */
  apiKeys?: string[];
  /** The address clients use, when it differs from the listening one. */
  publicUrl?: string;
  /** Where the other replicas on the same database reach this one (default: the listening address). */
  replicaUrl?: string;
  /** The address of all replicas together (a load balancer in front of them): what workers are given. */
  clusterUrl?: string;
  /** Tell workers the replica serving jobs, to reach it straight (default true). */
  workersDirect?: boolean;
  /** Replicas that do not serve jobs write `/run` jobs themselves, for the one that does to adopt (default true). */
  handOffJobs?: boolean;
  /** A lease lapses this long after the last heartbeat (default 30 s). */
  leaseMs?: number;
  /** Workers heartbeat this often (default 5 s). */
  heartbeatMs?: number;
  /** Expired results, and logs past their retention, are deleted this often (default 10 s). */
  retentionSweepMs?: number;
  /** Quotas and retention of worker logs (default DEFAULT_LOG_LIMITS in engine/log-quota.ts; svc server: config.ts). */
  logLimits?: Partial<LogLimits>;
  /** How long a job's record stays as history after its result expired (default 7 days; 0: not kept). */
  jobHistoryMs?: number;
  /** Operator messages (worker starts, internal errors), with what they are about; the CLI sends them to stderr (logging.ts). */
  log?: Log;
  /** Every line a worker writes, as it comes (`svc dev` prints them in its terminal); the store keeps them too. */
  onWorkerLog?: (entry: { endpoint: string; endpointId: string; workerId: string; line: WorkerLogLine }) => void;
  /** Largest build artifact accepted (default 1.5 GB, or SVC_MAX_ARTIFACT_BYTES). */
  maxArtifactBytes?: number;
  /** How an uploaded archive may expand: entries, bytes, ratio, manifest size (default: a worker's limits). */
  uploadInspectLimits?: Partial<InspectLimits>;
  /** An upload that sends nothing for this long is cut off with 408 (default 60 s). */
  uploadIdleMs?: number;
  /** Data centers (default: one, "local"); the first (or hostDataCenter) is this machine. */
  dataCenters?: DataCenter[];
  hostDataCenter?: string;
  /** Per-user rate-limit windows (default DEFAULT_RATE_WINDOWS in src/service/ratelimit.ts). */
  rateLimits?: RateWindow[];
  /** Queued jobs and input bytes per user and endpoint (default DEFAULT_QUEUE_QUOTAS, engine/quotas.ts). */
  queueQuotas?: QueueQuotas;
  /** How long a request to a load-balanced endpoint waits for a ready worker (default 60 s). */
  lbWaitMs?: number;
  /**
   * Serve plain load-balanced requests and job `/run`s on the LB front (lb/front.ts) instead of node:http. Default on;
   * `SVC_LB_FRONT=off` in the environment turns it off (everything then goes through node:http, as before).
   */
  lbFront?: boolean;
  /**
   * Called once per request node:http answered, when its answer ends (finished or cut off): `svc dev`'s request
   * log. Requests the LB front serves itself are not seen: a caller that wants every one turns `lbFront` off.
   */
  onRequest?: (request: { method: string; path: string; status: number; ms: number; quiet: boolean }) => void;
  /**
   * The key that seals secrets at rest (base64 or hex of 32 bytes), and keys values may still be sealed with
   * (after a rotation). Without a current key: the key in `file` (outside the data directory, so its backups do not
   * hold it), else `<dataDir>/secrets-key`; either made on the first start.
   */
  secretsKeys?: { current?: string; previous?: string[]; file?: string };
  /** What a slow client may cost (send stall timeout, follower caps...); default DEFAULT_CLIENT_LIMITS (svc server parses them from its environment: config.ts). */
  clientLimits?: Partial<ClientLimits>;
  /** Probe workers tried per changed endpoint before a release fails (default 3, or SVC_RELEASE_ATTEMPTS). */
  releaseAttempts?: number;
  /** How long a release's new worker may take to come up (default 5 min, or SVC_RELEASE_START_TIMEOUT_MS). */
  releaseStartTimeoutMs?: number;
  /**
   * This host's GPUs, for a driver whose workers run here (process, Docker): how they are read (default
   * `nvidia-smi` on PATH) and how often utilization and memory are sampled (default 5 s). docs/gpus.md.
   */
  gpus?: { read?: () => Promise<GpuInventory>; sampleMs?: number };
  /**
   * Webhook delivery: the retry schedule (default 5 attempts over a few minutes), an attempt's time limit, how often
   * the outbox is read; where webhooks may go besides public addresses (`allow`: CIDRs, addresses, host names,
   * `*.domain`; default none), and the resolver that names are looked up with at connect time (default the system's).
   */
  webhooks?: { retry?: Partial<RetryPolicy>; timeoutMs?: number; intervalMs?: number; allow?: readonly string[]; lookup?: WebhookLookup };
  /**
   * Tests only: the bytes one "GB" of a network volume's `size` stands for (default 1 GiB), so a test can fill a
   * volume quickly. `svc server` reads it from SVC_TEST_VOLUME_GB_BYTES. docs/volumes.md.
   */
  volumeGbBytes?: number;
  /**
   * Whether a network volume's size binds what workers write to it: `loop`, a filesystem of its own per volume
   * (volumes/storage.ts; `svc server` checks the host can); `off` (default), its size binds S3 writes only.
   */
  volumeQuotas?: VolumeQuotaMode;
  /**
   * Spans of requests and jobs (tracing/index.ts loadTracing), when the operator configured traces; the caller made
   * it and shuts it down after the service closed. Absent: nothing is traced and no tracing code runs.
   */
  tracing?: Tracing;
  /** Prometheus' /metrics and the recent series behind the charts (default on; SVC_METRICS=off). Usage is always kept. */
  metrics?: boolean;
  /** How often running workers' time is written to usage (default a minute). */
  usageFlushMs?: number;
  /** How often queue depth and workers are sampled into the recent series (default 5 s; tests make it short). */
  metricsSampleMs?: number;
}
