// A job's life outside its worker's hands: submitted, ended (completed, failed and maybe retried, cancelled,
// timed out), retried by hand, kept for its ttl and then swept; what the job API reads and waits on; and the
// undo of a change the store refused, so memory never runs ahead of what was committed.

import type { JobStatus } from "svc/internal";
import { DEFAULTS } from "svc/internal";
import { Refusal } from "../../errors.js";
import { newId } from "../keys/auth.js";
import type { JobRow, StoreOp } from "../store/types.js";
import type { LeaseSystem } from "./leases.js";
import type { QueueSystem } from "./queue.js";
import { adoptJob, changeJob, countJob, findJob, queueWebhook, statsOf, writeJob, type EngineResources } from "./resources.js";
import { deadlineOf, lifetimeError, lifetimeOver } from "./lifetime.js";
import { DEFAULT_BACKOFF, isRetryable, retryDelayMs } from "./retry-policy.js";
import {
  INPUT_HELD_MAX,
  INPUT_IN_STORE,
  isFinal,
  JOB_HISTORY_MS_DEFAULT,
  RUN_RETENTION_MS,
  RUNSYNC_RETENTION_MS,
  RUNSYNC_WAIT_RETENTION_MAX_MS,
  type DoneResult,
  type EngineEndpoint,
  type FinishResult,
  type LiveJob,
  type SubmitInput,
  type WorkerEntry,
} from "./types.js";
import { refusedResult, type ResultAnswer } from "../../wire/worker.js";

/** The fewest re-runs a job gets when its worker dies under it (its endpoint's retries, when more). */
export const WORKER_DEATH_RETRIES = 2;

/** How often running and queued jobs are checked for a ttl that ran out (a queued one is also checked when taken). */
const LIFETIME_CHECK_MS = 250;

export class JobSystem {
  private lifetimesCheckedAt = 0;

  constructor(
    private readonly $: EngineResources,
    private readonly queue: QueueSystem,
    private readonly leases: LeaseSystem,
  ) {}

  /**
   * Rebuild the in-memory index from the store. Running jobs keep their lease for one more lease period. Loading
   * again (a replica taking over serving jobs) starts from nothing: what it loaded when it started is long stale,
   * and a job still queued there may have run since.
   */
  async load(endpointCounters: Array<{ id: string; completed: number; failed: number; retried: number }>): Promise<void> {
    this.$.live.clear();
    this.$.unwritten.clear();
    this.$.stats.clear();
    this.queue.clear();
    this.leases.clear();
    for (const e of endpointCounters) {
      this.$.stats.set(e.id, { completed: e.completed, failed: e.failed, retried: e.retried, inQueue: 0, inQueueBytes: 0, inProgress: 0 });
    }
    const now = this.$.clock.now();
    for (const row of await this.$.store.activeJobs()) {
      const job: LiveJob = { row, leaseExpiresAt: now + this.$.options.leaseMs, lastSeq: await this.$.store.lastChunkSeq(row.id), version: 0 };
      this.$.live.set(row.id, job);
      if (row.status === "IN_QUEUE") this.queue.restore(job);
      else this.leases.restore(job);
    }
  }

  async submit(endpointId: string, s: SubmitInput): Promise<JobRow> {
    if (this.$.closed) throw new Refusal("unavailable", "The service is shutting down");
    const input = JSON.stringify(s.input);
    const inputBytes = Buffer.byteLength(input);
    // Past a queue quota nothing of the job is made (quotas.ts).
    this.queue.admit(endpointId, inputBytes);
    const row = newJobRow(this.$.endpoints.get(endpointId), endpointId, s, this.$.clock.now(), input);
    const job: LiveJob = { row, leaseExpiresAt: 0, lastSeq: 0, version: 0, inputBytes };
    this.$.live.set(row.id, job);
    // While the store refuses writes, a /runsync is refused at once, as a /run is, rather than after it ran. A large
    // input is written at once: held back, it would stay in memory as long as the job waits.
    if (s.deferWrite && this.$.writer.state().ok && input.length <= INPUT_HELD_MAX) {
      this.$.unwritten.add(job);
      this.queue.enqueue(job, false);
      return row;
    }
    const committed = this.$.writer.write([{ op: "insertJob", job: { ...row } }]);
    this.queue.enqueue(job, false);
    try {
      await committed;
    } catch (err) {
      // Refused by the store: the job never existed (not queued, counted or run; a take of it failed too).
      this.forget(job);
      throw err;
    }
    return row;
  }

