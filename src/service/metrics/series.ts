// The numbers behind the console's charts: per endpoint, per minute, for the last day, kept in memory in a ring
// of minute slots (they reset when the service restarts; Prometheus keeps the long history). Each minute holds
// the requests (job submissions; a load-balanced endpoint's requests, with its 5xx answers and a histogram of their
// latency), sparse log-scale histograms of queue delay and execution time (percentiles are read from them, within a
// bucket's width: about 5%), cold starts, and the last sampled queue depth and workers by state.

const MINUTE_MS = 60_000;
/** A day of minutes. */
export const SLOTS = 24 * 60;
/** Buckets grow by this factor: a percentile is read within about half of it. */
const GROWTH = 1.1;
const LOG_GROWTH = Math.log(GROWTH);
/** The smallest bucket's upper bound, in ms. */
const FIRST_MS = 1;

/** A job's final status, as the job API and `svc_jobs_total` name it. */
export type FinalStatus = "COMPLETED" | "FAILED" | "CANCELLED" | "TIMED_OUT";
export type JobCounts = Record<FinalStatus, number>;

interface Minute {
  /** Epoch minute this slot holds (a slot of another minute is stale). */
  minute: number;
  requests: number;
  /** Load-balanced requests answered with a 5xx. */
  errors: number;
  coldStarts: number;
  jobs: JobCounts;
  delay: Map<number, number>;
  execution: Map<number, number>;
  /** Load-balanced requests, arrival to answer. */
  latency: Map<number, number>;
  queueDepth: number | null;
  /** The deepest sample in the minute: a burst that drained before the minute's last sample still shows. */
  queueDepthMax: number | null;
  workers: Record<string, number> | null;
}

export type Window = "1h" | "1d";

export interface Percentiles {
  p50: number | null;
  p95: number | null;
}

export interface SeriesPoint {
  /** ISO start of the interval. */
  t: string;
  /** Requests in the interval: job submissions, and a load-balanced endpoint's requests. */
  requests: number;
  /** Requests per minute, averaged over the interval. */
  requestsPerMinute: number;
  /** Load-balanced requests answered with a 5xx (the worker's, or the service's when no worker answered in time). */
  errors: number;
  /** Load-balanced requests' time from arrival to answer. */
  latencyMs: Percentiles;
  /** Jobs that reached a final state in the interval, by status. */
  jobs: JobCounts;
  delayMs: Percentiles;
  executionMs: Percentiles;
  coldStarts: number;
  /** Last sampled in the interval, added up over the endpoints (null: no sample, e.g. before the service started). */
  queueDepth: number | null;
  /** The deepest sample in the interval (over several endpoints: each one's deepest, added up). */
  queueDepthMax: number | null;
  workers: Record<string, number> | null;
}

/** The whole window at once: what a chart's text summary says. */
export interface SeriesTotals {
  requests: number;
  errors: number;
  latencyMs: Percentiles;
  jobs: JobCounts;
  coldStarts: number;
  /** Percentiles of every job that ended in the window (not an average of the points'). */
  delayMs: Percentiles;
  executionMs: Percentiles;
  /** The latest sample in the window (null: none yet). */
  queueDepth: number | null;
  /** The deepest sample in the window (over several endpoints: each one's deepest, added up). */
  queueDepthMax: number | null;
  workers: Record<string, number> | null;
}

export interface EndpointSeries {
  window: Window;
  stepSeconds: number;
  points: SeriesPoint[];
  totals: SeriesTotals;
}

