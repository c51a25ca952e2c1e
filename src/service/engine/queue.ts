// The queue index: per endpoint, the ids of queued jobs in two FIFOs (normal priority first, then low). Removal
// is lazy: a job that left the queue some other way (cancelled, dropped) keeps its id here, skipped when popped;
// the endpoint's inQueue count is exact. Endpoints that got jobs this tick are marked for dispatch at flush.

import type { StoreOp } from "../store/types.js";
import { IdQueue } from "./id-queue.js";
import { statsOf, type EngineResources } from "./resources.js";
import type { LiveJob } from "./types.js";

export class QueueSystem {
  private readonly queues = new Map<string, { normal: IdQueue; low: IdQueue }>();
  /** Endpoints whose waiting takers get the jobs queued this tick, when the tick's batch is flushed. */
  private readonly dispatchDue = new Set<string>();

  constructor(private readonly $: EngineResources) {}

  private queueOf(endpointId: string) {
    let q = this.queues.get(endpointId);
    if (!q) this.queues.set(endpointId, (q = { normal: new IdQueue(), low: new IdQueue() }));
    return q;
  }

  /** Queue a job (at the front: a job whose attempt was lost keeps its place). */
  enqueue(job: LiveJob, front: boolean): void {
    const q = this.queueOf(job.row.endpointId)[job.row.lowPriority ? "low" : "normal"];
    if (front) q.unshift(job.row.id);
    else q.push(job.row.id);
    statsOf(this.$, job.row.endpointId).inQueue++;
    // Waiting takers are served once per tick, at flush: one take answer carries every job queued meanwhile
    // (it waits for that batch's commit anyway), instead of one answer (and one more take) per job.
    this.dispatchDue.add(job.row.endpointId);
    this.$.writer.scheduleFlush();
  }

  /** Forget every queue (the jobs are loaded again). */
  clear(): void {
    this.queues.clear();
    this.dispatchDue.clear();
  }

  /** A queued job as loaded from the store at start (nobody waits for it yet). */
  restore(job: LiveJob): void {
    this.queueOf(job.row.endpointId)[job.row.lowPriority ? "low" : "normal"].push(job.row.id);
    statsOf(this.$, job.row.endpointId).inQueue++;
  }

  /** A queued job leaves the queue some other way than being taken (its id is skipped when popped). */
  remove(job: LiveJob): void {
    statsOf(this.$, job.row.endpointId).inQueue--;
  }

  /** Take the next queued job of an endpoint out of the queue (normal priority first). */
  shift(endpointId: string): LiveJob | undefined {
    const q = this.queues.get(endpointId);
    if (!q) return undefined;
    for (;;) {
      const id = q.normal.shift() ?? q.low.shift();
      if (id === undefined) return undefined;
      const job = this.$.live.get(id);
      if (!job || job.row.status !== "IN_QUEUE") continue;
      statsOf(this.$, endpointId).inQueue--;
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
    return { normal, low: Math.max(0, total - normal), waitingSince };
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
    const ids: string[] = [];
    for (const queue of [q.normal, q.low]) {
      for (const id of queue) {
        const job = this.$.live.get(id);
        if (job && job.row.status === "IN_QUEUE") {
          ids.push(id);
          ops.push({ op: "deleteJob", id });
        }
      }
      queue.clear();
    }
    for (const id of ids) this.$.live.delete(id);
    statsOf(this.$, endpointId).inQueue = 0;
    await this.$.writer.write(ops, () => ids.forEach((id) => this.$.waiters.notify(id)));
    return ids.length;
  }

  /** The endpoint is gone. */
  drop(endpointId: string): void {
    this.queues.delete(endpointId);
  }
}
