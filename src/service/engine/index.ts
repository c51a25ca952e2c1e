// The job engine: the state machine of jobs, the queue index, leases, workers' view of the service, and group
// commit. Memory is authoritative for jobs that are not final (and for final ones until their final state is
// committed); the store holds everything and is the truth after a restart.
//
// JobEngine is the facade the service uses. Each concern is one part under engine/, all sharing one record of
// resources (engine/resources.ts): the batch writer (group-commit.ts), the queues (queue.ts, id-queue.ts), leases
// (leases.ts), a job's lifecycle (jobs.ts), handing jobs to workers (dispatch.ts), the worker registry
// (workers.ts), and streams and logs (streams-logs.ts).

import type { JobStatus } from "svc/internal";
import type { JobRow, LogRow, Store, StoreOp } from "../store/types.js";
import type { StorageState } from "../store/faults.js";
import { systemClock, type Clock } from "./clock.js";
import { DispatchSystem } from "./dispatch.js";
import { HandoffSystem } from "./handoff.js";
import { JobSystem } from "./jobs.js";
import { LeaseSystem } from "./leases.js";
import { ProgressSystem } from "./progress.js";
import { QueueSystem } from "./queue.js";
import { createResources, statsOf, type EngineResources } from "./resources.js";
import { StreamsAndLogs } from "./streams-logs.js";
import {
  workerState,
  type DoneResult,
  type EngineEndpoint,
  type EngineHooks,
  type EngineOptions,
  type SubmitInput,
  type WorkerEntry,
  type WorkerReach,
  type WorkerServes,
  type WorkerState,
} from "./types.js";
import { WorkerRegistry } from "./workers.js";
import { WorkerEvents, type ReadyHow, type RegisteredHow } from "./worker-events.js";
import type { ResultAnswer } from "../../wire/worker.js";

export {
  INPUT_IN_STORE,
  isFinal,
  MAX_CHUNK_BYTES,
  MAX_TAKE_WAIT_MS,
  JOB_HISTORY_MS_DEFAULT,
  RUN_RETENTION_MS,
  RUNSYNC_RETENTION_MS,
  RUNSYNC_WAIT_RETENTION_MAX_MS,
  STREAM_WAIT_MS,
  workerState,
  type DoneResult,
  type EngineEndpoint,
  type EngineHooks,
  type EngineOptions,
  type SubmitInput,
  type WorkerEntry,
  type WorkerReach,
  type WorkerServes,
  type WorkerState,
} from "./types.js";
export { WorkerEvents, type ReadyHow, type RegisteredHow, type WorkerEventMap, type WorkerEventName } from "./worker-events.js";
export { splitChunk } from "./streams-logs.js";
export { DEFAULT_LOG_LIMITS, DROPPED_STREAM, droppedCount, type DropReason, type LogLimits } from "./log-quota.js";
export { MAX_PROGRESS_BYTES } from "./progress.js";
export { systemClock, type Clock } from "./clock.js";
export { DEFAULT_QUEUE_QUOTAS, parseUserQuotas, type QueueQuotas, type QueueUsage } from "./quotas.js";

export class JobEngine {
  readonly endpoints: Map<string, EngineEndpoint>;
  /** The workers the service knows, by id: read here; every change goes through the methods below. */
  readonly workers: ReadonlyMap<string, Readonly<WorkerEntry>>;
  /** Their life as typed events (worker-events.ts): subscribe instead of being told. */
  readonly workerEvents: WorkerEvents;
  readonly options: EngineOptions;
  private readonly $: EngineResources;
  private readonly queue: QueueSystem;
  private readonly leases: LeaseSystem;
  private readonly jobs: JobSystem;
  private readonly dispatch: DispatchSystem;
  private readonly registry: WorkerRegistry;
  private readonly streams: StreamsAndLogs;
  private readonly handoff: HandoffSystem;
  private readonly progressReports: ProgressSystem;