  /**
   * The caller is about to learn this job's id: it must be in the store. Writes an unwritten job as it is now,
   * and waits for its insert's commit (one in flight included); nothing for a job the store has.
   */
  async persist(id: string): Promise<void> {
    const job = this.$.live.get(id);
    if (!job) return;
    // Its commit is job.inserted, awaited below (a refusal reaches the caller there).
    if (this.$.unwritten.has(job)) void writeJob(this.$, job, []);
    await job.inserted;
  }

  /** An endpoint's jobs that the store does not have yet (see persist), as they are now. */
  unwritten(endpointId: string): JobRow[] {
    const rows: JobRow[] = [];
    for (const job of this.$.unwritten) {
      // Gone from memory without being written (purged, its endpoint deleted): nothing to list.
      if (this.$.live.get(job.row.id) !== job) this.$.unwritten.delete(job);
      else if (job.row.endpointId === endpointId) rows.push(job.row);
    }
    return rows;
  }

  /** Take a job out of memory entirely: its insert was refused. */
  private forget(job: LiveJob): void {
    if (this.$.live.get(job.row.id) !== job) return;
    this.unindex(job);
    this.$.live.delete(job.row.id);
    this.leases.settleTake(job.row.id);
  }

  /** Remove a job from the in-memory indexes of its current status (a queue's stale id is skipped when popped). */
  private unindex(job: LiveJob): void {
    const status = job.row.status;
    if (status === "IN_QUEUE") this.queue.remove(job);
    else if (status === "IN_PROGRESS") this.leases.letGo(job);
  }

  /** Put a job in the indexes of its status (after a restore). */
  private reindex(job: LiveJob): void {
    const status = job.row.status;
    if (status === "IN_QUEUE") this.queue.enqueue(job, true);
    else if (status === "IN_PROGRESS") this.leases.hold(job);
  }

  /**
   * The store refused a change of this job: memory goes back to what the store has (`before`), so nothing the
   * service believes is ahead of what was committed; counters the change bumped go back too.
   */
  restore(job: LiveJob, before: JobRow): void {
    if (this.$.live.get(before.id) !== job) return;
    const after = job.row;
    const stats = statsOf(this.$, after.endpointId);
    if (after.status === "COMPLETED" && before.status !== "COMPLETED") stats.completed--;
    else if (after.status === "FAILED" && before.status !== "FAILED") stats.failed--;
    if (after.retried > before.retried) stats.retried -= after.retried - before.retried;
    this.unindex(job);
    Object.assign(job.row, before);
    job.version++;
    this.reindex(job);
  }

  /** The record as the job API shows it, its input included (read back from the store when kept there only). */
  async record(endpointId: string, id: string): Promise<JobRow | undefined> {
    const row = (await findJob(this.$, endpointId, id))?.row;
    if (row?.input !== INPUT_IN_STORE) return row;
    const input = await this.$.store.jobInput(id);
    return input === undefined ? undefined : { ...row, input };
  }

  /**
   * The record without reading a stored output (the job API sends large outputs from one shared read):
   * `outputBytes` is the stored output's size when it was left unread, else null (a live job's output is in `row`).
   */
  async recordHead(endpointId: string, id: string): Promise<{ row: JobRow; outputBytes: number | null } | undefined> {
    const live = this.$.live.get(id);
    if (live || !this.$.store.getJobHead) {
      const row = (await findJob(this.$, endpointId, id))?.row;
      return row && { row, outputBytes: null };
    }
    const head = await this.$.store.getJobHead(id);
    // A job that went live meanwhile (a retry) has the newer truth.
    if (this.$.live.has(id)) return this.recordHead(endpointId, id);
    if (!head || head.endpointId !== endpointId) return undefined;
    if (head.expiresAt !== null && head.expiresAt <= this.$.clock.now()) return undefined;
    const { outputBytes, ...row } = head;
    return { row, outputBytes };
  }

