// What the service keeps durably. The job engine batches writes (group commit: one `apply` per tick) and
// reads through the async methods, so a server-grade store (PostgreSQL) can implement the same interface.

import type { JobStatus, ManifestResource } from "svc/internal";
import type { DeployStoreOp, DeployStoreReads } from "./deploy-rows.js";

/** Which jobs a list wants: of these statuses only, made at `since` (epoch ms) or later. */
export interface JobListFilter {
  statuses?: readonly string[];
  since?: number;
}

/** A job's record kept after its result expired (the job history): no input, output or stream. */
export interface JobHistoryRow {
  id: string;
  endpointId: string;
  status: JobStatus;
  function: string | null;
  sync: boolean;
  createdAt: number;
  startedAt: number | null;
  completedAt: number | null;
  error: string | null;
  errorType: string | null;
  attempt: number;
  retried: number;
  workerId: string | null;
  resultExpiredAt: number;
  keptUntil: number;
}

export interface JobRow {
  id: string;
  endpointId: string;
  status: JobStatus;
  /** JSON text of the job's input. */
  input: string;
  function: string | null;
  webhook: string | null;
  /** true for /runsync jobs (shorter default retention). */
  sync: boolean;
  lowPriority: boolean;
  createdAt: number;
  startedAt: number | null;
  completedAt: number | null;
  /** JSON text of the output, when there is one. */
  output: string | null;
  error: string | null;
  errorType: string | null;
  errorStack: string | null;
  /** Attempts taken so far (1 after the first take). */
  attempt: number;
  /** Automatic retries already used. */
  retried: number;
  executionTimeoutMs: number | null;
  /** Retention after completion, ms. */
  ttlMs: number;
  /** Epoch ms after which the job is gone (set when it ends). */
  expiresAt: number | null;
  lease: string | null;
  workerId: string | null;
  /** Stream chunks already returned by /stream. */
  streamCursor: number;
  /** Automatic retries allowed for this job, when it differs from its endpoint's (a streamed chat: 0). */
  maxRetries?: number | null;
  /** Which events its webhook gets (comma-separated, webhooks/events.ts), when the submission said; else its endpoint's. */
  webhookEvents?: string | null;
  /** JSON text of the latest progress its handler reported (ctx.progress) in the attempt running now. */
  progress?: string | null;
  /** Epoch ms before which a job queued again after a failure is not taken (its retry's backoff). */
  notBefore?: number | null;
  /** Epoch ms at which a job that has not ended ends TIMED_OUT: its `policy.ttl` counted from submission. */
  deadlineAt?: number | null;
  /**
   * The network volume its `s3Config` named (the bucket of svc's S3 API): its worker gets `s3Config` with a key of
   * its own on that volume (volumes/job-bucket.ts).
   */
  s3Bucket?: string | null;
}

export type EndpointType = "queue" | "lb";

export interface EndpointRow {
  id: string;
  userId: string;
  app: string;
  env: string;
  name: string;
  type: EndpointType;
  resource: ManifestResource;
  artifactPath: string;
  /** Changes exactly when the workers must be replaced (configuration or artifact changed). */
  revision: string;
  createdAt: number;
  updatedAt: number;
  completed: number;
  failed: number;
  retried: number;
}

export interface KeyRow {
  id: string;
  /** sha256 hex of the key. */
  hash: string;
  userId: string;
  /** "admin", "jobs:*", "jobs:<endpointId>", "worker:<endpointId>". */
  scopes: string[];
  createdAt: number;
  revokedAt: number | null;
  /** Epoch ms after which the key is refused (401); null or absent: never. */
  expiresAt?: number | null;
}

/**
 * The stream of the service's notice that a worker's lines over the log quotas were dropped (engine/log-quota.ts);
 * never a worker's own (stdout, stderr, log).
 */
export const DROPPED_LOG_STREAM = "dropped";

export interface LogRow {
  ts: number;
  endpointId: string;
  workerId: string;
  jobId: string | null;
  stream: string;
  text: string;
}

/** What one pruneLogs removed, and what is left. */
export interface LogPruning {
  removedByAge: number;
  removedBySize: number;
  /** What the removed lines counted (as logBytes counts). */
  removedBytes: number;
}

export interface StreamChunkRow {
  jobId: string;
  seq: number;
  /** JSON text of {output, metrics?}. */
  data: string;
}

/**
 * A webhook message to deliver: written in the same transaction as the job's change it tells of (its final state,
 * its start), deleted once delivered or given up.
 */
export interface WebhookRow {
  id: string;
  jobId: string;
  /** Whose signing secret signs it (the job's endpoint). */
  endpointId: string;
  /** What it tells: started, progress, completed, failed (webhooks/events.ts). */
  event: string;
  url: string;
  /** The job record as posted (JSON text). */
  body: string;
  /** Attempts made so far. */
  attempts: number;
  /** Epoch ms before which it is not tried (again). */
  nextAt: number;
  createdAt: number;
}