  constructor(store: Store, options: EngineOptions, hooks: EngineHooks = {}, clock: Clock = systemClock) {
    const $ = createResources(store, options, hooks, clock);
    this.$ = $;
    this.endpoints = $.endpoints;
    this.workers = $.workers;
    this.options = options;
    this.queue = new QueueSystem($);
    this.leases = new LeaseSystem($, this.queue);
    this.jobs = new JobSystem($, this.queue, this.leases);
    this.dispatch = new DispatchSystem($, this.queue, this.leases, this.jobs);
    this.workerEvents = new WorkerEvents(hooks.onWorkerEventError);
    this.registry = new WorkerRegistry($, this.dispatch, this.leases, (job, died) => this.jobs.lost(job, died), this.workerEvents);
    this.streams = new StreamsAndLogs($, this.leases);
    this.handoff = new HandoffSystem($, this.queue);
    this.progressReports = new ProgressSystem($, this.leases);
    $.adoptHandedOff = () => this.handoff.adopt();
    $.appendLogs = (lines) => this.streams.appendLogs(lines);
  }

  // ---------------------------------------------------------------- group commit

  /** Append ops to the current batch; resolves when the batch is committed. */
  write(ops: StoreOp[], after?: () => void): Promise<void> {
    return this.$.writer.write(ops, after);
  }

  // ---------------------------------------------------------------- submissions on every replica (engine/handoff.ts)

  /** Whether `/run` jobs can be handed off to the replica serving jobs (the store is shared: PostgreSQL). */
  get handsOff(): boolean {
    return this.handoff.supported;
  }

  /** On a replica that does not serve jobs: write a `/run` job for the one that does; resolves once committed. */
  handOff(endpointId: string, s: SubmitInput, from: string): Promise<JobRow> {
    return this.handoff.handOff(endpointId, s, from);
  }

  /** This replica serves jobs: adopt handed-off jobs from now on (adoptHandedOff), starting with those waiting. */
  acceptHandoffs(): Promise<number> {
    this.handoff.enable();
    return this.handoff.adopt();
  }

  /**
   * Take the jobs other replicas handed off into the queue; how many. `announced`: a follower's notice asked, and
   * more may follow within its pause between notices (engine/handoff.ts).
   */
  adoptHandedOff(options: { announced?: boolean } = {}): Promise<number> {
    return this.handoff.adopt(options);
  }

  /** Resolves once every change written so far has committed (or failed). */
  settled(): Promise<void> {
    return this.$.writer.settled();
  }

  /** The store's state (/health). */
  storageState(): StorageState {
    const state = this.$.writer.state();
    const dropped = this.streams.droppedLogLines;
    return dropped > 0 ? { ...state, droppedLogLines: dropped } : state;
  }

  // ---------------------------------------------------------------- start / stop

  /** Rebuild the in-memory index from the store. Running jobs keep their lease for one more lease period. */
  load(endpointCounters: Array<{ id: string; completed: number; failed: number; retried: number }>): Promise<void> {
    return this.jobs.load(endpointCounters);
  }

  async close(): Promise<void> {
    this.$.closed = true;
    this.dispatch.close();
    this.queue.stopTimers();
    this.registry.wakeAll();
    this.$.waiters.wakeAll();
    // Let the last batch commit.
    await this.$.writer.write([]);
  }

  // ---------------------------------------------------------------- job API

  submit(endpointId: string, s: SubmitInput): Promise<JobRow> {
    return this.jobs.submit(endpointId, s);
  }

  /** Before a caller learns a job's id: the job is in the store (see SubmitInput.deferWrite). */
  persist(id: string): Promise<void> {
    return this.jobs.persist(id);
  }

  /** An endpoint's jobs not in the store yet, for lists read from it. */
  unwrittenJobs(endpointId: string): JobRow[] {
    return this.jobs.unwritten(endpointId);
  }

  /** The record as the job API shows it. */
  record(endpointId: string, id: string): Promise<JobRow | undefined> {
    return this.jobs.record(endpointId, id);
  }

  /**
   * The record without reading a stored output (the job API sends large outputs from one shared read):
   * `outputBytes` is the stored output's size when it was left unread, else null (a live job's output is in `row`).
   */
  recordHead(endpointId: string, id: string): Promise<{ row: JobRow; outputBytes: number | null } | undefined> {
    return this.jobs.recordHead(endpointId, id);
  }

  /** waitFinal, answering as recordHead does (a stored output is not read). */
  waitFinalHead(endpointId: string, id: string, ms: number): Promise<{ row: JobRow; outputBytes: number | null } | undefined> {
    return this.jobs.waitFinalHead(endpointId, id, ms);
  }

