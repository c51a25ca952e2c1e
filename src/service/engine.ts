// The job engine: the state machine of jobs, the queue index, leases, workers' view of the service, and group
// commit. Memory is authoritative for jobs that are not final (and for final ones until their final state is
// committed); SQLite holds everything and is the truth after a restart.
//
// Group commit: every change appends store ops to the current batch; one transaction per tick (setImmediate)
// writes the batch, then the callers waiting on it answer. A response that acknowledges a change is sent only
// after its batch committed.

import { FINAL_STATUSES, type JobStatus } from "../sdk/jobs-client.js";
import { DEFAULTS } from "../sdk/config.js";
import { HttpProblem } from "./http.js";
import { newId, newToken } from "./auth.js";
import { IdQueue } from "./queue.js";
import { ATTEMPT_MARK_BYTES, markAttempt } from "./chunk-attempt.js";
import type { JobRow, LogRow, Store, StoreOp } from "./store/types.js";
import { describeStorage, storageCause, StorageUnavailable, type StorageState } from "./store/faults.js";

export const RUN_RETENTION_MS = 30 * 60_000;
export const RUNSYNC_RETENTION_MS = 60_000;
export const RUNSYNC_WAIT_RETENTION_MAX_MS = 5 * 60_000;
/** The spec's single stream chunk limit. */
export const MAX_CHUNK_BYTES = 1024 * 1024;
export const MAX_TAKE_WAIT_MS = 30_000;
/** How long /stream waits for a new chunk before answering with none. */
export const STREAM_WAIT_MS = 1500;

export interface EngineEndpoint {
  id: string;
  type: "queue" | "lb";
  retries: number;
  executionTimeoutMs: number;
  maxConcurrency: number;
  functions: string[];
}

export type WorkerState = "initializing" | "idle" | "running";

export interface WorkerEntry {
  id: string;
  endpointId: string;
  registered: boolean;
  draining: boolean;
  /** Started by the scaler through a driver (vs. a worker that came from outside). */
  managed: boolean;
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

interface LiveJob {
  row: JobRow;
  leaseExpiresAt: number;
  /** Highest stream chunk seq written. */
  lastSeq: number;
  /** Bumped on every change; a committed final state is dropped from memory only if nothing changed since. */
  version: number;
}

interface EndpointStats {
  completed: number;
  failed: number;
  retried: number;
  inQueue: number;
  inProgress: number;
}

interface Taker {
  workerId: string;
  max: number;
  /** `committed`: the batch holding the jobs' IN_PROGRESS changes (the answer waits for it). */
  resolve(jobs: JobRow[], committed?: Promise<void>): void;
  timer: NodeJS.Timeout;
}

export interface DoneResult {
  jobId: string;
  lease: string;
  status: "COMPLETED" | "FAILED";
  output?: unknown;
  error?: { message?: string; type?: string; stack?: string };
}

export interface EngineHooks {
  /** Jobs are waiting on this endpoint (the scaler may start workers). */
  onDemand?(endpointId: string): void;
  /** A job reached a final state and it is committed. */
  onFinal?(row: JobRow): void;
  /** The body posted to a job's webhook (its record as the job API shows it), written to the outbox. */
  webhookBody?(row: JobRow): string;
  /** A webhook entered the outbox (committed): deliver soon. */
  onWebhook?(): void;
  /** A worker took jobs (cold start accounting). */
  onTaken?(endpointId: string, workerId: string): void;
  /** The store began refusing writes, or takes them again (said once each way). */
  onStorage?(state: StorageState): void;
}

/** Writes must go through this long after a storage fault before the store counts as ok again. */
const STORAGE_RECOVERED_MS = 2000;

export interface EngineOptions {
  leaseMs: number;
  heartbeatMs: number;
}

export interface SubmitInput {
  input: unknown;
  function?: string;
  webhook?: string;
  executionTimeoutMs?: number;
  ttlMs?: number;
  lowPriority?: boolean;
  sync: boolean;
  /** The `wait` of /runsync when given (longer retention). */
  waitMs?: number;
  /** issue 7: automatic retries for this job instead of its endpoint's. */
  maxRetries?: number;
}

export function isFinal(status: JobStatus): boolean {
  return FINAL_STATUSES.includes(status);
}

export class JobEngine {
  readonly endpoints = new Map<string, EngineEndpoint>();
  readonly workers = new Map<string, WorkerEntry>();
  private readonly live = new Map<string, LiveJob>();
  private readonly leases = new Map<string, string>();
  private readonly running = new Set<string>();
  private readonly queues = new Map<string, { normal: IdQueue; low: IdQueue }>();
  private readonly stats = new Map<string, EndpointStats>();
  private readonly counterDeltas = new Map<string, { completed: number; failed: number; retried: number }>();
  private readonly takers = new Map<string, Taker[]>();
  private readonly jobWaiters = new Map<string, Set<() => void>>();
  private readonly logFollowers = new Map<string, Set<(lines: LogRow[]) => void>>();
  private batch: StoreOp[] = [];
  private batchPromise?: Promise<void>;
  private batchSettle?: { resolve(): void; reject(err: unknown): void };
  private afterCommit: Array<() => void> = [];
  private flushScheduled = false;
  /** Endpoints whose waiting takers get the jobs queued this tick, when the tick's batch is flushed. */
  private readonly dispatchDue = new Set<string>();
  /** Batches commit strictly in order, even with a store whose apply is truly asynchronous. */
  private lastFlush: Promise<void> = Promise.resolve();
  private closed = false;
  private storage: StorageState = { ok: true };
  /** Worker log lines the store refused since the start (appendLogs). */
  private droppedLogLines = 0;
  private storageRecovering?: number;
  /** Jobs handed to a take whose batch is not committed yet, as they were before: restored if it is refused. */
  private readonly beforeTake = new Map<string, JobRow>();

