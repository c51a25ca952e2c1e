// Usage: worker-seconds, GPU-seconds by GPU type, jobs and load-balanced requests, per user, endpoint and hour: what an operator bills or
// budgets on. A worker's life is accounted from when the driver started it (or it was adopted after a restart) to
// when it ended; a running worker's time is added every flush (every minute by default), split at hour
// boundaries, so a crash loses at most one interval. Amounts are kept in memory between flushes and written as
// additions to hourly rows (usage-store.ts).

import type { UsageRow, UsageStore } from "./usage-store.js";
import { errorMessage } from "../../errors.js";

const HOUR_MS = 3_600_000;
export const USAGE_FLUSH_MS = 60_000;

export interface WorkerLife {
  workerId: string;
  endpointId: string;
  userId: string;
  /** The GPU type its GPUs were given as ('' or null: none). */
  gpuType: string | null;
  gpus: number;
}

interface Live extends WorkerLife {
  /** Accounted up to here (epoch ms). */
  until: number;
}

/** Amounts of [from, to) split into the hours they fall in. Pure. */
export function splitHours(from: number, to: number): Array<{ hour: number; seconds: number }> {
  const parts: Array<{ hour: number; seconds: number }> = [];
  let t = from;
  while (t < to) {
    const hour = Math.floor(t / HOUR_MS) * HOUR_MS;
    const end = Math.min(to, hour + HOUR_MS);
    parts.push({ hour, seconds: (end - t) / 1000 });
    t = end;
  }
  return parts;
}

export class UsageMeter {
  private readonly live = new Map<string, Live>();
  private pending = new Map<string, UsageRow>();
  /**
   * The pending row each endpoint's last job or request was counted in (of `pending`, cleared with it): a job's end
   * or an LB request, on a hot path, adds to it without building the row's key, until the hour or the user changes.
   */
  private lastCountRow = new Map<string, UsageRow>();
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: UsageStore,
    private readonly options: { now?: () => number; log?: (message: string) => void; flushMs?: number } = {},
  ) {}

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  /** Flush every interval until close. */
  start(): void {
    this.timer = setInterval(() => void this.flush(), this.options.flushMs ?? USAGE_FLUSH_MS);
    this.timer.unref();
  }

  started(life: WorkerLife): void {
    if (this.live.has(life.workerId)) return;
    this.live.set(life.workerId, { ...life, until: this.now() });
  }

  /** The worker ended: its time up to now is accounted and written. */
  stopped(workerId: string): Promise<void> {
    const w = this.live.get(workerId);
    if (!w) return Promise.resolve();
    this.accrue(w, this.now());
    this.live.delete(workerId);
    return this.flush();
  }

  /** A job of the user's endpoint ended (counted in the hour it ended). */
  job(endpointId: string, userId: string, at = this.now()): void {
    this.countRow(endpointId, userId, at).jobs++;
  }

  /** A load-balanced endpoint's request was answered (counted in the hour it was). */
  request(endpointId: string, userId: string, at = this.now()): void {
    this.countRow(endpointId, userId, at).requests++;
  }

  /** Running workers' time up to now, and whatever else is pending, written to the store. */
  flush(): Promise<void> {
    const now = this.now();
    for (const w of this.live.values()) this.accrue(w, now);
    const rows = [...this.pending.values()];
    this.pending = new Map();
    this.lastCountRow = new Map();
    if (rows.length === 0) return this.flushing;
    this.flushing = this.flushing.then(() =>
      this.store.add(rows).catch((err: unknown) => {
        // Kept for the next flush: usage is what users are billed on, it must not be dropped.
        for (const r of rows) {
          const e = this.entry(r.userId, r.endpointId, r.hour, r.gpuType);
          e.workerSeconds += r.workerSeconds;
          e.gpuSeconds += r.gpuSeconds;
          e.jobs += r.jobs;
          e.requests += r.requests;
        }
        this.options.log?.(`could not write usage records (kept for the next try): ${errorMessage(err)}`);
      }),
    );
    return this.flushing;
  }

  /** Stored usage (usage-store.ts). */
  read(q: { userId?: string; from: number; to: number }): Promise<UsageRow[]> {
    return this.store.read(q);
  }

  /** Account every running worker up to now, write, and stop the timer. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private accrue(w: Live, to: number): void {
    if (to <= w.until) return;
    for (const { hour, seconds } of splitHours(w.until, to)) {
      const e = this.entry(w.userId, w.endpointId, hour, w.gpus > 0 ? (w.gpuType ?? "") : "");
      e.workerSeconds += seconds;
      e.gpuSeconds += seconds * w.gpus;
    }
    w.until = to;
  }

  /** The row jobs and requests of the endpoint's hour count in (the last one used, without building its key). */
  private countRow(endpointId: string, userId: string, at: number): UsageRow {
    const hour = Math.floor(at / HOUR_MS) * HOUR_MS;
    let row = this.lastCountRow.get(endpointId);
    if (!row || row.hour !== hour || row.userId !== userId) this.lastCountRow.set(endpointId, (row = this.entry(userId, endpointId, hour, "")));
    return row;
  }

  private entry(userId: string, endpointId: string, hour: number, gpuType: string): UsageRow {
    const key = `${userId}\u0000${endpointId}\u0000${hour}\u0000${gpuType}`;
    let e = this.pending.get(key);
    if (!e) this.pending.set(key, (e = { userId, endpointId, hour, gpuType, workerSeconds: 0, gpuSeconds: 0, jobs: 0, requests: 0 }));
    return e;
  }
}