/** One delivery attempt of a webhook message, as the job's delivery log shows it. */
export interface WebhookDeliveryRow {
  jobId: string;
  endpointId: string;
  /** The message's `webhook-id`: the same on every attempt of one message. */
  messageId: string;
  event: string;
  /** 1 for the first attempt of the message. */
  attempt: number;
  /** When the attempt started, epoch ms. */
  at: number;
  durationMs: number;
  /** The receiver's HTTP status; null when it gave none (refused connection, timeout...). */
  status: number | null;
  /** Why the attempt failed, when it did. */
  error: string | null;
  /** delivered (2xx), retrying (another attempt is planned), failed (given up). */
  outcome: "delivered" | "retrying" | "failed";
}

/** An endpoint's webhook settings: its event filter and its signing secrets, sealed (secrets/box.ts). */
export interface WebhookSettingsRow {
  endpointId: string;
  /** The endpoint's default event filter (comma-separated); null: completed and failed. */
  events: string | null;
  /** The current signing secret, sealed, base64; null: none made yet. */
  secret: string | null;
  secretKeyId: string | null;
  secretCreatedAt: number | null;
  /** The secret before the last rotation, still signing until `previousExpiresAt`. */
  previousSecret: string | null;
  previousKeyId: string | null;
  previousExpiresAt: number | null;
  updatedAt: number;
}

export type StoreOp =
  | { op: "insertJob"; job: JobRow }
  | { op: "updateJob"; id: string; set: Partial<Omit<JobRow, "id">> }
  | { op: "deleteJob"; id: string }
  | { op: "insertChunk"; chunk: StreamChunkRow }
  /** An attempt that will not count: its chunks no reader has been given yet go (seq > `seq`). */
  | { op: "deleteChunksAfter"; jobId: string; seq: number }
  | { op: "insertLog"; line: LogRow }
  | { op: "upsertEndpoint"; endpoint: EndpointRow }
  | { op: "deleteEndpoint"; id: string }
  | { op: "addCounters"; endpointId: string; completed: number; failed: number; retried: number }
  | { op: "insertKey"; key: KeyRow }
  | { op: "revokeKey"; id: string; at: number }
  | { op: "deleteKey"; id: string }
  | { op: "insertWebhook"; webhook: WebhookRow }
  | { op: "retryWebhook"; id: string; attempts: number; nextAt: number }
  | { op: "deleteWebhook"; id: string }
  | { op: "insertWebhookDelivery"; delivery: WebhookDeliveryRow }
  | { op: "putWebhookSettings"; settings: WebhookSettingsRow }
  /** Delivery logs of jobs no longer stored, attempted before `before` (the log goes with its job). */
  | { op: "pruneWebhookDeliveries"; before: number }
  // Apps, environments, builds
  | DeployStoreOp;