  /** A final job's stored output as UTF-8 JSON bytes (see recordHead). */
  storedOutput(id: string): Promise<Buffer | undefined> {
    return this.jobs.storedOutput(id);
  }

  /** Wait until the job is final (or `ms` passed); returns the current record. */
  waitFinal(endpointId: string, id: string, ms: number): Promise<JobRow | undefined> {
    return this.jobs.waitFinal(endpointId, id, ms);
  }

  /** Set a job's time-to-live (the /status `ttl` query): a final job then expires `ttlMs` from now. */
  setTtl(endpointId: string, id: string, ttlMs: number): Promise<JobRow | undefined> {
    return this.jobs.setTtl(endpointId, id, ttlMs);
  }

  /** Stream chunks not returned before; waits briefly for new ones while the job runs. */
  readStream(endpointId: string, id: string): Promise<{ status: JobStatus; chunks: string[] } | undefined> {
    return this.streams.readStream(endpointId, id);
  }

  cancel(endpointId: string, id: string): Promise<JobRow | undefined> {
    return this.jobs.cancel(endpointId, id);
  }

  retry(endpointId: string, id: string): Promise<JobRow | undefined> {
    return this.jobs.retry(endpointId, id);
  }

  purge(endpointId: string): Promise<number> {
    return this.queue.purge(endpointId);
  }

