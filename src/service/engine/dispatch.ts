// Handing queued jobs to workers: a take grabs what is queued, or waits (a long poll) until jobs come; waiting
// takers are served once per tick, when the batch is flushed, so one answer carries every job queued meanwhile.
// A take is answered only once the jobs' IN_PROGRESS changes committed; a refused take puts them back.

import type { JobRow } from "../store/types.js";
import type { TimerHandle } from "./clock.js";
import type { JobSystem } from "./jobs.js";
import type { LeaseSystem } from "./leases.js";
import type { QueueSystem } from "./queue.js";
import { statsOf, type EngineResources } from "./resources.js";
import { INPUT_IN_STORE, type WorkerEntry } from "./types.js";

interface Taker {
  workerId: string;
  max: number;
  /** `committed`: the batch holding the jobs' IN_PROGRESS changes (the answer waits for it). */
  resolve(jobs: JobRow[], committed?: Promise<void>): void;
  timer: TimerHandle;
}

export class DispatchSystem {
  /** Waiting takes per endpoint, oldest first. */
  private readonly takers = new Map<string, Taker[]>();

  constructor(
    private readonly $: EngineResources,
    private readonly queue: QueueSystem,
    private readonly leases: LeaseSystem,
    private readonly jobs: JobSystem,
  ) {
    // Takers first: what they take joins the batch being flushed (a job submitted and taken in one tick is one insert).
    $.writer.beforeFlush(() => this.dispatchQueued());
  }

