// The one record of what the engine's parts share: the store and the batch writer in front of it, the clock,
// the options and hooks, the endpoints and workers the service knows, the jobs held in memory, per-endpoint
// counts, and who waits on which job. Each part (queue, leases, jobs, workers, streams and logs) receives it
// and keeps its own state to itself; what more than one part reads or changes lives here, once.
//
// Memory is authoritative for jobs that are not final (and for final ones until their final state is
// committed); the store holds everything and is the truth after a restart.

import type { JobRow, LogRow, Store, StoreOp } from "../store/types.js";
import { systemClock, type Clock } from "./clock.js";
import { GroupCommit } from "./group-commit.js";
import {
  isFinal,
  type CounterKey,
  type EndpointStats,
  type EngineEndpoint,
  type EngineHooks,
  type EngineOptions,
  type LiveJob,
  type WorkerEntry,
} from "./types.js";

/** Callers waiting for a job to change (a final state, a stream chunk): woken after the change committed. */
export class JobWaiters {
  private readonly waiters = new Map<string, Set<(final?: JobRow) => void>>();

  constructor(private readonly clock: Clock) {}

  /**
   * The job changed. `final`: its final state as just committed, handed to the waiters so they answer from it: the
   * job has left memory by then, and reading it back from the store costs a database round trip per waiter.
   */
  notify(id: string, final?: JobRow): void {
    const set = this.waiters.get(id);
    if (!set) return;
    this.waiters.delete(id);
    for (const fn of set) fn(final);
  }

  /** Resolves at the job's next change (with its final state when that change ended it), or after `ms`. */
  wait(id: string, ms: number): Promise<JobRow | undefined> {
    return this.watch(id, ms).changed;
  }

  /**
   * `wait`, registered now and cancellable: a caller about to read the job registers first, so that a change
   * committed while its read is in flight is not missed, and cancels when the read made waiting needless.
   */
  watch(id: string, ms: number): { changed: Promise<JobRow | undefined>; cancel(): void } {
    let done!: (final?: JobRow) => void;
    const changed = new Promise<JobRow | undefined>((resolve) => {
      let set = this.waiters.get(id);
      if (!set) this.waiters.set(id, (set = new Set()));
      done = (final?: JobRow) => {
        this.clock.clearTimeout(timer);
        const current = this.waiters.get(id);
        current?.delete(done);
        if (current?.size === 0) this.waiters.delete(id);
        resolve(final);
      };
      const timer = this.clock.setTimeout(done, ms);
      set.add(done);
    });
    return { changed, cancel: () => done() };
  }

  /** Shutting down: every waiter answers now. */
  wakeAll(): void {
    for (const set of this.waiters.values()) for (const fn of set) fn();
  }
}

export interface EngineResources {
  readonly store: Store;
  readonly clock: Clock;
  readonly options: EngineOptions;
  readonly hooks: EngineHooks;
  readonly writer: GroupCommit;
  readonly endpoints: Map<string, EngineEndpoint>;
  readonly workers: Map<string, WorkerEntry>;
  /** Jobs in memory by id: every job that is not final, and final ones until their final state committed. */
  readonly live: Map<string, LiveJob>;
  /** Per endpoint: jobs completed/failed/retried (as stored) and queued/running now. */
  readonly stats: Map<string, EndpointStats>;
  readonly waiters: JobWaiters;
  /**
   * Jobs not in the store yet: nobody outside holds their ids (a /runsync waiting for its answer), so no change of
   * them has to be durable before they end or their caller is answered; `writeJob` writes them whole then.
   */
  readonly unwritten: Set<LiveJob>;
  /** close() was called: no new work, long polls answer at once. */
  closed: boolean;
  /** Take jobs other replicas handed off into this one's queue (engine/handoff.ts); set by the engine. */
  adoptHandedOff?: () => Promise<number>;
  /** Keep log lines (the job's own, as `svc logs --job` shows them); set by the engine. Never rejects. */
  appendLogs?: (lines: LogRow[]) => Promise<void>;
}