  /** waitFinal, answering as recordHead does (a stored output is not read). */
  waitFinalHead(endpointId: string, id: string, ms: number): Promise<{ row: JobRow; outputBytes: number | null } | undefined> {
    return this.untilFinal(
      endpointId,
      id,
      ms,
      () => this.recordHead(endpointId, id),
      (head) => head.row,
      (row) => ({ row, outputBytes: null }),
    );
  }

  /** A final job's stored output as UTF-8 JSON bytes (see recordHead). */
  async storedOutput(id: string): Promise<Buffer | undefined> {
    return this.$.store.jobOutput?.(id);
  }

  /** Wait until the job is final (or `ms` passed); returns the current record. */
  waitFinal(endpointId: string, id: string, ms: number): Promise<JobRow | undefined> {
    return this.untilFinal(
      endpointId,
      id,
      ms,
      async () => (await findJob(this.$, endpointId, id))?.row,
      (row) => row,
      (row) => row,
    );
  }

  /**
   * Read the job (`read`) until it is final, `ms` passed or the engine closes, waiting for its changes in between;
   * a change that ends it answers with `fromFinal` of its final state (nothing when it is another endpoint's).
   */
  private async untilFinal<T>(
    endpointId: string,
    id: string,
    ms: number,
    read: () => Promise<T | undefined>,
    rowOf: (value: T) => JobRow,
    fromFinal: (row: JobRow) => T,
  ): Promise<T | undefined> {
    const deadline = this.$.clock.now() + ms;
    for (;;) {
      // Watched before the read: a job not in memory (handed off by another replica, not adopted yet) may be
      // adopted, run and finished while the store is being read, and its end must not go unheard.
      const watch = this.$.waiters.watch(id, Math.max(0, deadline - this.$.clock.now()));
      const value = await read();
      if (!value || isFinal(rowOf(value).status) || this.$.closed || deadline - this.$.clock.now() <= 0) {
        watch.cancel();
        return value;
      }
      const final = await watch.changed;
      if (final) return final.endpointId === endpointId ? fromFinal(final) : undefined;
    }
  }

  /** Set a job's time-to-live (the /status `ttl` query): a final job then expires `ttlMs` from now. */
  async setTtl(endpointId: string, id: string, ttlMs: number): Promise<JobRow | undefined> {
    const found = await findJob(this.$, endpointId, id);
    if (!found) return undefined;
    const job = adoptJob(this.$, found);
    await changeJob(this.$, job, { ttlMs, ...(isFinal(job.row.status) ? { expiresAt: this.$.clock.now() + ttlMs } : {}) });
    return job.row;
  }

