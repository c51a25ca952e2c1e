// The workers the service knows: started by the scaler or first seen with a valid token, registered, a
// release's standby probe promoted, drained, gone. Each worker has a stop channel (events): the jobs it must
// stop (cancelled, timed out) and whether it must drain.

import type { DispatchSystem } from "./dispatch.js";
import type { LeaseSystem } from "./leases.js";
import type { EngineResources } from "./resources.js";
import type { LiveJob, WorkerEntry } from "./types.js";

export class WorkerRegistry {
  constructor(
    private readonly $: EngineResources,
    private readonly dispatch: DispatchSystem,
    private readonly leases: LeaseSystem,
    /** A running job whose worker died under it (JobSystem.lost: counted as an attempt). */
    private readonly lost: (job: LiveJob, died: string) => void,
  ) {}

  /** Known to the service (started by the scaler, or first seen with a valid token). */
  ensureWorker(workerId: string, endpointId: string, managed = false): WorkerEntry {
    let w = this.$.workers.get(workerId);
    if (!w) {
      const now = this.$.clock.now();
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
      this.$.workers.set(workerId, w);
    }
    return w;
  }

  register(workerId: string, endpointId: string, concurrency: number): WorkerEntry {
    const w = this.ensureWorker(workerId, endpointId);
    w.registered = true;
    w.concurrency = Math.max(1, Math.floor(concurrency) || 1);
    w.lastSeen = this.$.clock.now();
    w.idleSince = this.$.clock.now();
    return w;
  }

  /**
   * A worker is gone (exited): its jobs go back to the queue at once. `died`: it ended without being asked (how, in
   * words): each job it ran counts that as an attempt, so a job that kills its worker every time ends.
   */
  workerGone(workerId: string, died?: string): void {
    const w = this.$.workers.get(workerId);
    if (!w) return;
    this.$.workers.delete(workerId);
    this.dispatch.dismiss(w);
    w.wakeStandby?.();
    // Its jobs: those it took from this service, and those it held before a restart (loaded from the store with
    // their worker's id, never taken through this process).
    const jobs = new Set([...w.held, ...this.leases.runningOn(workerId)]);
    for (const id of jobs) {
      const job = this.$.live.get(id);
      if (!job || job.row.status !== "IN_PROGRESS" || job.row.workerId !== workerId) continue;
      if (died === undefined) this.leases.requeue(job);
      else this.lost(job, died);
    }
    w.wakeEvents?.();
  }

  /** A release switched: its probe may take jobs now. */
  promote(workerId: string): void {
    const w = this.$.workers.get(workerId);
    if (!w || !w.standby) return;
    w.standby = false;
    w.idleSince = this.$.clock.now();
    w.wakeStandby?.();
  }

  drain(workerId: string): void {
    const w = this.$.workers.get(workerId);
    if (!w) return;
    w.draining = true;
    w.wakeEvents?.();
    w.wakeStandby?.();
    this.dispatch.dismiss(w);
  }

  /** Long-poll the worker's stop channel. */
  async events(w: WorkerEntry, waitMs: number): Promise<{ cancel: string[]; drain: boolean }> {
    const { clock } = this.$;
    w.lastSeen = clock.now();
    if (w.cancel.length === 0 && !w.draining && waitMs > 0 && !this.$.closed) {
      w.polling++;
      try {
        await new Promise<void>((resolve) => {
          const timer = clock.setTimeout(() => wake(), waitMs);
          const wake = () => {
            clock.clearTimeout(timer);
            if (w.wakeEvents === wake) w.wakeEvents = undefined;
            resolve();
          };
          w.wakeEvents?.();
          w.wakeEvents = wake;
        });
      } finally {
        w.polling--;
        w.lastSeen = clock.now();
      }
    }
    const cancel = w.cancel;
    w.cancel = [];
    return { cancel, drain: w.draining || this.$.closed };
  }

  /** Shutting down: every stop channel answers now. */
  wakeAll(): void {
    for (const w of this.$.workers.values()) w.wakeEvents?.();
  }
}
