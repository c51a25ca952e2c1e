// The workers the service knows: started by the scaler or first seen with a valid token, addressed by their
// driver, registered, ready, a release's standby probe promoted, drained, gone. The one owner of a worker's state:
// every change is made here and told as a typed event (worker-events.ts) to whoever subscribed (the scaler, the
// load balancer's pool, the release manager). Each worker has a stop channel (events): the jobs it must stop
// (cancelled, timed out) and whether it must drain.

import type { DispatchSystem } from "./dispatch.js";
import type { LeaseSystem } from "./leases.js";
import type { EngineResources } from "./resources.js";
import type { LiveJob, WorkerEntry, WorkerReach, WorkerServes } from "./types.js";
import type { ReadyHow, RegisteredHow, WorkerEvents } from "./worker-events.js";

export class WorkerRegistry {
  constructor(
    private readonly $: EngineResources,
    private readonly dispatch: DispatchSystem,
    private readonly leases: LeaseSystem,
    /** A running job whose worker died under it (JobSystem.lost: counted as an attempt). */
    private readonly lost: (job: LiveJob, died: string) => void,
    private readonly events$: WorkerEvents,
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
        ready: false,
        draining: false,
        managed,
        reach: {},
        concurrency: 1,
        held: new Set(),
        startedAt: now,
        lastSeen: now,
        idleSince: now,
        polling: 0,
        cancel: [],
      };
      this.$.workers.set(workerId, w);
      this.events$.emit("known", { worker: w });
    }
    return w;
  }

  /** The scaler runs this worker through its driver (started, adopted, or another replica's it took over). */
  manage(workerId: string, endpointId: string, how: { revision?: string; standby?: boolean } = {}): WorkerEntry {
    const w = this.ensureWorker(workerId, endpointId, true);
    w.managed = true;
    if (how.revision !== undefined) w.revision = how.revision;
    if (how.standby !== undefined) w.standby = how.standby;
    return w;
  }

  /** Its driver says where it is reachable (before or after it registers); fields left out are kept. */
  addressed(workerId: string, reach: WorkerReach): void {
    const w = this.$.workers.get(workerId);
    if (!w) return;
    const given = Object.fromEntries(Object.entries(reach).filter(([, v]) => v !== undefined)) as WorkerReach;
    if (Object.keys(given).length === 0) return;
    w.reach = { ...w.reach, ...given };
    this.events$.emit("addressed", { worker: w });
  }

  /**
   * It connected: svc's register route, a provider worker's first call, or the service for a prebuilt image.
   * `serves`: a load-balanced worker's server, which is ready once the pool's /ping says so; a worker that serves
   * nothing (a queue worker) is ready from here. Either way through ready(), the one door.
   */
  register(workerId: string, endpointId: string, concurrency: number, how: RegisteredHow, serves?: WorkerServes): WorkerEntry {
    const w = this.ensureWorker(workerId, endpointId);
    w.registered = true;
    w.concurrency = Math.max(1, Math.floor(concurrency) || 1);
    w.lastSeen = this.$.clock.now();
    w.idleSince = this.$.clock.now();
    if (serves) w.serves = serves;
    this.events$.emit("registered", { worker: w, how });
    if (!w.serves) this.ready(workerId, how);
    return w;
  }

  /** It asked for more jobs at once than it registered with (a provider worker's batch take): it may hold that many. */
  raiseConcurrency(workerId: string, concurrency: number): void {
    const w = this.$.workers.get(workerId);
    if (w && concurrency > w.concurrency) w.concurrency = Math.floor(concurrency);
  }

  /** A request to it began or ended (a load-balanced worker): its idle time counts from now. */
  active(workerId: string): void {
    const w = this.$.workers.get(workerId);
    if (w) w.idleSince = this.$.clock.now();
  }

  /** It can take work (said once per worker): registered, or a load-balanced worker's first /ping 200. */
  ready(workerId: string, how: ReadyHow): void {
    const w = this.$.workers.get(workerId);
    if (!w || w.ready) return;
    w.ready = true;
    this.events$.emit("ready", { worker: w, how });
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
    this.events$.emit("gone", died === undefined ? { worker: w } : { worker: w, died });
  }

  /** A release switched: its probe may take jobs now. */
  promote(workerId: string): void {
    const w = this.$.workers.get(workerId);
    if (!w || !w.standby) return;
    w.standby = false;
    w.idleSince = this.$.clock.now();
    w.wakeStandby?.();
    this.events$.emit("promoted", { worker: w });
  }

  drain(workerId: string): void {
    const w = this.$.workers.get(workerId);
    if (!w) return;
    const was = w.draining;
    w.draining = true;
    w.wakeEvents?.();
    w.wakeStandby?.();
    this.dispatch.dismiss(w);
    if (!was) this.events$.emit("draining", { worker: w });
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
