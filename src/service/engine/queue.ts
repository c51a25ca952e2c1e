// The queue index: per endpoint, the ids of queued jobs in two FIFOs (normal priority first, then low). Removal
// is lazy: a job that left the queue some other way (cancelled, dropped) keeps its id here, skipped when popped;
// the endpoint's inQueue count is exact. Endpoints that got jobs this tick are marked for dispatch at flush.
// A job queued again after a failure waits out its backoff (JobRow.notBefore) outside the FIFOs: queued, counted,
// but not taken and not counted as waiting by the scaler, until a timer puts it at the back of its queue.
// Queued jobs and their input bytes are counted per endpoint and per owner, for the queue quotas (quotas.ts); a
// queued job's large input is kept in the store only (INPUT_HELD_MAX), read back when a worker takes it.

import { Refusal } from "../../errors.js";
import type { StoreOp } from "../store/types.js";
import { IdQueue } from "./id-queue.js";
import type { TimerHandle } from "./clock.js";
import { lifetimeOver } from "./lifetime.js";
import { statsOf, type EngineResources } from "./resources.js";
import { DEFAULT_QUEUE_QUOTAS, exceededQuota, QUOTA_RETRY_AFTER_S, quotaDetail, type QueueUsage } from "./quotas.js";
import { HELD_INPUTS_MAX, INPUT_HELD_MAX, INPUT_IN_STORE, type LiveJob } from "./types.js";

export class QueueSystem {
  private readonly queues = new Map<string, { normal: IdQueue; low: IdQueue }>();
  /** Endpoints whose waiting takers get the jobs queued this tick, when the tick's batch is flushed. */
  private readonly dispatchDue = new Set<string>();
  /** Jobs waiting out a retry's backoff, by id: when they join their queue. */
  private readonly delayed = new Map<string, { endpointId: string; timer: TimerHandle }>();
  /** Queued jobs shift() found past their ttl: ended by the caller (JobSystem.endLapsed), never started. */
  private lapsed: LiveJob[] = [];
  /** Queued jobs and input bytes per user (each endpoint's own are in its stats). */
  private readonly users = new Map<string, QueueUsage>();
  /** Characters of the queued inputs held in memory, service-wide (at most HELD_INPUTS_MAX). */
  private held = 0;

  constructor(private readonly $: EngineResources) {}

  private queueOf(endpointId: string) {
    let q = this.queues.get(endpointId);
    if (!q) this.queues.set(endpointId, (q = { normal: new IdQueue(), low: new IdQueue() }));
    return q;
  }

  /**
   * Refuse a new job of `bytes` input on an endpoint when it would take its owner or the endpoint past a queue
   * quota (a Refusal answered 429). Called before anything of the job is made; the job counts once enqueued.
   */
  admit(endpointId: string, bytes: number): void {
    const userId = this.$.endpoints.get(endpointId)?.userId;
    const stats = statsOf(this.$, endpointId);
    const quotas = this.$.options.queueQuotas ?? DEFAULT_QUEUE_QUOTAS;
    const user = userId === undefined ? undefined : (this.users.get(userId) ?? { jobs: 0, bytes: 0 });
    const over = exceededQuota(quotas, { user, endpoint: { jobs: stats.inQueue, bytes: stats.inQueueBytes } }, userId, bytes);
    if (!over) return;
    this.$.hooks.onQuotaRefused?.(endpointId, over.limit);
    throw new Refusal("over-quota", quotaDetail(over.limit, over.quota, endpointId), { retryAfterS: QUOTA_RETRY_AFTER_S });
  }

  /** Count a job into (+1) or out of (-1) the queue: its endpoint's and its owner's jobs and input bytes. */
  private count(job: LiveJob, sign: 1 | -1): void {
    const stats = statsOf(this.$, job.row.endpointId);
    const bytes = sign * (job.inputBytes ?? 0);
    stats.inQueue += sign;
    stats.inQueueBytes += bytes;
    if (sign > 0) {
      job.heldChars = job.row.input === INPUT_IN_STORE ? 0 : job.row.input.length;
      this.held += job.heldChars;
    } else {
      this.held -= job.heldChars ?? 0;
      job.heldChars = undefined;
    }
    const owner = sign > 0 ? this.$.endpoints.get(job.row.endpointId)?.userId : job.queuedFor;
    job.queuedFor = sign > 0 ? owner : undefined;
    if (owner !== undefined) this.addToUser(owner, sign, bytes);
  }