  health(endpointId: string) {
    const s = statsOf(this.$, endpointId);
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

  /** What a user has queued across their endpoints: jobs and input bytes (the per-user queue quota's usage). */
  queueUsage(userId: string): { jobs: number; bytes: number } {
    return this.queue.usageOf(userId);
  }

  queuedCount(endpointId: string): number {
    return statsOf(this.$, endpointId).inQueue;
  }

  /** The jobs waiting on an endpoint as its scaling policy sees them (QueueSystem.waiting). */
  waiting(endpointId: string, limit: number): { normal: number; low: number; waitingSince: number[] } {
    return this.queue.waiting(endpointId, limit);
  }

  runningCount(endpointId: string): number {
    return statsOf(this.$, endpointId).inProgress;
  }

  // ---------------------------------------------------------------- workers

  /** Known to the service (started by the scaler, or first seen with a valid token). */
  ensureWorker(workerId: string, endpointId: string, managed = false): WorkerEntry {
    return this.registry.ensureWorker(workerId, endpointId, managed);
  }

  /** The scaler runs this worker through its driver (started, adopted, or another replica's it took over). */
  manageWorker(workerId: string, endpointId: string, how: { revision?: string; standby?: boolean } = {}): WorkerEntry {
    return this.registry.manage(workerId, endpointId, how);
  }

  /** Its driver says where it is reachable (before or after it registers). */
  workerAddressed(workerId: string, reach: WorkerReach): void {
    this.registry.addressed(workerId, reach);
  }

  /** It connected (`how`); a queue endpoint's worker is ready from here, a load-balanced one once its /ping says so. */
  register(workerId: string, endpointId: string, concurrency: number, how: RegisteredHow = "register", serves?: WorkerServes): WorkerEntry {
    return this.registry.register(workerId, endpointId, concurrency, how, serves);
  }

  /** It asked for more jobs at once than it registered with (a provider worker's batch take). */
  raiseWorkerConcurrency(workerId: string, concurrency: number): void {
    this.registry.raiseConcurrency(workerId, concurrency);
  }

  /** A request to a load-balanced worker began or ended: its idle time counts from now. */
  workerActive(workerId: string): void {
    this.registry.active(workerId);
  }

  /** It can take work (the one door of readiness; said once per worker). */
  workerReady(workerId: string, how: ReadyHow): void {
    this.registry.ready(workerId, how);
  }

  /** A worker is gone (exited): its jobs go back to the queue at once; `died`, how it ended unasked (WorkerRegistry). */
  workerGone(workerId: string, died?: string): void {
    this.registry.workerGone(workerId, died);
  }

  /** A release switched: its probe may take jobs now. */
  promote(workerId: string): void {
    this.registry.promote(workerId);
  }

  drain(workerId: string): void {
    this.registry.drain(workerId);
  }

  /** Take up to `max` jobs, waiting up to `waitMs` for one. */
  take(w: WorkerEntry, max: number, waitMs: number, signal?: AbortSignal): Promise<JobRow[]> {
    return this.dispatch.take(w, max, waitMs, signal);
  }

  heartbeat(w: WorkerEntry, leases: unknown[]): string[] {
    return this.leases.heartbeat(w, leases);
  }

  /**
   * The current lease of a job this worker runs, or undefined (it runs elsewhere, was requeued, or ended). For
   * workers that never see their leases (the provider's protocol): the service keeps the lease per (worker, job).
   */
  leaseOf(w: WorkerEntry, jobId: string): string | undefined {
    return this.leases.leaseOf(w, jobId);
  }

  /** Let leases go (a stopping worker hands its jobs back). */
  release(w: WorkerEntry, leases: unknown[]): number {
    return this.leases.release(w, leases);
  }

  done(w: WorkerEntry, results: DoneResult[]): Promise<ResultAnswer[]> {
    return this.jobs.done(w, results);
  }

  /** Append stream chunks of a running job; chunks over 1 MB are split. */
  appendStream(w: WorkerEntry, jobId: string, lease: unknown, chunks: unknown[]): Promise<boolean> {
    return this.streams.appendStream(w, jobId, lease, chunks);
  }

  /** The latest progress of a running job (JSON text); false when the lease is no longer current. */
  progress(w: WorkerEntry, jobId: unknown, lease: unknown, json: string): Promise<boolean> {
    return this.progressReports.report(w, jobId, lease, json);
  }

  /** Long-poll the worker's stop channel. */
  events(w: WorkerEntry, waitMs: number): Promise<{ cancel: string[]; drain: boolean }> {
    return this.registry.events(w, waitMs);
  }

  // ---------------------------------------------------------------- logs

  /**
   * Keep worker log lines. Never rejects: lines the store refuses are dropped (a log is not worth holding a
   * worker back for), counted, and the count is reported with the storage state (/health).
   */
  appendLogs(lines: LogRow[]): Promise<void> {
    return this.streams.appendLogs(lines);
  }

  queryLogs(q: { endpointId: string; jobId?: string; since?: number; afterId?: number; limit: number }) {
    return this.streams.queryLogs(q);
  }

  followLogs(endpointId: string, fn: (lines: LogRow[]) => void): () => void {
    return this.streams.followLogs(endpointId, fn);
  }

  /** Lines the log quotas dropped among those `q` selects (the notices' counts added up). */
  droppedLogLines(q: { endpointId: string; jobId?: string; since?: number }): Promise<number> {
    return this.streams.droppedLines(q);
  }

  // ---------------------------------------------------------------- periodic work

  /** Lapsed leases go back to the queue; jobs past their execution timeout end TIMED_OUT. */
  tick(now = this.$.clock.now()): void {
    this.$.writer.checkRecovered(now);
    this.jobs.tick(now);
    this.streams.flushDropNotices(now);
  }

  /** Delete jobs whose retention ran out. Goes through the batch so it orders with a concurrent ttl change. */
  sweep(now = this.$.clock.now()): Promise<number> {
    return this.jobs.sweep(now);
  }

  /** Delete history records whose retention ran out (the job history: jobs whose results expired); how many. */
  async sweepJobHistory(now = this.$.clock.now()): Promise<number> {
    let removed = 0;
    for (;;) {
      const n = (await this.$.store.sweepJobHistory?.(now, 5000)) ?? 0;
      removed += n;
      if (n < 5000) return removed;
    }
  }

  /** Delete log lines past the retention age or beyond their endpoint's size (log-retention.ts); lines removed. */
  sweepLogs(now = this.$.clock.now()): Promise<number> {
    return this.streams.sweepLogs(now);
  }

  /** Forget an endpoint's jobs and workers (the endpoint was deleted). */
  dropEndpoint(endpointId: string): Promise<void> {
    this.streams.forgetEndpoint(endpointId);
    this.jobs.dropEndpoint(endpointId);
    this.dispatch.dropEndpoint(endpointId);
    this.queue.drop(endpointId);
    this.$.stats.delete(endpointId);
    this.$.writer.dropCounters(endpointId);
    this.endpoints.delete(endpointId);
    return this.$.writer.write([{ op: "deleteEndpoint", id: endpointId }]);
  }
}