const noJobs = (): JobCounts => ({ COMPLETED: 0, FAILED: 0, CANCELLED: 0, TIMED_OUT: 0 });

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
      s = {
        minute,
        requests: 0,
        errors: 0,
        coldStarts: 0,
        jobs: noJobs(),
        delay: new Map(),
        execution: new Map(),
        latency: new Map(),
        queueDepth: null,
        queueDepthMax: null,
        workers: null,
      };
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

  private slot(endpointId: string, at = this.now()): Minute {
    let ring = this.rings.get(endpointId);
    if (!ring) this.rings.set(endpointId, (ring = new EndpointRing()));
    return ring.slot(Math.floor(at / MINUTE_MS));
  }

  request(endpointId: string): void {
    this.slot(endpointId).requests++;
  }

  /** A load-balanced endpoint's request was answered with `status` after `ms`. */
  lbAnswered(endpointId: string, status: number, ms: number): void {
    const s = this.slot(endpointId);
    s.requests++;
    if (status >= 500) s.errors++;
    add(s.latency, bucketOf(ms));
  }

  /** A job ended (`at`: when, epoch ms; its row's completion time, so no clock is read for it; default now). */
  jobFinal(endpointId: string, status: FinalStatus, delayMs: number | null, executionMs: number | null, at?: number): void {
    const s = this.slot(endpointId, at);
    if (status in s.jobs) s.jobs[status]++;
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
    s.queueDepthMax = Math.max(s.queueDepthMax ?? 0, queueDepth);
    s.workers = { ...workers };
  }

  forget(endpointId: string): void {
    this.rings.delete(endpointId);
  }

  /**
   * The last hour by minute, or the last day by 5 minutes, oldest first, ending with the current interval: of one
   * endpoint, or added up over several (the console's home page: all the caller's endpoints).
   */
  series(endpointIds: string | readonly string[], window: Window): EndpointSeries {
    const ids = typeof endpointIds === "string" ? [endpointIds] : endpointIds;
    const rings = ids.map((id) => this.rings.get(id)).filter((r): r is EndpointRing => r !== undefined);
    const step = window === "1h" ? 1 : 5;
    const count = window === "1h" ? 60 : SLOTS / 5;
    const nowMinute = Math.floor(this.now() / MINUTE_MS);
    const last = nowMinute - (nowMinute % step);
    const intervals: Minute[][][] = [];
    for (let i = count - 1; i >= 0; i--) {
      const start = last - i * step;
      // Per endpoint, its minutes of the interval that hold anything.
      intervals.push(
        rings.map((ring) =>
          range(start, start + step)
            .map((m) => ring.read(m))
            .filter((s): s is Minute => s !== undefined),
        ),
      );
    }
    const points = intervals.map((byEndpoint, i) => point(new Date((last - (count - 1 - i) * step) * MINUTE_MS).toISOString(), byEndpoint, step));
    return { window, stepSeconds: step * 60, points, totals: totals(intervals, points) };
  }
}

function range(from: number, to: number): number[] {
  const out: number[] = [];
  for (let m = from; m < to; m++) out.push(m);
  return out;
}

function countJobs(minutes: readonly Minute[]): JobCounts {
  const jobs = noJobs();
  for (const m of minutes) for (const k of Object.keys(jobs) as FinalStatus[]) jobs[k] += m.jobs[k];
  return jobs;
}

/** Each endpoint's last and deepest sample among its minutes, added up (null when none has one). */
function latestSample(byEndpoint: ReadonlyArray<readonly Minute[]>): {
  queueDepth: number | null;
  queueDepthMax: number | null;
  workers: Record<string, number> | null;
} {
  let queueDepth: number | null = null;
  let queueDepthMax: number | null = null;
  let workers: Record<string, number> | null = null;
  for (const minutes of byEndpoint) {
    const sampled = minutes.filter((m) => m.queueDepth !== null);
    const latest = sampled.at(-1);
    if (!latest) continue;
    queueDepth = (queueDepth ?? 0) + latest.queueDepth!;
    queueDepthMax = (queueDepthMax ?? 0) + Math.max(...sampled.map((m) => m.queueDepthMax!));
    workers ??= {};
    for (const [state, n] of Object.entries(latest.workers ?? {})) workers[state] = (workers[state] ?? 0) + n;
  }
  return { queueDepth, queueDepthMax, workers };
}

function percentiles(minutes: readonly Minute[], of: "delay" | "execution" | "latency"): Percentiles {
  const h = minutes.map((m) => m[of]);
  return { p50: quantile(h, 0.5), p95: quantile(h, 0.95) };
}

function point(t: string, byEndpoint: ReadonlyArray<readonly Minute[]>, step: number): SeriesPoint {
  const minutes = byEndpoint.flat();
  const requests = minutes.reduce((n, m) => n + m.requests, 0);
  return {
    t,
    requests,
    requestsPerMinute: requests / step,
    errors: minutes.reduce((n, m) => n + m.errors, 0),
    latencyMs: percentiles(minutes, "latency"),
    jobs: countJobs(minutes),
    delayMs: percentiles(minutes, "delay"),
    executionMs: percentiles(minutes, "execution"),
    coldStarts: minutes.reduce((n, m) => n + m.coldStarts, 0),
    ...latestSample(byEndpoint),
  };
}

function totals(intervals: ReadonlyArray<ReadonlyArray<readonly Minute[]>>, points: readonly SeriesPoint[]): SeriesTotals {
  const minutes = intervals.flat(2);
  // The latest sample is each endpoint's last over the whole window, so an endpoint not sampled in the last
  // interval (a moment after a minute began) still counts with its previous one.
  const perEndpoint = intervals.length === 0 ? [] : intervals[0]!.map((_, e) => intervals.flatMap((byEndpoint) => byEndpoint[e]!));
  return {
    requests: points.reduce((n, p) => n + p.requests, 0),
    errors: points.reduce((n, p) => n + p.errors, 0),
    latencyMs: percentiles(minutes, "latency"),
    jobs: countJobs(minutes),
    coldStarts: points.reduce((n, p) => n + p.coldStarts, 0),
    delayMs: percentiles(minutes, "delay"),
    executionMs: percentiles(minutes, "execution"),
    ...latestSample(perEndpoint),
  };
}

function add(h: Map<number, number>, bucket: number): void {
  h.set(bucket, (h.get(bucket) ?? 0) + 1);
}