  private addToUser(userId: string, jobs: number, bytes: number): void {
    let usage = this.users.get(userId);
    if (!usage) this.users.set(userId, (usage = { jobs: 0, bytes: 0 }));
    usage.jobs += jobs;
    usage.bytes += bytes;
    if (usage.jobs <= 0) this.users.delete(userId);
  }

  /** What a user has queued (every endpoint of theirs). */
  usageOf(userId: string): QueueUsage {
    return { ...(this.users.get(userId) ?? { jobs: 0, bytes: 0 }) };
  }

  /**
   * While queued, a large input is the store's alone, and so is every input once the queued ones held in memory
   * come to HELD_INPUTS_MAX (a flood of small jobs): the job's insert is in a batch already (or committed), and a
   * take reads the input back (dispatch.ts). A job the store does not have yet (a /runsync's, see
   * EngineResources.unwritten) keeps its input; large ones are never kept out of the store (jobs.ts submit).
   */
  private keepInputInStore(job: LiveJob): void {
    const row = job.row;
    if (row.input === INPUT_IN_STORE) return;
    job.inputBytes ??= Buffer.byteLength(row.input);
    if (this.$.unwritten.has(job)) return;
    if (row.input.length > INPUT_HELD_MAX || this.held + row.input.length > (this.$.options.heldInputsMax ?? HELD_INPUTS_MAX)) row.input = INPUT_IN_STORE;
  }

  /** Queue a job (at the front: a job whose attempt was lost keeps its place). */
  enqueue(job: LiveJob, front: boolean): void {
    this.keepInputInStore(job);
    this.count(job, 1);
    const notBefore = job.row.notBefore ?? 0;
    if (notBefore > this.$.clock.now()) return this.delay(job, notBefore);
    this.line(job, front);
  }

  /** Put a queued job's id in its FIFO; waiting takers get it at the next flush. */
  private line(job: LiveJob, front: boolean): void {
    const q = this.queueOf(job.row.endpointId)[job.row.lowPriority ? "low" : "normal"];
    if (front) q.unshift(job.row.id);
    else q.push(job.row.id);
    // Waiting takers are served once per tick, at flush: one take answer carries every job queued meanwhile
    // (it waits for that batch's commit anyway), instead of one answer (and one more take) per job.
    this.dispatchDue.add(job.row.endpointId);
    this.$.writer.scheduleFlush();
  }

  /** Keep a queued job out of its FIFO until `at` (its backoff), then line it up at the back. */
  private delay(job: LiveJob, at: number): void {
    const id = job.row.id;
    this.undelay(id);
    const timer = this.$.clock.setTimeout(
      () => {
        this.delayed.delete(id);
        const current = this.$.live.get(id);
        // Cancelled, expired or retried by hand meanwhile: that change decided where it is.
        if (current !== job || job.row.status !== "IN_QUEUE" || (job.row.notBefore ?? 0) !== at) return;
        this.line(job, false);
      },
      Math.max(0, at - this.$.clock.now()),
    );
    this.delayed.set(id, { endpointId: job.row.endpointId, timer });
  }

  private undelay(id: string): void {
    const entry = this.delayed.get(id);
    if (!entry) return;
    this.$.clock.clearTimeout(entry.timer);
    this.delayed.delete(id);
  }

  /** Forget every queue (the jobs are loaded again). */
  clear(): void {
    this.queues.clear();
    this.dispatchDue.clear();
    this.stopTimers();
    this.lapsed = [];
    this.users.clear();
    this.held = 0;
  }

  /** No backoff ends any more (the engine closes; or the jobs are loaded again). */
  stopTimers(): void {
    for (const { timer } of this.delayed.values()) this.$.clock.clearTimeout(timer);
    this.delayed.clear();
  }

  /** A queued job as loaded from the store at start (nobody waits for it yet). */
  restore(job: LiveJob): void {
    this.keepInputInStore(job);
    this.count(job, 1);
    const notBefore = job.row.notBefore ?? 0;
    if (notBefore > this.$.clock.now()) return this.delay(job, notBefore);
    this.queueOf(job.row.endpointId)[job.row.lowPriority ? "low" : "normal"].push(job.row.id);
  }

  /** A queued job leaves the queue some other way than being taken (its id is skipped when popped). */
  remove(job: LiveJob): void {
    this.count(job, -1);
    this.undelay(job.row.id);
  }