  /** Take up to `max` jobs, waiting up to `waitMs` for one. */
  async take(w: WorkerEntry, max: number, waitMs: number, signal?: AbortSignal): Promise<JobRow[]> {
    const { clock } = this.$;
    w.lastSeen = clock.now();
    if (w.standby) {
      // A probe of a release waits like an idle worker until its release switches (or the wait is over).
      const started = clock.now();
      if (waitMs > 0 && !w.draining && !this.$.closed) await this.standbyWait(w, waitMs, signal);
      if (w.standby || signal?.aborted) return [];
      waitMs = Math.max(0, waitMs - (clock.now() - started));
    }
    let rows: JobRow[] = w.draining || this.$.closed ? [] : this.grab(w, max);
    let committed: Promise<void> | undefined;
    if (rows.length === 0 && waitMs > 0 && !w.draining && !this.$.closed) {
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
            timer: clock.setTimeout(() => {
              const list = this.takers.get(w.endpointId);
              if (list)
                this.takers.set(
                  w.endpointId,
                  list.filter((t) => t !== taker),
                );
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
              this.takers.set(
                w.endpointId,
                current.filter((t) => t !== taker),
              );
              clock.clearTimeout(taker.timer);
              resolve([]);
            },
            { once: true },
          );
        });
      } finally {
        w.polling--;
        w.lastSeen = clock.now();
      }
    }
    if (rows.length > 0) {
      // The IN_PROGRESS updates were put in the batch by grab(): answer once they are committed (a taker
      // served at flush time was handed that batch: it is no longer the current one).
      try {
        await (committed ?? this.$.writer.write([]));
      } catch (err) {
        // Refused: the jobs are queued again as the store has them; the worker is told 503 and takes again.
        for (const row of rows) {
          const before = this.leases.beforeTakeOf(row.id);
          const job = this.$.live.get(row.id);
          this.leases.settleTake(row.id);
          if (before && job && job.row.status === "IN_PROGRESS" && job.row.workerId === w.id) this.jobs.restore(job, before);
        }
        throw err;
      }
      for (const row of rows) this.leases.settleTake(row.id);
      this.$.hooks.onTaken?.(w.endpointId, w.id);
      if (rows.some((row) => row.input === INPUT_IN_STORE)) rows = await this.withStoredInputs(w, rows);
    }
    return rows;
  }

  /**
   * The taken rows with the inputs kept in the store only read back (copies: the live job keeps none, so memory
   * stays bounded while it runs). A job whose row is gone meanwhile (its endpoint deleted) is left out; when the
   * store cannot be read, the jobs go back to the queue and the take fails as a refused one does.
   */
  private async withStoredInputs(w: WorkerEntry, rows: JobRow[]): Promise<JobRow[]> {
    let read: Array<string | undefined>;
    try {
      read = await Promise.all(rows.map((row) => (row.input === INPUT_IN_STORE ? this.$.store.jobInput(row.id) : row.input)));
    } catch (err) {
      for (const row of rows) {
        const job = this.$.live.get(row.id);
        if (job && job.row.status === "IN_PROGRESS" && job.row.workerId === w.id) this.leases.requeue(job);
      }
      throw err;
    }
    const taken: JobRow[] = [];
    rows.forEach((row, i) => {
      const input = read[i];
      if (input !== undefined) taken.push(input === row.input ? row : { ...row, input });
    });
    return taken;
  }

  private standbyWait(w: WorkerEntry, waitMs: number, signal?: AbortSignal): Promise<void> {
    const { clock } = this.$;
    w.polling++;
    return new Promise<void>((resolve) => {
      let over = false;
      const done = () => {
        if (over) return;
        over = true;
        clock.clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        if (w.wakeStandby === done) w.wakeStandby = undefined;
        w.polling--;
        w.lastSeen = clock.now();
        resolve();
      };
      const timer = clock.setTimeout(done, waitMs);
      w.wakeStandby = done;
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** Move up to `max` queued jobs to IN_PROGRESS under fresh leases held by `w`. */
  private grab(w: WorkerEntry, max: number): JobRow[] {
    const rows: JobRow[] = [];
    const now = this.$.clock.now();
    while (rows.length < max) {
      const job = this.queue.shift(w.endpointId, now);
      if (!job) break;
      this.leases.grant(job, w, now);
      rows.push(job.row);
    }
    this.jobs.endLapsed(this.queue.takeLapsed());
    return rows;
  }

  private dispatchQueued(): void {
    for (const endpointId of this.queue.takeDue()) {
      this.dispatch(endpointId);
      if (statsOf(this.$, endpointId).inQueue > 0) this.$.hooks.onDemand?.(endpointId);
    }
  }

  /** Hand queued jobs to waiting takers. */
  private dispatch(endpointId: string): void {
    const list = this.takers.get(endpointId);
    if (!list || list.length === 0) return;
    while (list.length > 0 && statsOf(this.$, endpointId).inQueue > 0) {
      const taker = list.shift()!;
      const w = this.$.workers.get(taker.workerId);
      if (!w || w.draining) {
        this.$.clock.clearTimeout(taker.timer);
        taker.resolve([]);
        continue;
      }
      const rows = this.grab(w, taker.max);
      if (rows.length === 0) {
        list.unshift(taker);
        break;
      }
      this.$.clock.clearTimeout(taker.timer);
      taker.resolve(rows, this.$.writer.current);
    }
  }

  /** The worker's waiting takes answer with no job (it drains or is gone). */
  dismiss(w: WorkerEntry): void {
    for (const t of this.takers.get(w.endpointId) ?? []) {
      if (t.workerId === w.id) {
        this.$.clock.clearTimeout(t.timer);
        t.resolve([]);
      }
    }
    this.takers.set(
      w.endpointId,
      (this.takers.get(w.endpointId) ?? []).filter((t) => t.workerId !== w.id),
    );
  }

  /** The endpoint is gone: its waiting takes answer with no job. */
  dropEndpoint(endpointId: string): void {
    for (const t of this.takers.get(endpointId) ?? []) {
      this.$.clock.clearTimeout(t.timer);
      t.resolve([]);
    }
    this.takers.delete(endpointId);
  }

  /** Shutting down: every waiting take answers with no job. */
  close(): void {
    for (const list of this.takers.values())
      for (const t of list) {
        this.$.clock.clearTimeout(t.timer);
        t.resolve([]);
      }
    this.takers.clear();
  }
}