export function createResources(store: Store, options: EngineOptions, hooks: EngineHooks = {}, clock: Clock = systemClock): EngineResources {
  return {
    store,
    clock,
    options,
    hooks,
    writer: new GroupCommit(store, clock, hooks),
    endpoints: new Map(),
    workers: new Map(),
    live: new Map(),
    stats: new Map(),
    waiters: new JobWaiters(clock),
    unwritten: new Set(),
    closed: false,
  };
}

export function statsOf($: EngineResources, endpointId: string): EndpointStats {
  let s = $.stats.get(endpointId);
  if (!s) $.stats.set(endpointId, (s = { completed: 0, failed: 0, retried: 0, inQueue: 0, inQueueBytes: 0, inProgress: 0 }));
  return s;
}

/** Count a completed/failed/retried job: in memory now, in the store with the next batch. */
export function countJob($: EngineResources, endpointId: string, key: CounterKey): void {
  statsOf($, endpointId)[key]++;
  $.writer.addCounter(endpointId, key);
}

/**
 * Change a live job; the update goes into the batch and waiters hear of it after commit. An unwritten job's
 * changes stay in memory until it ends, when it is written whole.
 */
export function changeJob($: EngineResources, job: LiveJob, set: Partial<JobRow>): Promise<void> {
  Object.assign(job.row, set);
  const version = ++job.version;
  const id = job.row.id;
  const unwritten = $.unwritten.has(job);
  if (unwritten && !isFinal(job.row.status)) return Promise.resolve();
  // An unwritten job's insert carries its whole row, this change included.
  return writeJob($, job, unwritten ? [] : [{ op: "updateJob", id, set }], () => {
    const ended = isFinal(job.row.status) && job.version === version && $.live.get(id) === job;
    if (ended) $.live.delete(id);
    $.waiters.notify(id, ended ? { ...job.row } : undefined);
  });
}

/**
 * A job's webhook message telling `event`, into the next batch, when the job has a webhook whose filter wants the
 * event. Dropping the write's own rejection loses nothing unsaid: a refused batch is reported through the storage
 * state (the onStorage hook logs it), and the job change the message goes with is answered to its own caller.
 */
export function queueWebhook($: EngineResources, row: JobRow, event: "started" | "progress" | "completed" | "failed", output?: unknown): void {
  const ops = row.webhook ? $.hooks.webhookOps?.(row, event, output) : undefined;
  if (!ops?.length) return;
  void $.writer.write(ops, () => $.hooks.onWebhook?.()).catch(() => undefined /* reported as the storage state: see above */);
}

/**
 * Write ops about a live job, preceded by the job's insert while the store does not have it (see
 * EngineResources.unwritten). A refused batch leaves the job unwritten again: the store still does not have it.
 */
export function writeJob($: EngineResources, job: LiveJob, ops: StoreOp[], after?: () => void): Promise<void> {
  if (!$.unwritten.delete(job)) return $.writer.write(ops, after);
  const committed = $.writer.write([{ op: "insertJob", job: { ...job.row } }, ...ops], after);
  job.inserted = committed;
  committed.catch(() => $.unwritten.add(job));
  return committed;
}

/** A job of an endpoint that is not expired: the live one, else as stored (not put in memory: see adoptJob). */
export async function findJob($: EngineResources, endpointId: string, id: string): Promise<LiveJob | undefined> {
  let job = $.live.get(id);
  if (!job) {
    const row = await $.store.getJob(id);
    // A queued job that is not in memory was handed off by another replica and not adopted yet: adopt it first,
    // so that it is queued here like any other before it changes.
    if (row?.status === "IN_QUEUE" && !$.live.has(id) && $.adoptHandedOff) await $.adoptHandedOff();
    job = $.live.get(id);
    if (!job) {
      if (!row) return undefined;
      job = { row, leaseExpiresAt: 0, lastSeq: -1, version: 0 };
    }
  }
  if (job.row.endpointId !== endpointId) return undefined;
  if (job.row.expiresAt !== null && job.row.expiresAt <= $.clock.now()) return undefined;
  return job;
}

/** Put a found job in memory before changing it (the one already there wins: it has the newer truth). */
export function adoptJob($: EngineResources, job: LiveJob): LiveJob {
  const existing = $.live.get(job.row.id);
  if (existing) return existing;
  $.live.set(job.row.id, job);
  return job;
}