  /** The queued jobs shift() passed over because their ttl ran out (still queued and counted: end them). */
  takeLapsed(): LiveJob[] {
    const lapsed = this.lapsed;
    this.lapsed = [];
    return lapsed;
  }

  /**
   * Take the next queued job of an endpoint out of the queue (normal priority first). A job whose ttl ran out is
   * never started: it is passed over and kept for takeLapsed().
   */
  shift(endpointId: string, now = this.$.clock.now()): LiveJob | undefined {
    const q = this.queues.get(endpointId);
    if (!q) return undefined;
    for (;;) {
      const id = q.normal.shift() ?? q.low.shift();
      if (id === undefined) return undefined;
      const job = this.$.live.get(id);
      if (!job || job.row.status !== "IN_QUEUE") continue;
      if (lifetimeOver(job.row, now)) {
        this.lapsed.push(job);
        continue;
      }
      this.count(job, -1);
      return job;
    }
  }

  /**
   * What the scaler plans with: the normal-priority jobs waiting (when each was queued, oldest first) and the
   * low-priority ones. At most `limit` normal-priority jobs are looked at (a long queue costs no more than
   * what could change the plan); `normal` is then at least that.
   */
  waiting(endpointId: string, limit: number): { normal: number; low: number; waitingSince: number[] } {
    const total = statsOf(this.$, endpointId).inQueue;
    const q = this.queues.get(endpointId);
    const waitingSince: number[] = [];
    if (q) {
      for (const id of q.normal) {
        if (waitingSince.length >= limit) break;
        const job = this.$.live.get(id);
        if (job && job.row.status === "IN_QUEUE") waitingSince.push(job.row.createdAt);
      }
    }
    // A job queued again after a lost attempt keeps its place in front and its age: it has waited since it was
    // submitted.
    waitingSince.sort((a, b) => a - b);
    const normal = waitingSince.length;
    // Jobs waiting out a retry's backoff cannot be taken yet: no worker is started for them until they can.
    let backingOff = 0;
    for (const entry of this.delayed.values()) if (entry.endpointId === endpointId) backingOff++;
    return { normal, low: Math.max(0, total - normal - backingOff), waitingSince };
  }

  /** Endpoints that got jobs since the last call (their takers are due). */
  takeDue(): string[] {
    if (this.dispatchDue.size === 0) return [];
    const due = [...this.dispatchDue];
    this.dispatchDue.clear();
    return due;
  }

  /** Delete every queued job of an endpoint; resolves with how many once committed. */
  async purge(endpointId: string): Promise<number> {
    // Jobs other replicas handed off before the purge are queued too: adopted first, so that they go with it.
    await this.$.adoptHandedOff?.();
    const q = this.queues.get(endpointId);
    if (!q) return 0;
    const ops: StoreOp[] = [];
    // A set: an id can be in a FIFO twice (a job that left it lazily and was queued again).
    const ids = new Set<string>();
    for (const queue of [q.normal, q.low]) {
      for (const id of queue) {
        const job = this.$.live.get(id);
        if (job && job.row.status === "IN_QUEUE" && !ids.has(id)) {
          ids.add(id);
          ops.push({ op: "deleteJob", id });
        }
      }
      queue.clear();
    }
    for (const [id, entry] of this.delayed) {
      const job = this.$.live.get(id);
      if (entry.endpointId !== endpointId || !job || job.row.status !== "IN_QUEUE" || ids.has(id)) continue;
      ids.add(id);
      ops.push({ op: "deleteJob", id });
      this.undelay(id);
    }
    for (const id of ids) {
      this.count(this.$.live.get(id)!, -1);
      this.$.live.delete(id);
    }
    const stats = statsOf(this.$, endpointId);
    stats.inQueue = 0;
    stats.inQueueBytes = 0;
    await this.$.writer.write(ops, () => ids.forEach((id) => this.$.waiters.notify(id)));
    return ids.size;
  }

  /** The endpoint is gone. */
  drop(endpointId: string): void {
    // Its jobs left memory already (JobSystem.dropEndpoint): what they counted against its owner goes too.
    const stats = this.$.stats.get(endpointId);
    const owner = this.$.endpoints.get(endpointId)?.userId;
    if (stats && owner !== undefined) this.addToUser(owner, -stats.inQueue, -stats.inQueueBytes);
    this.queues.delete(endpointId);
    for (const [id, entry] of this.delayed) if (entry.endpointId === endpointId) this.undelay(id);
  }
}
