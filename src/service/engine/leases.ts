// Leases: which running job each lease belongs to, when it lapses, and what a job was before a take that is
// not committed yet. A worker keeps its leases by heartbeat; a lapsed lease (or one handed back) puts the job
// back at the front of its queue, and the attempt that ended does not count.

import { newToken } from "../keys/auth.js";
import type { JobRow } from "../store/types.js";
import type { QueueSystem } from "./queue.js";
import { changeJob, queueWebhook, statsOf, type EngineResources } from "./resources.js";
import type { LiveJob, WorkerEntry } from "./types.js";

export class LeaseSystem {
  /** Ids of the jobs in progress. */
  private readonly running = new Set<string>();
  /** Lease token → job id. */
  private readonly leases = new Map<string, string>();
  /** Jobs handed to a take whose batch is not committed yet, as they were before: restored if it is refused. */
  private readonly beforeTake = new Map<string, JobRow>();

  constructor(
    private readonly $: EngineResources,
    private readonly queue: QueueSystem,
  ) {}

  /** A job taken out of the queue runs under a fresh lease held by `w` (the change joins the current batch). */
  grant(job: LiveJob, w: WorkerEntry, now: number): void {
    const id = job.row.id;
    const lease = newToken(12);
    statsOf(this.$, w.endpointId).inProgress++;
    this.running.add(id);
    this.leases.set(lease, id);
    w.held.add(id);
    job.leaseExpiresAt = now + this.$.options.leaseMs;
    this.beforeTake.set(id, { ...job.row });
    const set: Partial<JobRow> = { status: "IN_PROGRESS", lease, workerId: w.id, startedAt: now, attempt: job.row.attempt + 1 };
    // A new attempt reports its own progress; a backoff waited out is over (only written when there is one).
    if (job.row.progress != null) set.progress = null;
    if (job.row.notBefore != null) set.notBefore = null;
    void changeJob(this.$, job, set);
    // A `started` webhook joins the take's batch: it goes out only if the take is committed.
    queueWebhook(this.$, job.row, "started");
  }

  /** What the job was before its take, while that take is not committed. */
  beforeTakeOf(id: string): JobRow | undefined {
    return this.beforeTake.get(id);
  }

  /** The take of this job committed or was undone, or the job never was: its earlier state is not needed. */
  settleTake(id: string): void {
    this.beforeTake.delete(id);
  }

  /** Forget every running job (the jobs are loaded again). */
  clear(): void {
    this.running.clear();
    this.leases.clear();
    this.beforeTake.clear();
  }

  /** A running job as loaded from the store at start. */
  restore(job: LiveJob): void {
    this.running.add(job.row.id);
    if (job.row.lease) this.leases.set(job.row.lease, job.row.id);
    statsOf(this.$, job.row.endpointId).inProgress++;
  }

  /** Put a running job back in the index (its state was restored to running). */
  hold(job: LiveJob): void {
    const row = job.row;
    statsOf(this.$, row.endpointId).inProgress++;
    this.running.add(row.id);
    if (row.lease) this.leases.set(row.lease, row.id);
    const w = row.workerId ? this.$.workers.get(row.workerId) : undefined;
    w?.held.add(row.id);
  }

  /** A running job stops running (it ends, or goes back to the queue): its lease and its worker let it go. */
  letGo(job: LiveJob): void {
    const row = job.row;
    statsOf(this.$, row.endpointId).inProgress--;
    this.running.delete(row.id);
    if (row.lease) this.leases.delete(row.lease);
    const w = row.workerId ? this.$.workers.get(row.workerId) : undefined;
    if (w) {
      w.held.delete(row.id);
      if (w.held.size === 0) w.idleSince = this.$.clock.now();
    }
  }

  /** The job is gone from memory (its endpoint was deleted). */
  forget(job: LiveJob): void {
    this.running.delete(job.row.id);
    if (job.row.lease) this.leases.delete(job.row.lease);
  }

  /** The live running job a lease belongs to, if the lease is still current. */
  byLease(lease: unknown): LiveJob | undefined {
    if (typeof lease !== "string") return undefined;
    const id = this.leases.get(lease);
    const job = id ? this.$.live.get(id) : undefined;
    return job && job.row.status === "IN_PROGRESS" && job.row.lease === lease ? job : undefined;
  }

  /** The current lease of a running job held by `w` (its row names the worker: a restart keeps it). */
  leaseOf(w: WorkerEntry, jobId: string): string | undefined {
    const row = this.$.live.get(jobId)?.row;
    return row && row.status === "IN_PROGRESS" && row.workerId === w.id && row.endpointId === w.endpointId && row.lease ? row.lease : undefined;
  }

  /** Ids of the running jobs whose row names this worker (including those loaded at start). */
  runningOn(workerId: string): string[] {
    return [...this.running].filter((id) => this.$.live.get(id)?.row.workerId === workerId);
  }

  /** Extend the worker's leases; returns those that are no longer current. */
  heartbeat(w: WorkerEntry, leases: unknown[]): string[] {
    const now = this.$.clock.now();
    w.lastSeen = now;
    const lost: string[] = [];
    for (const lease of leases) {
      const job = this.byLease(lease);
      if (job && job.row.endpointId === w.endpointId) job.leaseExpiresAt = now + this.$.options.leaseMs;
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

  /** A running job goes back to the front of its queue (`set`: more of its row to change with it). */
  requeue(job: LiveJob, set: Partial<JobRow> = {}): void {
    const row = job.row;
    this.letGo(job);
    // The attempt that ended does not count: its chunks nobody has read go, so /stream shows the attempt that
    // does (a reader that already had some of them keeps its place; the next attempt's chunks follow, marked
    // with their attempt so that reader can tell: engine/chunk-attempt.ts).
    if (job.lastSeq > row.streamCursor) void this.$.writer.write([{ op: "deleteChunksAfter", jobId: row.id, seq: row.streamCursor }]);
    void changeJob(this.$, job, { ...set, status: "IN_QUEUE", lease: null, workerId: null });
    this.queue.enqueue(job, true);
  }

  /**
   * Lapsed leases go back to the queue. Returns the running jobs past their execution timeout instead: ending
   * them is the job lifecycle's (they end TIMED_OUT).
   */
  expire(now: number): LiveJob[] {
    const timedOut: LiveJob[] = [];
    for (const id of [...this.running]) {
      const job = this.$.live.get(id);
      if (!job || job.row.status !== "IN_PROGRESS") {
        this.running.delete(id);
        continue;
      }
      const timeout = job.row.executionTimeoutMs;
      if (timeout && job.row.startedAt !== null && now - job.row.startedAt > timeout) timedOut.push(job);
      else if (job.leaseExpiresAt <= now) this.requeue(job);
    }
    return timedOut;
  }
}