  async cancel(endpointId: string, id: string): Promise<JobRow | undefined> {
    const found = await findJob(this.$, endpointId, id);
    if (!found) return undefined;
    const job = adoptJob(this.$, found);
    const status: JobStatus = job.row.status;
    if (isFinal(status)) {
      throw new Refusal("invalid", `Job ${id} is already ${status}; only IN_QUEUE and IN_PROGRESS jobs can be cancelled`);
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
    const found = await findJob(this.$, endpointId, id);
    if (!found) return undefined;
    if (found.row.status !== "FAILED" && found.row.status !== "TIMED_OUT") {
      throw new Refusal("invalid", `Job ${id} is ${found.row.status}; only FAILED and TIMED_OUT jobs can be retried`);
    }
    // Queued again by hand, it counts against the queue quotas as a new job does: refused before it is brought into
    // memory (with its input, read from the store), and checked again just before it is queued.
    const inputBytes = found.inputBytes ?? Buffer.byteLength(found.row.input);
    this.queue.admit(endpointId, inputBytes);
    const adopting = !this.$.live.has(id);
    const job = adoptJob(this.$, found);
    job.inputBytes ??= inputBytes;
    // New chunks of the next attempt must come after every chunk already stored (and returned).
    job.lastSeq = Math.max(job.lastSeq, await this.$.store.lastChunkSeq(id), job.row.streamCursor);
    if (job.row.status !== "FAILED" && job.row.status !== "TIMED_OUT") return job.row;
    try {
      this.queue.admit(endpointId, job.inputBytes);
    } catch (err) {
      // Filled up meanwhile: the final job this retry brought into memory leaves it again.
      if (adopting && this.$.live.get(id) === job && isFinal(job.row.status)) this.$.live.delete(id);
      throw err;
    }
    const row = job.row;
    const committed = changeJob(this.$, job, {
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
      progress: null,
      notBefore: null,
      // A retry asked for by hand gets the whole ttl again, from now.
      ...(row.deadlineAt != null ? { deadlineAt: this.$.clock.now() + (row.deadlineAt - row.createdAt) } : {}),
    });
    this.queue.enqueue(job, false);
    await committed;
    return job.row;
  }

  /** Results of a worker's jobs; a result under a lease that is no longer current is refused. */
  async done(w: WorkerEntry, results: DoneResult[]): Promise<ResultAnswer[]> {
    w.lastSeen = this.$.clock.now();
    const answers: ResultAnswer[] = [];
    const pending: Promise<void>[] = [];
    for (const r of results) {
      const job = this.leases.byLease(r.lease);
      if (!job || job.row.id !== r.jobId || job.row.endpointId !== w.endpointId) {
        // A final job leaves memory once committed: ask the store, so a result sent twice (a retried request)
        // is told the job is COMPLETED rather than that its lease was lost.
        const current = this.$.live.get(r.jobId)?.row ?? (typeof r.jobId === "string" ? await this.$.store.getJob(r.jobId) : undefined);
        answers.push(refusedResult(r.jobId, current && current.endpointId === w.endpointId && isFinal(current.status) ? current.status : undefined));
        continue;
      }
      // A result that comes after the job's execution timeout does not count, however short the timeout and
      // whether or not a tick has ended the job yet: the timeout is exact, not rounded up to the tick.
      const timeout = job.row.executionTimeoutMs;
      if (timeout && job.row.startedAt !== null && w.lastSeen - job.row.startedAt > timeout) {
        const late = { ...job.row };
        pending.push(
          this.finish(job, { status: "TIMED_OUT" }, true).catch((err: unknown) => {
            this.restore(job, late);
            throw err;
          }),
        );
        answers.push(refusedResult(r.jobId, "TIMED_OUT"));
        continue;
      }
      // A failure may carry output too (the provider's handlers return a dict with `error` beside their output).
      const output = r.output !== undefined ? JSON.stringify(r.output) : null;
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

  /**
   * A running job whose worker died under it (it exited unasked: killed for memory, crashed). The death counts as a
   * failed attempt: the job runs again while its retries last (at least WORKER_DEATH_RETRIES), at once and ahead of
   * the queue (the death was the worker's, not necessarily the job's), and fails after that, naming the deaths.
   * Without this a job that kills its worker every time would be run again forever.
   */
  lost(job: LiveJob, died: string): void {
    const row = job.row;
    // At least WORKER_DEATH_RETRIES, whatever the endpoint's retries: a worker lost to the machine (a crash, a node
    // going away) re-runs the job even where failures are not retried; only repeated deaths end it.
    const retries = Math.max(WORKER_DEATH_RETRIES, row.maxRetries ?? this.$.endpoints.get(row.endpointId)?.retries ?? DEFAULTS.retries);
    if (row.retried < retries) {
      countJob(this.$, row.endpointId, "retried");
      this.$.hooks.onRetry?.(row);
      this.note(row, `attempt ${row.attempt} lost: its worker died (${died}); retry ${row.retried + 1} of ${retries}`);
      this.leases.requeue(job, { retried: row.retried + 1 });
      return;
    }
    const message = `The job's worker died while running it, on attempt ${row.attempt} of ${retries + 1} (${died}); no retries left`;
    this.note(row, message);
    // Refused by the store: the job stays running as the store has it, and its lease lapsing requeues it.
    void this.finish(job, { status: "FAILED", error: { message, type: "WorkerDied", retryable: false } }, false).catch(
      () => undefined /* the job stays running as the store has it; its lapsing lease requeues it */,
    );
  }

  /** Jobs past their execution timeout or their ttl end TIMED_OUT; lapsed leases go back to the queue. */
  tick(now: number): void {
    for (const job of this.leases.expire(now)) {
      // Refused by the store: the job stays running as the store has it, and the next tick tries again.
      void this.finish(job, { status: "TIMED_OUT" }, true).catch(() => undefined);
    }
    if (now - this.lifetimesCheckedAt >= LIFETIME_CHECK_MS) {
      this.lifetimesCheckedAt = now;
      const over: LiveJob[] = [];
      for (const job of this.$.live.values()) if (lifetimeOver(job.row, now)) over.push(job);
      this.endLapsed(over);
    }
  }

  /** End jobs whose ttl ran out: a queued one is never started, a running one is stopped. TIMED_OUT either way. */
  endLapsed(jobs: LiveJob[]): void {
    for (const job of jobs) {
      if (this.$.live.get(job.row.id) !== job || !lifetimeOver(job.row, this.$.clock.now())) continue;
      // Refused by the store: the job stays as the store has it, the storage state logs the refusal, and the next
      // check tries again; nothing is lost by dropping the rejection here.
      void this.finish(job, { status: "TIMED_OUT", error: lifetimeError(job.row) }, true).catch(() => undefined);
    }
  }

  /**
   * End a job. `status` is final, except FAILED with retries left, which requeues the job. Releases the lease and
   * tells the worker to stop it when `stopWorker`.
   */
  private finish(job: LiveJob, result: FinishResult, stopWorker: boolean): Promise<void> {
    const row = job.row;
    const worker = row.status === "IN_PROGRESS" && row.workerId ? this.$.workers.get(row.workerId) : undefined;
    this.unindex(job);
    if (worker && stopWorker) {
      worker.cancel.push(row.id);
      worker.wakeEvents?.();
    }
    const now = this.$.clock.now();
    const error = result.error;
    if (result.status === "FAILED") {
      const endpoint = this.$.endpoints.get(row.endpointId);
      const retries = row.maxRetries ?? endpoint?.retries ?? DEFAULTS.retries;
      const retryable = isRetryable(error);
      if (row.retried < retries && retryable) {
        countJob(this.$, row.endpointId, "retried");
        this.$.hooks.onRetry?.(row);
        const retry = row.retried + 1;
        const delay = retryDelayMs(endpoint?.backoff ?? DEFAULT_BACKOFF, retry);
        // Said in the job's logs (`svc logs --job`): why a failed job is queued and when it runs again.
        this.note(row, `attempt ${row.attempt} failed; retry ${retry} of ${retries} in ${delay} ms`);
        const committed = changeJob(this.$, job, {
          status: "IN_QUEUE",
          retried: retry,
          lease: null,
          workerId: null,
          error: null,
          errorType: null,
          errorStack: null,
          // Not taken again before its backoff is over (queue.ts keeps it out of the FIFO until then).
          notBefore: now + delay,
        });
        this.queue.enqueue(job, false);
        return committed;
      }
      if (!retryable && row.retried < retries) this.note(row, `attempt ${row.attempt} failed with an error marked not retryable; no retry`);
      countJob(this.$, row.endpointId, "failed");
    } else if (result.status === "COMPLETED") {
      countJob(this.$, row.endpointId, "completed");
    }
    const set: Partial<JobRow> = {
      status: result.status,
      completedAt: now,
      expiresAt: now + row.ttlMs,
      lease: null,
    };
    // Progress was the running job's; the record shows its output or error from now on.
    if (row.progress != null) set.progress = null;
    if (result.status === "COMPLETED") set.output = result.output ?? null;
    if (result.status === "FAILED" && result.output != null) set.output = result.output;
    if (result.status === "FAILED") {
      set.error = typeof error?.message === "string" ? error.message : "The handler failed";
      set.errorType = typeof error?.type === "string" ? error.type : null;
      set.errorStack = typeof error?.stack === "string" ? error.stack : null;
    }
    if (result.status === "TIMED_OUT") {
      set.error = error?.message ?? `The job ran longer than its execution timeout of ${row.executionTimeoutMs} ms`;
      set.errorType = error?.type ?? "TimeoutError";
    }
    const committed = changeJob(this.$, job, set);
    const hooks = this.$.hooks;
    // Into the outbox in the same batch (one transaction) as the final state: a webhook is never lost to a crash
    // between the two, nor sent for a state the store refused. Its failure is the batch's, answered through `committed`.
    queueWebhook(this.$, job.row, result.status === "COMPLETED" ? "completed" : "failed");
    void committed.then(
      () => hooks.onFinal?.(job.row),
      () => undefined,
    );
    return committed;
  }

  /** A line of the service's own in the job's logs. */
  private note(row: JobRow, text: string): void {
    void this.$.appendLogs?.([{ ts: this.$.clock.now(), endpointId: row.endpointId, workerId: "svc", jobId: row.id, stream: "log", text }]);
  }

  /** Delete jobs whose retention ran out. Goes through the batch so it orders with a concurrent ttl change. */
  async sweep(now: number): Promise<number> {
    const ids = (await this.$.store.expiredJobIds(now, 5000)).filter((id) => {
      const job = this.$.live.get(id);
      // A job in memory has the newer truth (its ttl may have just been extended, or it was retried).
      return !job || (job.row.expiresAt !== null && job.row.expiresAt <= now);
    });
    if (ids.length === 0) return 0;
    // Their records stay as history first (a crash before the delete archives them again: the first copy stays).
    const historyMs = this.$.options.jobHistoryMs ?? JOB_HISTORY_MS_DEFAULT;
    if (historyMs > 0) await this.$.store.archiveJobs?.(ids, now, now + historyMs);
    for (const id of ids) this.$.live.delete(id);
    await this.$.writer.write(ids.map((id) => ({ op: "deleteJob", id }) as StoreOp));
    return ids.length;
  }

  /** Forget an endpoint's jobs (the endpoint was deleted); whoever waits on them hears of it. */
  dropEndpoint(endpointId: string): void {
    for (const [id, job] of this.$.live) {
      if (job.row.endpointId !== endpointId) continue;
      this.$.live.delete(id);
      this.leases.forget(job);
      this.$.waiters.notify(id);
    }
  }
}

/** A new job's id: its creation time first, so ids sort roughly by age. */
export function newJobId(now: number): string {
  return `${now.toString(36)}-${newId(8)}`;
}

/**
 * A new job as submitted: queued, its deadline (`policy.ttl` from now), retention and execution timeout resolved.
 * Retention after the end is the interface's (30 min for /run, 1 min for /runsync), whatever the job's ttl. Pure.
 */
export function newJobRow(endpoint: EngineEndpoint | undefined, endpointId: string, s: SubmitInput, now: number, input = JSON.stringify(s.input)): JobRow {
  const ttlMs = s.sync
    ? s.waitMs !== undefined
      ? Math.min(RUNSYNC_WAIT_RETENTION_MAX_MS, Math.max(RUNSYNC_RETENTION_MS, s.waitMs))
      : RUNSYNC_RETENTION_MS
    : RUN_RETENTION_MS;
  return {
    // Time first: ids of one period share a prefix, so SQLite's id index grows at its end (one page per
    // batch) instead of touching a random page per job; the 64 random bits keep ids unguessable.
    id: s.id ?? newJobId(now),
    endpointId,
    status: "IN_QUEUE",
    input,
    function: s.function ?? null,
    webhook: s.webhook ?? null,
    ...(s.webhookEvents ? { webhookEvents: s.webhookEvents.join(",") } : {}),
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
    progress: null,
    notBefore: null,
    deadlineAt: deadlineOf(now, s.lifetimeMs),
    ...(s.s3Bucket ? { s3Bucket: s.s3Bucket } : {}),
  };
}
