// The numbers behind the console's charts: per endpoint, per minute, for the last day, kept in memory in a ring
// of minute slots (they reset when the service restarts; Prometheus keeps the long history). Each minute holds
// the job API requests, sparse log-scale histograms of queue delay and execution time (percentiles are read from
// them, within a bucket's width: about 5%), cold starts, and the last sampled queue depth and workers by state.

const MINUTE_MS = 60_000;
/** A day of minutes. */
export const SLOTS = 24 * 60;
/** Buckets grow by this factor: a percentile is read within about half of it. */
const GROWTH = 1.1;
const LOG_GROWTH = Math.log(GROWTH);
/** The smallest bucket's upper bound, in ms. */
const FIRST_MS = 1;

interface Minute {
  /** Epoch minute this slot holds (a slot of another minute is stale). */
  minute: number;
  requests: number;
  coldStarts: number;
  delay: Map<number, number>;
  execution: Map<number, number>;
  queueDepth: number | null;
  workers: Record<string, number> | null;
}

export type Window = "1h" | "1d";

export interface SeriesPoint {
  /** ISO start of the interval. */
  t: string;
  /** Job API requests per minute, averaged over the interval. */
  requestsPerMinute: number;
  delayMs: { p50: number | null; p95: number | null };
  executionMs: { p50: number | null; p95: number | null };
  coldStarts: number;
  /** Last sampled in the interval (null: no sample, e.g. before the service started). */
  queueDepth: number | null;
  workers: Record<string, number> | null;
}

export interface EndpointSeries {
  window: Window;
  stepSeconds: number;
  points: SeriesPoint[];
}

function bucketOf(ms: number): number {
  return ms <= FIRST_MS ? 0 : Math.ceil(Math.log(ms / FIRST_MS) / LOG_GROWTH);
}

/** The middle of a bucket, in ms. */
function valueOf(bucket: number): number {
  if (bucket === 0) return FIRST_MS;
  return Math.round(FIRST_MS * Math.pow(GROWTH, bucket - 0.5) * 10) / 10;
}

/** The q-quantile of merged sparse histograms, or null when they are empty. Pure. */
export function quantile(histograms: ReadonlyArray<Map<number, number>>, q: number): number | null {
  const merged = new Map<number, number>();
  let total = 0;
  for (const h of histograms) {
    for (const [b, n] of h) {
      merged.set(b, (merged.get(b) ?? 0) + n);
      total += n;
    }
  }
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (const b of [...merged.keys()].sort((x, y) => x - y)) {
    seen += merged.get(b)!;
    if (seen >= rank) return valueOf(b);
  }
  return null;
}

class EndpointRing {
  private readonly slots: Array<Minute | undefined> = new Array(SLOTS);

  slot(minute: number): Minute {
    const i = minute % SLOTS;
    let s = this.slots[i];
    if (!s || s.minute !== minute) {
      s = { minute, requests: 0, coldStarts: 0, delay: new Map(), execution: new Map(), queueDepth: null, workers: null };
      this.slots[i] = s;
    }
    return s;
  }

  read(minute: number): Minute | undefined {
    const s = this.slots[minute % SLOTS];
    return s && s.minute === minute ? s : undefined;
  }
}

export class RecentSeries {
  private readonly rings = new Map<string, EndpointRing>();

  constructor(private readonly now: () => number = Date.now) {}

  private slot(endpointId: string): Minute {
    let ring = this.rings.get(endpointId);
    if (!ring) this.rings.set(endpointId, (ring = new EndpointRing()));
    return ring.slot(Math.floor(this.now() / MINUTE_MS));
  }

  request(endpointId: string): void {
    this.slot(endpointId).requests++;
  }

  jobFinal(endpointId: string, delayMs: number | null, executionMs: number | null): void {
    const s = this.slot(endpointId);
    if (delayMs !== null) add(s.delay, bucketOf(delayMs));
    if (executionMs !== null) add(s.execution, bucketOf(executionMs));
  }

  coldStarted(endpointId: string): void {
    this.slot(endpointId).coldStarts++;
  }

  /** The endpoint's queue and workers now (sampled every few seconds; the minute keeps the last). */
  sample(endpointId: string, queueDepth: number, workers: Record<string, number>): void {
    const s = this.slot(endpointId);
    s.queueDepth = queueDepth;
    s.workers = { ...workers };
  }

  forget(endpointId: string): void {
    this.rings.delete(endpointId);
  }

  /** The last hour by minute, or the last day by 5 minutes, oldest first, ending with the current interval. */
  series(endpointId: string, window: Window): EndpointSeries {
    const step = window === "1h" ? 1 : 5;
    const count = window === "1h" ? 60 : SLOTS / 5;
    const ring = this.rings.get(endpointId);
    const nowMinute = Math.floor(this.now() / MINUTE_MS);
    const last = nowMinute - (nowMinute % step);
    const points: SeriesPoint[] = [];
    for (let i = count - 1; i >= 0; i--) {
      const start = last - i * step;
      const minutes: Minute[] = [];
      for (let m = start; m < start + step; m++) {
        const s = ring?.read(m);
        if (s) minutes.push(s);
      }
      const sampled = minutes.filter((m) => m.queueDepth !== null);
      const latest = sampled[sampled.length - 1];
      points.push({
        t: new Date(start * MINUTE_MS).toISOString(),
        requestsPerMinute: minutes.reduce((n, m) => n + m.requests, 0) / step,
        delayMs: { p50: quantile(minutes.map((m) => m.delay), 0.5), p95: quantile(minutes.map((m) => m.delay), 0.95) },
        executionMs: { p50: quantile(minutes.map((m) => m.execution), 0.5), p95: quantile(minutes.map((m) => m.execution), 0.95) },
        coldStarts: minutes.reduce((n, m) => n + m.coldStarts, 0),
        queueDepth: latest?.queueDepth ?? null,
        workers: latest?.workers ?? null,
      });
    }
    return { window, stepSeconds: step * 60, points };
  }
}

function add(h: Map<number, number>, bucket: number): void {
  h.set(bucket, (h.get(bucket) ?? 0) + 1);
}