  constructor(
    private readonly store: Store,
    readonly options: EngineOptions,
    private readonly hooks: EngineHooks = {},
  ) {}

  // ---------------------------------------------------------------- group commit

  /** Append ops to the current batch; resolves when the batch is committed. */
  write(ops: StoreOp[], after?: () => void): Promise<void> {
    for (const o of ops) this.batch.push(o);
    if (after) this.afterCommit.push(after);
    // One promise per batch, shared by every caller in it (a busy tick has thousands).
    if (!this.batchPromise) {
      this.batchPromise = new Promise<void>((resolve, reject) => {
        this.batchSettle = { resolve, reject };
      });
      this.batchPromise.catch(() => undefined);
    }
    this.scheduleFlush();
    return this.batchPromise;
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.lastFlush = this.lastFlush.then(() => this.flush());
    });
  }

  private async flush(): Promise<void> {
    // Takers first: what they take joins this batch (a job submitted and taken in one tick is one insert).
    this.dispatchQueued();
    this.flushScheduled = false;
    this.collectCounters();
    const ops = this.batch;
    const settle = this.batchSettle;
    const after = this.afterCommit;
    this.batch = [];
    this.batchPromise = undefined;
    this.batchSettle = undefined;
    this.afterCommit = [];
    try {
      await this.store.apply(ops);
    } catch (err) {
      const cause = storageCause(err);
      if (cause === undefined) {
        settle?.reject(err);
        return;
      }
      // A condition that clears (full disk, read-only, I/O error, database away): the callers restore what they
      // changed in memory and answer 503; said once, not a stack per request.
      this.storageRecovering = undefined;
      if (this.storage.ok) {
        this.storage = { ok: false, cause, message: err instanceof Error ? err.message : String(err), since: Date.now() };
        this.hooks.onStorage?.(this.storage);
      }
      settle?.reject(new StorageUnavailable(cause, err));
      return;
    }
    // Back to ok only once writes have gone through for a while: a nearly full disk takes small batches and
    // refuses large ones, and its state must not flap (nor the log repeat) with every batch.
    if (!this.storage.ok) this.storageRecovering ??= Date.now();
    for (const fn of after) {
      try {
        fn();
      } catch {
        // a notification callback must never break the commit path
      }
    }
    settle?.resolve();
  }

  private collectCounters(): void {
    for (const [endpointId, d] of this.counterDeltas) {
      this.batch.push({ op: "addCounters", endpointId, ...d });
    }
    this.counterDeltas.clear();
  }

  private count(endpointId: string, key: "completed" | "failed" | "retried"): void {
    this.statsOf(endpointId)[key]++;
    let d = this.counterDeltas.get(endpointId);
    if (!d) this.counterDeltas.set(endpointId, (d = { completed: 0, failed: 0, retried: 0 }));
    d[key]++;
  }

  // ---------------------------------------------------------------- start / stop

  /** Rebuild the in-memory index from the store. Running jobs keep their lease for one more lease period. */
  async load(endpointCounters: Array<{ id: string; completed: number; failed: number; retried: number }>): Promise<void> {
    for (const e of endpointCounters) {
      this.stats.set(e.id, { completed: e.completed, failed: e.failed, retried: e.retried, inQueue: 0, inProgress: 0 });
    }
    const now = Date.now();
    for (const row of await this.store.activeJobs()) {
      const job: LiveJob = { row, leaseExpiresAt: now + this.options.leaseMs, lastSeq: await this.store.lastChunkSeq(row.id), version: 0 };
      this.live.set(row.id, job);
      const stats = this.statsOf(row.endpointId);
      if (row.status === "IN_QUEUE") {
        this.queueOf(row.endpointId)[row.lowPriority ? "low" : "normal"].push(row.id);
        stats.inQueue++;
      } else {
        this.running.add(row.id);
        if (row.lease) this.leases.set(row.lease, row.id);
        stats.inProgress++;
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const list of this.takers.values()) for (const t of list) {
      clearTimeout(t.timer);
      t.resolve([]);
    }
    this.takers.clear();
    for (const w of this.workers.values()) w.wakeEvents?.();
    for (const set of this.jobWaiters.values()) for (const fn of set) fn();
    // Let the last batch commit.
    await this.write([]);
  }

  // ---------------------------------------------------------------- helpers

  private statsOf(endpointId: string): EndpointStats {
    let s = this.stats.get(endpointId);
    if (!s) this.stats.set(endpointId, (s = { completed: 0, failed: 0, retried: 0, inQueue: 0, inProgress: 0 }));
    return s;
  }

  private queueOf(endpointId: string) {
    let q = this.queues.get(endpointId);
    if (!q) this.queues.set(endpointId, (q = { normal: new IdQueue(), low: new IdQueue() }));
    return q;
  }

  private notifyJob(id: string): void {
    const set = this.jobWaiters.get(id);
    if (!set) return;
    this.jobWaiters.delete(id);
    for (const fn of set) fn();
  }

  /** Change a live job; the update goes into the batch and waiters hear of it after commit. */
  private change(job: LiveJob, set: Partial<JobRow>): Promise<void> {
    Object.assign(job.row, set);
    const version = ++job.version;
    const id = job.row.id;
    return this.write([{ op: "updateJob", id, set }], () => {
      if (isFinal(job.row.status) && job.version === version && this.live.get(id) === job) this.live.delete(id);
      this.notifyJob(id);
    });
  }

  /** A job of an endpoint that is not expired, loaded into memory when `forChange`. */
  private async find(endpointId: string, id: string): Promise<LiveJob | undefined> {
    let job = this.live.get(id);
    if (!job) {
      const row = await this.store.getJob(id);
      job = this.live.get(id);
      if (!job) {
        if (!row) return undefined;
        job = { row, leaseExpiresAt: 0, lastSeq: -1, version: 0 };
      }
    }
    if (job.row.endpointId !== endpointId) return undefined;
    if (job.row.expiresAt !== null && job.row.expiresAt <= Date.now()) return undefined;
    return job;
  }

  private adopt(job: LiveJob): LiveJob {
    const existing = this.live.get(job.row.id);
    if (existing) return existing;
    this.live.set(job.row.id, job);
    return job;
  }

  private endpoint(endpointId: string): EngineEndpoint | undefined {
    return this.endpoints.get(endpointId);
  }

  // ---------------------------------------------------------------- job API

  async submit(endpointId: string, s: SubmitInput): Promise<JobRow> {
    if (this.closed) throw new HttpProblem(503, "The service is shutting down");
    const endpoint = this.endpoint(endpointId);
    const now = Date.now();
    const ttlMs =
      s.ttlMs ??
      (s.sync
        ? s.waitMs !== undefined
          ? Math.min(RUNSYNC_WAIT_RETENTION_MAX_MS, Math.max(RUNSYNC_RETENTION_MS, s.waitMs))
          : RUNSYNC_RETENTION_MS
        : RUN_RETENTION_MS);
    const row: JobRow = {
      // Time first: ids of one period share a prefix, so SQLite's id index grows at its end (one page per
      // batch) instead of touching a random page per job; the 64 random bits keep ids unguessable.
      id: `${now.toString(36)}-${newId(8)}`,
      endpointId,
      status: "IN_QUEUE",
      input: JSON.stringify(s.input),
      function: s.function ?? null,
      webhook: s.webhook ?? null,
      sync: s.sync,
      lowPriority: Boolean(s.lowPriority),
      createdAt: now,
      startedAt: null,
      completedAt: null,
      output: null,
      error: null,
      errorType: null,
      errorStack: null,
      attempt: 0,
      retried: 0,
      executionTimeoutMs: s.executionTimeoutMs ?? endpoint?.executionTimeoutMs ?? DEFAULTS.executionTimeout * 1000,
      ttlMs,
      expiresAt: null,
      lease: null,
      workerId: null,
      streamCursor: 0,
      maxRetries: s.maxRetries ?? null,
    };
    const job: LiveJob = { row, leaseExpiresAt: 0, lastSeq: 0, version: 0 };
    this.live.set(row.id, job);
    const committed = this.write([{ op: "insertJob", job: { ...row } }]);
    this.enqueue(job, false);
    try {
      await committed;
    } catch (err) {
      // Refused by the store: the job never existed (not queued, counted or run; a take of it failed too).
      this.forget(job);
      throw err;
    }
    return row;
  }

  /** The store's state (/health). */
  storageState(): StorageState {
    return this.droppedLogLines > 0 ? { ...this.storage, droppedLogLines: this.droppedLogLines } : { ...this.storage };
  }

  /** Take a job out of memory entirely: its insert was refused. */
  private forget(job: LiveJob): void {
    if (this.live.get(job.row.id) !== job) return;
    this.unindex(job);
    this.live.delete(job.row.id);
    this.beforeTake.delete(job.row.id);
  }

  /** Remove a job from the in-memory indexes of its current status (a queue's stale id is skipped by grab). */
  private unindex(job: LiveJob): void {
    const row = job.row;
    const stats = this.statsOf(row.endpointId);
    if (row.status === "IN_QUEUE") stats.inQueue--;
    else if (row.status === "IN_PROGRESS") {
      stats.inProgress--;
      this.running.delete(row.id);
      if (row.lease) this.leases.delete(row.lease);
      const w = row.workerId ? this.workers.get(row.workerId) : undefined;
      if (w) {
        w.held.delete(row.id);
        if (w.held.size === 0) w.idleSince = Date.now();
      }
    }
  }

  /** Put a job in the indexes of its status (after a restore). */
  private reindex(job: LiveJob): void {
    const row = job.row;
    if (row.status === "IN_QUEUE") this.enqueue(job, true);
    else if (row.status === "IN_PROGRESS") {
      this.statsOf(row.endpointId).inProgress++;
      this.running.add(row.id);
      if (row.lease) this.leases.set(row.lease, row.id);
      const w = row.workerId ? this.workers.get(row.workerId) : undefined;
      w?.held.add(row.id);
    }
  }

  /**
   * The store refused a change of this job: memory goes back to what the store has (`before`), so nothing the
   * service believes is ahead of what was committed; counters the change bumped go back too.
   */
  private restore(job: LiveJob, before: JobRow): void {
    if (this.live.get(before.id) !== job) return;
    const after = job.row;
    const stats = this.statsOf(after.endpointId);
    if (after.status === "COMPLETED" && before.status !== "COMPLETED") stats.completed--;
    else if (after.status === "FAILED" && before.status !== "FAILED") stats.failed--;
    if (after.retried > before.retried) stats.retried -= after.retried - before.retried;
    this.unindex(job);
    Object.assign(job.row, before);
    job.version++;
    this.reindex(job);
  }

  private enqueue(job: LiveJob, front: boolean): void {
    const q = this.queueOf(job.row.endpointId)[job.row.lowPriority ? "low" : "normal"];
    if (front) q.unshift(job.row.id);
    else q.push(job.row.id);
    this.statsOf(job.row.endpointId).inQueue++;
    // Waiting takers are served once per tick, at flush: one take answer carries every job queued meanwhile
    // (it waits for that batch's commit anyway), instead of one answer (and one more take) per job.
    this.dispatchDue.add(job.row.endpointId);
    this.scheduleFlush();
  }

  private dispatchQueued(): void {
    if (this.dispatchDue.size === 0) return;
    const due = [...this.dispatchDue];
    this.dispatchDue.clear();
    for (const endpointId of due) {
      this.dispatch(endpointId);
      if (this.statsOf(endpointId).inQueue > 0) this.hooks.onDemand?.(endpointId);
    }
  }

  /** The record as the job API shows it. */
  async record(endpointId: string, id: string): Promise<JobRow | undefined> {
    return (await this.find(endpointId, id))?.row;
  }

  /**
   * The record without reading a stored output (the job API sends large outputs from one shared read):
   * `outputBytes` is the stored output's size when it was left unread, else null (a live job's output is in `row`).
   */
  async recordHead(endpointId: string, id: string): Promise<{ row: JobRow; outputBytes: number | null } | undefined> {
    const live = this.live.get(id);
    if (live || !this.store.getJobHead) {
      const row = (await this.find(endpointId, id))?.row;
      return row && { row, outputBytes: null };
    }
    const head = await this.store.getJobHead(id);
    // A job that went live meanwhile (a retry) has the newer truth.
    if (this.live.has(id)) return this.recordHead(endpointId, id);
    if (!head || head.endpointId !== endpointId) return undefined;
    if (head.expiresAt !== null && head.expiresAt <= Date.now()) return undefined;
    const { outputBytes, ...row } = head;
    return { row, outputBytes };
  }

  /** waitFinal, answering as recordHead does (a stored output is not read). */
  async waitFinalHead(endpointId: string, id: string, ms: number): Promise<{ row: JobRow; outputBytes: number | null } | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const head = await this.recordHead(endpointId, id);
      if (!head || isFinal(head.row.status) || this.closed) return head;
      const left = deadline - Date.now();
      if (left <= 0) return head;
      await this.waitChange(id, left);
    }
  }

  /** A final job's stored output as UTF-8 JSON bytes (see recordHead). */
  async storedOutput(id: string): Promise<Buffer | undefined> {
    return this.store.jobOutput?.(id);
  }

  /** Wait until the job is final (or `ms` passed); returns the current record. */
  async waitFinal(endpointId: string, id: string, ms: number): Promise<JobRow | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const job = await this.find(endpointId, id);
      if (!job || isFinal(job.row.status) || this.closed) return job?.row;
      const left = deadline - Date.now();
      if (left <= 0) return job.row;
      await this.waitChange(id, left);
    }
  }

  private waitChange(id: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let set = this.jobWaiters.get(id);
      if (!set) this.jobWaiters.set(id, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        const current = this.jobWaiters.get(id);
        current?.delete(done);
        if (current?.size === 0) this.jobWaiters.delete(id);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  /** Set a job's time-to-live (the /status `ttl` query): a final job then expires `ttlMs` from now. */
  async setTtl(endpointId: string, id: string, ttlMs: number): Promise<JobRow | undefined> {
    const found = await this.find(endpointId, id);
    if (!found) return undefined;
    const job = this.adopt(found);
    await this.change(job, { ttlMs, ...(isFinal(job.row.status) ? { expiresAt: Date.now() + ttlMs } : {}) });
    return job.row;
  }

  /** Stream chunks not returned before; waits briefly for new ones while the job runs. */
  async readStream(endpointId: string, id: string): Promise<{ status: JobStatus; chunks: string[] } | undefined> {
    const deadline = Date.now() + STREAM_WAIT_MS;
    for (;;) {
      const found = await this.find(endpointId, id);
      if (!found) return undefined;
      const cursor = found.row.streamCursor;
      const chunks = await this.store.chunksAfter(id, cursor);
      const left = deadline - Date.now();
      if (chunks.length > 0 || isFinal(found.row.status) || left <= 0 || this.closed) {
        if (chunks.length > 0) {
          const job = this.adopt(found);
          await this.change(job, { streamCursor: chunks[chunks.length - 1]!.seq });
        }
        return { status: found.row.status, chunks: chunks.map((c) => c.data) };
      }
      await this.waitChange(id, left);
    }
  }

  async cancel(endpointId: string, id: string): Promise<JobRow | undefined> {
    const found = await this.find(endpointId, id);
    if (!found) return undefined;
    const job = this.adopt(found);
    const status = job.row.status;
    if (isFinal(status)) {
      throw new HttpProblem(400, `Job ${id} is already ${status}; only IN_QUEUE and IN_PROGRESS jobs can be cancelled`);
    }
    const before = { ...job.row };
    try {
      await this.finish(job, { status: "CANCELLED" }, true);
    } catch (err) {
      this.restore(job, before);
      throw err;
    }
    return job.row;
  }

  async retry(endpointId: string, id: string): Promise<JobRow | undefined> {
    const found = await this.find(endpointId, id);
    if (!found) return undefined;
    if (found.row.status !== "FAILED" && found.row.status !== "TIMED_OUT") {
      throw new HttpProblem(400, `Job ${id} is ${found.row.status}; only FAILED and TIMED_OUT jobs can be retried`);
    }
    const job = this.adopt(found);
    // New chunks of the next attempt must come after every chunk already stored (and returned).
    job.lastSeq = Math.max(job.lastSeq, await this.store.lastChunkSeq(id), job.row.streamCursor);
    if (job.row.status !== "FAILED" && job.row.status !== "TIMED_OUT") return job.row;
    const committed = this.change(job, {
      status: "IN_QUEUE",
      output: null,
      error: null,
      errorType: null,
      errorStack: null,
      startedAt: null,
      completedAt: null,
      expiresAt: null,
      lease: null,
      workerId: null,
      retried: 0,
    });
    this.enqueue(job, false);
    await committed;
    return job.row;
  }

  async purge(endpointId: string): Promise<number> {
    const q = this.queues.get(endpointId);
    if (!q) return 0;
    const ops: StoreOp[] = [];
    const ids: string[] = [];
    for (const queue of [q.normal, q.low]) {
      for (const id of queue) {
        const job = this.live.get(id);
        if (job && job.row.status === "IN_QUEUE") {
          ids.push(id);
          ops.push({ op: "deleteJob", id });
        }
      }
      queue.clear();
    }
    for (const id of ids) this.live.delete(id);
    this.statsOf(endpointId).inQueue = 0;
    await this.write(ops, () => ids.forEach((id) => this.notifyJob(id)));
    return ids.length;
  }

  health(endpointId: string) {
    const s = this.statsOf(endpointId);
    const workers: Record<WorkerState | "draining", number> = { idle: 0, running: 0, initializing: 0, draining: 0 };
    for (const w of this.workers.values()) {
      if (w.endpointId !== endpointId) continue;
      workers[workerState(w)]++;
      if (w.draining) workers.draining++;
    }
    return {
      jobs: { completed: s.completed, failed: s.failed, inProgress: s.inProgress, inQueue: s.inQueue, retried: s.retried },
      workers,
    };
  }

  queuedCount(endpointId: string): number {
    return this.statsOf(endpointId).inQueue;
  }

  runningCount(endpointId: string): number {
    return this.statsOf(endpointId).inProgress;
  }

  /**
   * End a job. `status` is final, except FAILED with retries left, which requeues the job. Releases the lease and
   * tells the worker to stop it when `stopWorker`.
   */
  private finish(
    job: LiveJob,
    result: { status: "COMPLETED" | "FAILED" | "CANCELLED" | "TIMED_OUT"; output?: string | null; error?: DoneResult["error"] },
    stopWorker: boolean,
  ): Promise<void> {
    const row = job.row;
    const worker = row.status === "IN_PROGRESS" && row.workerId ? this.workers.get(row.workerId) : undefined;
    this.unindex(job);
    if (worker && stopWorker) {
      worker.cancel.push(row.id);
      worker.wakeEvents?.();
    }
    const now = Date.now();
    const error = result.error;
    if (result.status === "FAILED") {
      const retries = row.maxRetries ?? this.endpoint(row.endpointId)?.retries ?? DEFAULTS.retries;
      if (row.retried < retries) {
        this.count(row.endpointId, "retried");
        const committed = this.change(job, {
          status: "IN_QUEUE",
          retried: row.retried + 1,
          lease: null,
          workerId: null,
          error: null,
          errorType: null,
          errorStack: null,
        });
        this.enqueue(job, false);
        return committed;
      }
      this.count(row.endpointId, "failed");
    } else if (result.status === "COMPLETED") {
      this.count(row.endpointId, "completed");
    }
    const set: Partial<JobRow> = {
      status: result.status,
      completedAt: now,
      expiresAt: now + row.ttlMs,
      lease: null,
    };
    if (result.status === "COMPLETED") set.output = result.output ?? null;
    if (result.status === "FAILED") {
      set.error = typeof error?.message === "string" ? error.message : "The handler failed";
      set.errorType = typeof error?.type === "string" ? error.type : null;
      set.errorStack = typeof error?.stack === "string" ? error.stack : null;
    }
    if (result.status === "TIMED_OUT") {
      set.error = `The job ran longer than its execution timeout of ${row.executionTimeoutMs} ms`;
      set.errorType = "TimeoutError";
    }
    const committed = this.change(job, set);
    if (row.webhook && this.hooks.webhookBody) {
      // Into the outbox in the same batch (one transaction) as the final state: a webhook is never lost to a
      // crash between the two, nor sent for a state the store refused.
      const at = Date.now();
      const webhook = { id: newId(12), jobId: row.id, url: row.webhook, body: this.hooks.webhookBody(job.row), attempts: 0, nextAt: at, createdAt: at };
      // Its failure is the batch's, answered through `committed`.
      void this.write([{ op: "insertWebhook", webhook }], () => this.hooks.onWebhook?.()).catch(() => undefined);
    }
    void committed.then(() => this.hooks.onFinal?.(job.row), () => undefined);
    return committed;
  }

  // ---------------------------------------------------------------- workers

  /** Known to the service (started by the scaler, or first seen with a valid token). */
  ensureWorker(workerId: string, endpointId: string, managed = false): WorkerEntry {
    let w = this.workers.get(workerId);
    if (!w) {
      const now = Date.now();
      w = {
        id: workerId,
        endpointId,
        registered: false,
        draining: false,
        managed,
        concurrency: 1,
        held: new Set(),
        startedAt: now,
        lastSeen: now,
        idleSince: now,
        polling: 0,
        cancel: [],
      };
      this.workers.set(workerId, w);
    }
    return w;
  }

  register(workerId: string, endpointId: string, concurrency: number): WorkerEntry {
    const w = this.ensureWorker(workerId, endpointId);
    w.registered = true;
    w.concurrency = Math.max(1, Math.floor(concurrency) || 1);
    w.lastSeen = Date.now();
    w.idleSince = Date.now();
    return w;
  }

  /** A worker is gone (exited): its jobs go back to the queue at once. */
  workerGone(workerId: string): void {
    const w = this.workers.get(workerId);
    if (!w) return;
    this.workers.delete(workerId);
    for (const t of this.takers.get(w.endpointId) ?? []) {
      if (t.workerId === workerId) {
        clearTimeout(t.timer);
        t.resolve([]);
      }
    }
    this.takers.set(w.endpointId, (this.takers.get(w.endpointId) ?? []).filter((t) => t.workerId !== workerId));
    w.wakeStandby?.();
    // Its jobs: those it took from this service, and those it held before a restart (loaded from the store with
    // their worker's id, never taken through this process).
    const jobs = new Set([...w.held, ...[...this.running].filter((id) => this.live.get(id)?.row.workerId === workerId)]);
    for (const id of jobs) {
      const job = this.live.get(id);
      if (job && job.row.status === "IN_PROGRESS" && job.row.workerId === workerId) this.requeue(job);
    }
    w.wakeEvents?.();
  }

  /** A release switched: its probe may take jobs now. */
  promote(workerId: string): void {
    const w = this.workers.get(workerId);
    if (!w || !w.standby) return;
    w.standby = false;
    w.idleSince = Date.now();
    w.wakeStandby?.();
  }

  drain(workerId: string): void {
    const w = this.workers.get(workerId);
    if (!w) return;
    w.draining = true;
    w.wakeEvents?.();
    w.wakeStandby?.();
    for (const t of this.takers.get(w.endpointId) ?? []) {
      if (t.workerId === workerId) {
        clearTimeout(t.timer);
        t.resolve([]);
      }
    }
    this.takers.set(w.endpointId, (this.takers.get(w.endpointId) ?? []).filter((t) => t.workerId !== workerId));
  }

  /** Take up to `max` jobs, waiting up to `waitMs` for one. */
  async take(w: WorkerEntry, max: number, waitMs: number, signal?: AbortSignal): Promise<JobRow[]> {
    w.lastSeen = Date.now();
    if (w.standby) {
      // A probe of a release waits like an idle worker until its release switches (or the wait is over).
      const started = Date.now();
      if (waitMs > 0 && !w.draining && !this.closed) await this.standbyWait(w, waitMs, signal);
      if (w.standby || signal?.aborted) return [];
      waitMs = Math.max(0, waitMs - (Date.now() - started));
    }
    let rows: JobRow[] = w.draining || this.closed ? [] : this.grab(w, max);
    let committed: Promise<void> | undefined;
    if (rows.length === 0 && waitMs > 0 && !w.draining && !this.closed) {
      w.polling++;
      try {
        rows = await new Promise<JobRow[]>((resolve) => {
          const taker: Taker = {
            workerId: w.id,
            max,
            resolve: (jobs, batch) => {
              committed = batch;
              resolve(jobs);
            },
            timer: setTimeout(() => {
              const list = this.takers.get(w.endpointId);
              if (list) this.takers.set(w.endpointId, list.filter((t) => t !== taker));
              resolve([]);
            }, waitMs),
          };
          let list = this.takers.get(w.endpointId);
          if (!list) this.takers.set(w.endpointId, (list = []));
          list.push(taker);
          // The worker hung up: stop waiting, so no job is handed to a connection nobody reads.
          signal?.addEventListener(
            "abort",
            () => {
              const current = this.takers.get(w.endpointId);
              if (!current?.includes(taker)) return;
              this.takers.set(w.endpointId, current.filter((t) => t !== taker));
              clearTimeout(taker.timer);
              resolve([]);
            },
            { once: true },
          );
        });
      } finally {
        w.polling--;
        w.lastSeen = Date.now();
      }
    }
    if (rows.length > 0) {
      // The IN_PROGRESS updates were put in the batch by grab(): answer once they are committed (a taker
      // served at flush time was handed that batch: it is no longer the current one).
      try {
        await (committed ?? this.write([]));
      } catch (err) {
        // Refused: the jobs are queued again as the store has them; the worker is told 503 and takes again.
        for (const row of rows) {
          const before = this.beforeTake.get(row.id);
          const job = this.live.get(row.id);
          this.beforeTake.delete(row.id);
          if (before && job && job.row.status === "IN_PROGRESS" && job.row.workerId === w.id) this.restore(job, before);
        }
        throw err;
      }
      for (const row of rows) this.beforeTake.delete(row.id);
      this.hooks.onTaken?.(w.endpointId, w.id);
    }
    return rows;
  }

  private standbyWait(w: WorkerEntry, waitMs: number, signal?: AbortSignal): Promise<void> {
    w.polling++;
    return new Promise<void>((resolve) => {
      let over = false;
      const done = () => {
        if (over) return;
        over = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        if (w.wakeStandby === done) w.wakeStandby = undefined;
        w.polling--;
        w.lastSeen = Date.now();
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      w.wakeStandby = done;
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** Move up to `max` queued jobs to IN_PROGRESS under fresh leases held by `w`. */
  private grab(w: WorkerEntry, max: number): JobRow[] {
    const q = this.queues.get(w.endpointId);
    if (!q) return [];
    const rows: JobRow[] = [];
    const now = Date.now();
    const stats = this.statsOf(w.endpointId);
    while (rows.length < max) {
      const id = q.normal.shift() ?? q.low.shift();
      if (id === undefined) break;
      const job = this.live.get(id);
      if (!job || job.row.status !== "IN_QUEUE") continue;
      const lease = newToken(12);
      stats.inQueue--;
      stats.inProgress++;
      this.running.add(id);
      this.leases.set(lease, id);
      w.held.add(id);
      job.leaseExpiresAt = now + this.options.leaseMs;
      this.beforeTake.set(id, { ...job.row });
      void this.change(job, { status: "IN_PROGRESS", lease, workerId: w.id, startedAt: now, attempt: job.row.attempt + 1 });
      rows.push(job.row);
    }
    return rows;
  }

  /** Hand queued jobs to waiting takers. */
  private dispatch(endpointId: string): void {
    const list = this.takers.get(endpointId);
    if (!list || list.length === 0) return;
    while (list.length > 0 && this.statsOf(endpointId).inQueue > 0) {
      const taker = list.shift()!;
      const w = this.workers.get(taker.workerId);
      if (!w || w.draining) {
        clearTimeout(taker.timer);
        taker.resolve([]);
        continue;
      }
      const rows = this.grab(w, taker.max);
      if (rows.length === 0) {
        list.unshift(taker);
        break;
      }
      clearTimeout(taker.timer);
      taker.resolve(rows, this.batchPromise);
    }
  }

  private requeue(job: LiveJob): void {
    const row = job.row;
    this.unindex(job);
    // The attempt that ended does not count: its chunks nobody has read go, so /stream shows the attempt that
    // does (a reader that already had some of them keeps its place; the next attempt's chunks follow, marked
    // with their attempt so that reader can tell: chunk-attempt.ts).
    if (job.lastSeq > row.streamCursor) void this.write([{ op: "deleteChunksAfter", jobId: row.id, seq: row.streamCursor }]);
    void this.change(job, { status: "IN_QUEUE", lease: null, workerId: null });
    this.enqueue(job, true);
  }

  /** The live running job a lease belongs to, if the lease is still current. */
  private byLease(lease: unknown): LiveJob | undefined {
    if (typeof lease !== "string") return undefined;
    const id = this.leases.get(lease);
    const job = id ? this.live.get(id) : undefined;
    return job && job.row.status === "IN_PROGRESS" && job.row.lease === lease ? job : undefined;
  }

  heartbeat(w: WorkerEntry, leases: unknown[]): string[] {
    const now = Date.now();
    w.lastSeen = now;
    const lost: string[] = [];
    for (const lease of leases) {
      const job = this.byLease(lease);
      if (job && job.row.endpointId === w.endpointId) job.leaseExpiresAt = now + this.options.leaseMs;
      else lost.push(String(lease));
    }
    return lost;
  }

  /** Let leases go (a stopping worker hands its jobs back). */
  release(w: WorkerEntry, leases: unknown[]): number {
    let released = 0;
    for (const lease of leases) {
      const job = this.byLease(lease);
      if (job && job.row.endpointId === w.endpointId) {
        this.requeue(job);
        released++;
      }
    }
    return released;
  }

  async done(w: WorkerEntry, results: DoneResult[]): Promise<Array<{ jobId: string; accepted: boolean; reason?: string }>> {
    w.lastSeen = Date.now();
    const answers: Array<{ jobId: string; accepted: boolean; reason?: string }> = [];
    const pending: Promise<void>[] = [];
    for (const r of results) {
      const job = this.byLease(r.lease);
      if (!job || job.row.id !== r.jobId || job.row.endpointId !== w.endpointId) {
        // A final job leaves memory once committed: ask the store, so a result sent twice (a retried request)
        // is told the job is COMPLETED rather than that its lease was lost.
        const current = this.live.get(r.jobId)?.row ?? (typeof r.jobId === "string" ? await this.store.getJob(r.jobId) : undefined);
        const reason = current && current.endpointId === w.endpointId && isFinal(current.status) ? `job is ${current.status}` : "lease lost";
        answers.push({ jobId: r.jobId, accepted: false, reason });
        continue;
      }
      const output = r.status === "COMPLETED" && r.output !== undefined ? JSON.stringify(r.output) : null;
      const before = { ...job.row };
      pending.push(
        this.finish(job, { status: r.status, output, error: r.error }, false).catch((err: unknown) => {
          // Refused: the job runs on under its lease as the store has it, so the worker's resend is accepted.
          this.restore(job, before);
          throw err;
        }),
      );
      answers.push({ jobId: r.jobId, accepted: true });
    }
    await Promise.all(pending);
    return answers;
  }

  /** Append stream chunks of a running job; chunks over 1 MB are split. */
  async appendStream(w: WorkerEntry, jobId: string, lease: unknown, chunks: unknown[]): Promise<boolean> {
    const job = this.byLease(lease);
    if (!job || job.row.id !== jobId || job.row.endpointId !== w.endpointId) return false;
    const ops: StoreOp[] = [];
    // A re-run's chunks say which attempt they are (a reader may already hold chunks of the one dropped).
    const attempt = job.row.attempt;
    const limit = attempt > 1 ? MAX_CHUNK_BYTES - ATTEMPT_MARK_BYTES : MAX_CHUNK_BYTES;
    for (const chunk of chunks) {
      for (const piece of splitChunk(chunk, limit)) {
        ops.push({ op: "insertChunk", chunk: { jobId, seq: ++job.lastSeq, data: markAttempt(piece, attempt) } });
      }
    }
    await this.write(ops, () => this.notifyJob(jobId));
    return true;
  }

  /** Long-poll the worker's stop channel. */
  async events(w: WorkerEntry, waitMs: number): Promise<{ cancel: string[]; drain: boolean }> {
    w.lastSeen = Date.now();
    if (w.cancel.length === 0 && !w.draining && waitMs > 0 && !this.closed) {
      w.polling++;
      try {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => wake(), waitMs);
          const wake = () => {
            clearTimeout(timer);
            if (w.wakeEvents === wake) w.wakeEvents = undefined;
            resolve();
          };
          w.wakeEvents?.();
          w.wakeEvents = wake;
        });
      } finally {
        w.polling--;
        w.lastSeen = Date.now();
      }
    }
    const cancel = w.cancel;
    w.cancel = [];
    return { cancel, drain: w.draining || this.closed };
  }

  // ---------------------------------------------------------------- logs

  /**
   * Keep worker log lines. Never rejects: lines the store refuses are dropped (a log is not worth holding a
   * worker back for), counted, and the count is reported with the storage state (/health).
   */
  appendLogs(lines: LogRow[]): Promise<void> {
    if (lines.length === 0) return Promise.resolve();
    const written = this.write(
      lines.map((line) => ({ op: "insertLog", line }) as StoreOp),
      () => {
        const byEndpoint = new Map<string, LogRow[]>();
        for (const l of lines) {
          if (!this.logFollowers.has(l.endpointId)) continue;
          let list = byEndpoint.get(l.endpointId);
          if (!list) byEndpoint.set(l.endpointId, (list = []));
          list.push(l);
        }
        for (const [endpointId, list] of byEndpoint) for (const fn of this.logFollowers.get(endpointId) ?? []) fn(list);
      },
    );
    return written.catch(() => {
      this.droppedLogLines += lines.length;
    });
  }

  queryLogs(q: { endpointId: string; jobId?: string; since?: number; afterId?: number; limit: number }) {
    return this.store.logs(q);
  }

  followLogs(endpointId: string, fn: (lines: LogRow[]) => void): () => void {
    let set = this.logFollowers.get(endpointId);
    if (!set) this.logFollowers.set(endpointId, (set = new Set()));
    set.add(fn);
    return () => {
      set!.delete(fn);
      if (set!.size === 0) this.logFollowers.delete(endpointId);
    };
  }

  // ---------------------------------------------------------------- periodic work

  /** Lapsed leases go back to the queue; jobs past their execution timeout end TIMED_OUT. */
  tick(now = Date.now()): void {
    if (!this.storage.ok && this.storageRecovering !== undefined && now - this.storageRecovering >= STORAGE_RECOVERED_MS) {
      this.storage = { ok: true };
      this.storageRecovering = undefined;
      this.hooks.onStorage?.(this.storage);
    }
    for (const id of [...this.running]) {
      const job = this.live.get(id);
      if (!job || job.row.status !== "IN_PROGRESS") {
        this.running.delete(id);
        continue;
      }
      const timeout = job.row.executionTimeoutMs;
      if (timeout && job.row.startedAt !== null && now - job.row.startedAt > timeout) {
        // Refused by the store: the job stays running as the store has it, and the next tick tries again.
        void this.finish(job, { status: "TIMED_OUT" }, true).catch(() => undefined);
      } else if (job.leaseExpiresAt <= now) {
        this.requeue(job);
      }
    }
  }

  /** Delete jobs whose retention ran out. Goes through the batch so it orders with a concurrent ttl change. */
  async sweep(now = Date.now()): Promise<number> {
    const ids = (await this.store.expiredJobIds(now, 5000)).filter((id) => {
      const job = this.live.get(id);
      // A job in memory has the newer truth (its ttl may have just been extended, or it was retried).
      return !job || (job.row.expiresAt !== null && job.row.expiresAt <= now);
    });
    for (const id of ids) this.live.delete(id);
    if (ids.length > 0) await this.write(ids.map((id) => ({ op: "deleteJob", id }) as StoreOp));
    return ids.length;
  }

  /** Forget an endpoint's jobs and workers (the endpoint was deleted). */
  dropEndpoint(endpointId: string): Promise<void> {
    for (const [id, job] of this.live) {
      if (job.row.endpointId !== endpointId) continue;
      this.live.delete(id);
      this.running.delete(id);
      if (job.row.lease) this.leases.delete(job.row.lease);
      this.notifyJob(id);
    }
    for (const t of this.takers.get(endpointId) ?? []) {
      clearTimeout(t.timer);
      t.resolve([]);
    }
    this.takers.delete(endpointId);
    this.queues.delete(endpointId);
    this.stats.delete(endpointId);
    this.counterDeltas.delete(endpointId);
    this.endpoints.delete(endpointId);
    return this.write([{ op: "deleteEndpoint", id: endpointId }]);
  }
}

/**
 * Split a stream chunk whose JSON is over 1 MB: a string output is cut into strings, an array output into
 * arrays, an object's largest string or array field likewise. Returns JSON texts of {output, metrics?}.
 */
export function splitChunk(chunk: unknown, limit = MAX_CHUNK_BYTES): string[] {
  const normalized =
    typeof chunk === "object" && chunk !== null && !Array.isArray(chunk) && "output" in chunk
      ? (chunk as { output: unknown; metrics?: unknown })
      : { output: chunk };
  const text = JSON.stringify(normalized);
  if (Buffer.byteLength(text) <= limit) return [text];
  const { output, metrics } = normalized;
  const wrap = (o: unknown, first: boolean) => JSON.stringify(first && metrics !== undefined ? { output: o, metrics } : { output: o });
  const budget = Math.max(1024, limit - 4096 - (metrics === undefined ? 0 : Buffer.byteLength(JSON.stringify(metrics))));
  if (typeof output === "string") {
    const pieces: string[] = [];
    // Cut by characters so that each piece's JSON (escapes included, at most 6 bytes a char) fits.
    const step = Math.max(1, Math.floor(budget / 6));
    for (let i = 0; i < output.length; i += step) pieces.push(wrap(output.slice(i, i + step), i === 0));
    return pieces;
  }
  if (Array.isArray(output)) {
    const pieces: string[] = [];
    let current: unknown[] = [];
    let size = 2;
    for (const item of output) {
      const itemSize = Buffer.byteLength(JSON.stringify(item) ?? "null") + 1;
      if (current.length > 0 && size + itemSize > budget) {
        pieces.push(wrap(current, pieces.length === 0));
        current = [];
        size = 2;
      }
      current.push(item);
      size += itemSize;
    }
    if (current.length > 0) pieces.push(wrap(current, pieces.length === 0));
    return pieces;
  }
  if (typeof output === "object" && output !== null) {
    // Split the largest string/array field; other fields ride on the first piece.
    const entries = Object.entries(output as Record<string, unknown>);
    const largest = entries
      .filter(([, v]) => typeof v === "string" || Array.isArray(v))
      .sort((a, b) => JSON.stringify(b[1]).length - JSON.stringify(a[1]).length)[0];
    if (largest) {
      const [key, value] = largest;
      const rest = Object.fromEntries(entries.filter(([k]) => k !== key));
      return splitChunk({ output: value }, budget).map((piece, i) => {
        const part = (JSON.parse(piece) as { output: unknown }).output;
        return wrap(i === 0 ? { ...rest, [key]: part } : { [key]: part }, i === 0);
      });
    }
  }
  // Not splittable (a huge number?): keep it whole rather than corrupt it.
  return [text];
}