// Apps, environments and builds (DeployStoreReads)
export interface Store extends DeployStoreReads {
  /** Apply the ops in order, atomically (all or none). */
  apply(ops: StoreOp[]): Promise<void>;
  getJob(id: string): Promise<JobRow | undefined>;
  /**
   * The job without reading its output: `output` is null and `outputBytes` its stored size (null: none). The job
   * API reads a large output once (jobOutput) for every concurrent reader instead of once per request.
   */
  getJobHead?(id: string): Promise<(JobRow & { outputBytes: number | null }) | undefined>;
  /** The stored output's JSON text as UTF-8 bytes. */
  jobOutput?(id: string): Promise<Buffer | undefined>;
  /** The job's input (JSON text): the engine keeps large queued inputs here only and reads them back at a take. */
  jobInput(id: string): Promise<string | undefined>;
  /** Jobs that are not final (the queue and running jobs), oldest first: the engine's index is rebuilt from them. */
  activeJobs(): Promise<JobRow[]>;
  chunksAfter(jobId: string, seq: number): Promise<StreamChunkRow[]>;
  lastChunkSeq(jobId: string): Promise<number>;
  /** Ids of jobs whose retention ran out (at most `limit`); the engine deletes them through a batch. */
  expiredJobIds(now: number, limit: number): Promise<string[]>;
  /**
   * Ids of an endpoint's newest jobs (at most `limit`), newest first: the console's job list; only those of
   * `statuses` and made at `since` or later, when given.
   */
  recentJobIds?(endpointId: string, limit: number, filter?: JobListFilter): Promise<string[]>;
  /**
   * Keep the record of these jobs (their result's retention ran out: they are about to be deleted) as history
   * until `keptUntil`: status, times, attempts, error, worker. Their input, output and stream are not kept. A job
   * archived twice keeps its first record.
   */
  archiveJobs?(ids: readonly string[], resultExpiredAt: number, keptUntil: number): Promise<void>;
  /** An endpoint's history records, newest first (at most `limit`), filtered as `recentJobIds` filters. */
  jobHistory?(endpointId: string, limit: number, filter?: JobListFilter): Promise<JobHistoryRow[]>;
  /** One job's history record, when its endpoint is `endpointId`. */
  historyJob?(endpointId: string, id: string): Promise<JobHistoryRow | undefined>;
  /** Delete history records kept until `now` or before (at most `limit`); how many went. */
  sweepJobHistory?(now: number, limit: number): Promise<number>;
  endpoints(): Promise<EndpointRow[]>;
  keyByHash(hash: string): Promise<KeyRow | undefined>;
  /** Webhooks due at `now` (nextAt <= now), oldest first, at most `limit`. */
  dueWebhooks(now: number, limit: number): Promise<WebhookRow[]>;
  /** A job's webhook delivery attempts, oldest first. */
  webhookDeliveries?(jobId: string): Promise<WebhookDeliveryRow[]>;
  /** A job's webhook messages not delivered yet (their next attempt's time), oldest first. */
  pendingWebhooks?(jobId: string): Promise<WebhookRow[]>;
  /** Endpoints' webhook settings: one endpoint's, or all. */
  webhookSettings?(endpointId?: string): Promise<WebhookSettingsRow[]>;
  logs(query: { endpointId: string; jobId?: string; since?: number; afterId?: number; limit: number }): Promise<Array<LogRow & { seq: number }>>;
  /** Texts of an endpoint's notices of dropped lines (DROPPED_LOG_STREAM), oldest first, filtered as `logs` filters. */
  droppedLogNotices?(query: { endpointId: string; jobId?: string; since?: number; limit: number }): Promise<string[]>;
  /**
   * What an endpoint's log lines after `afterSeq` count, the first `limit` of them: their texts' UTF-8 bytes and
   * `lineOverheadBytes` a line (log retention measures an endpoint a part at a time); `lastSeq`: the last line
   * counted, null when there was none.
   */
  logBytes?(query: {
    endpointId: string;
    lineOverheadBytes: number;
    afterSeq: number;
    limit: number;
  }): Promise<{ bytes: number; lines: number; lastSeq: number | null }>;
  /**
   * Delete at most `limit` of an endpoint's oldest log lines, in one transaction: first those written before `before`
   * (by `ts`, from the oldest line on, up to the first newer one), then the oldest lines that count `dropBytes` (as
   * logBytes counts them) less what the first step removed.
   */
  pruneLogs?(query: { endpointId: string; before: number; dropBytes: number; lineOverheadBytes: number; limit: number }): Promise<LogPruning>;
  /**
   * Replicas on one database (PostgreSQL): a replica that does not serve jobs inserts `/run` jobs itself, marked as
   * handed off by `from`; the caller then tells the replica that serves jobs (the change feed's "handoff" notice).
   */
  handOffJobs?(jobs: JobRow[], from: string): Promise<void>;
  /**
   * `apply`, and in the same transaction the replica serving jobs takes the handed-off jobs: every mark is cleared
   * and the marked jobs still queued come back, oldest first. A conditional claim, not a read: each row comes back
   * once, whatever the order of the notices. Jobs the ops themselves write keep their mark until the next one.
   */
  applyAndAdopt?(ops: StoreOp[]): Promise<JobRow[]>;
  /**
   * Reclaim the rows adoptions deleted from the marks' table. Every adoption reads the whole table, and under a
   * steady stream it fills with dead rows faster than PostgreSQL's autovacuum, which visits a database about once
   * a minute, clears them.
   */
  vacuumHandoffs?(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The job lifecycle as conditional commands that report what they changed, so that several service replicas on
 * one database never depend on one process's memory: two claims never get the same job, a completion with a
 * lease that is no longer current changes nothing, an expired lease is found by the database's clock. Both
 * stores implement it; one contract suite (test/store/contract.test.ts) runs against each.
 */
export interface JobCommands {
  /**
   * Up to `max` of the endpoint's queued jobs, normal priority first, oldest first, now IN_PROGRESS under a new
   * lease that expires `leaseMs` from now (the store's clock); `attempt` counts this take. Never a job another
   * claim got.
   */
  claim(request: { endpointId: string; workerId: string; max: number; leaseMs: number }): Promise<Array<JobRow & { leaseExpiresAt: number }>>;
  /**
   * Apply `set` (a final status, output, error...) to the job if it still runs under `lease`; false when the
   * lease is no longer current (expired and requeued, cancelled, completed already). The lease ends with it.
   */
  completeIfLeased(jobId: string, lease: string, set: Partial<Omit<JobRow, "id" | "lease">>): Promise<boolean>;
  /** Push the expiry of these leases `leaseMs` from now; the ones that are no longer current come back as lost. */
  extendLeases(leases: string[], leaseMs: number): Promise<{ extended: string[]; lost: string[] }>;
  /** Running jobs whose lease expired (by the store's clock) back to the queue, at most `limit`; the jobs as they now are. */
  requeueExpired(limit: number): Promise<JobRow[]>;
  /** Requeue a job if it still runs under `lease` (a worker hands it back); false otherwise. */
  releaseLease(jobId: string, lease: string): Promise<boolean>;
  /**
   * End a job that is not final as CANCELLED at `at` (its lease with it; retained for its ttl from then); the job
   * as it now is (a final job unchanged), undefined when unknown.
   */
  cancelJob(jobId: string, at: number): Promise<JobRow | undefined>;
  /** The store's clock, epoch ms. */
  now(): Promise<number>;
}
