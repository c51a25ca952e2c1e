// The console's charts as data: what `GET /v1/endpoints/{id}/metrics` and `GET /v1/metrics` answer, turned into
// one series set per chart (x in epoch seconds, as uPlot takes it) and the sentence that says each chart's
// numbers in words (its accessible summary, and what the browser tests read). Pure: no DOM, no uPlot.

export type MetricsWindow = "1h" | "1d";
export type FinalStatus = "COMPLETED" | "FAILED" | "CANCELLED" | "TIMED_OUT";

export interface Percentiles {
  p50: number | null;
  p95: number | null;
}

export interface MetricsPoint {
  t: string;
  requests: number;
  requestsPerMinute: number;
  errors: number;
  latencyMs: Percentiles;
  jobs: Record<FinalStatus, number>;
  delayMs: Percentiles;
  executionMs: Percentiles;
  coldStarts: number;
  queueDepth: number | null;
  queueDepthMax: number | null;
  workers: Record<string, number> | null;
}

export interface MetricsSeries {
  /** An endpoint's series: its type (a load-balanced endpoint has requests, errors and latency; no jobs, no queue). */
  endpointType?: "queue" | "lb";
  window: MetricsWindow;
  stepSeconds: number;
  points: MetricsPoint[];
  totals: {
    requests: number;
    errors: number;
    latencyMs: Percentiles;
    jobs: Record<FinalStatus, number>;
    coldStarts: number;
    delayMs: Percentiles;
    executionMs: Percentiles;
    queueDepth: number | null;
    queueDepthMax: number | null;
    workers: Record<string, number> | null;
  };
}

export type ChartKey = "requests" | "latency" | "delay" | "execution" | "cold-starts" | "queue" | "workers";

export interface ChartSpec {
  key: ChartKey;
  title: string;
  /** How the y values read: a count, a rate or milliseconds. */
  unit: "count" | "per-minute" | "ms";
  /** Bars (events counted per interval) rather than lines (levels). */
  bars: boolean;
  labels: string[];
  x: number[];
  ys: Array<Array<number | null>>;
  summary: string;
}

/**
 * Whether a failed series request means that the service keeps no metrics at all (`svc server` with
 * SVC_METRICS=off answers the metrics routes 404 with this detail), as opposed to a real error such as an endpoint
 * that is gone: the charts then say so calmly, with how to turn them on (METRICS_OFF_TEXT).
 */
export function metricsTurnedOff(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const { status, detail } = error as { status?: unknown; detail?: unknown };
  return status === 404 && typeof detail === "string" && /metrics are turned off/i.test(detail);
}

export const METRICS_OFF_TEXT =
  "No charts: this service keeps no metrics (it runs with SVC_METRICS=off). Start `svc server` without that setting (metrics are on by default) to see them here.";

export const WINDOW_TEXT: Record<MetricsWindow, string> = { "1h": "the last hour", "1d": "the last day" };

/** The worker states in the order people read them; any other state the service reports follows. */
const WORKER_STATES = ["running", "idle", "initializing", "draining"];

/** A duration in ms as the summaries and axes show it: "850 ms", "1.2 s", "2.5 min". Pure. */
export function formatDuration(ms: number): string {
  if (ms < 10) return `${Math.round(ms * 10) / 10} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Math.round(ms / 100) / 10} s`;
  return `${Math.round(ms / 6000) / 10} min`;
}

/** A count or rate: whole numbers as they are, others to two significant decimals. Pure. */
export function formatNumber(n: number): string {
  return Number.isInteger(n) ? String(n) : String(Math.round(n * 100) / 100);
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function percentileText(p: Percentiles, what: string, within: string, none = `No job ended in ${within}.`): string {
  if (p.p50 === null || p.p95 === null) return none;
  return `${what}: p50 ${formatDuration(p.p50)}, p95 ${formatDuration(p.p95)} over ${within}.`;
}

/** Indexes of values with no value on either side: a line cannot show them, so they get a dot. Pure. */
export function isolated(values: ReadonlyArray<number | null | undefined>): number[] {
  const has = (i: number) => values[i] !== null && values[i] !== undefined;
  return values.flatMap((_, i) => (has(i) && !has(i - 1) && !has(i + 1) ? [i] : []));
}

/** The states to draw: those of the window's samples, known ones first. Pure. */
export function workerStates(points: readonly MetricsPoint[]): string[] {
  const seen = new Set<string>();
  for (const p of points) for (const s of Object.keys(p.workers ?? {})) seen.add(s);
  const known = WORKER_STATES.filter((s) => seen.has(s));
  return [...known, ...[...seen].filter((s) => !WORKER_STATES.includes(s)).sort()];
}

/**
 * Every chart of a series answer, in the order the page shows them. Pure. A load-balanced endpoint's: requests
 * with their errors, latency, cold starts and workers (no jobs, no queue). Several endpoints' (the home page): the
 * jobs' charts, with latency after requests when load-balanced requests were answered in the window.
 */
export function chartSpecs(series: MetricsSeries): ChartSpec[] {
  const { points, totals } = series;
  const within = WINDOW_TEXT[series.window];
  const x = points.map((p) => Date.parse(p.t) / 1000);
  const perMinute = series.stepSeconds / 60;
  const failed = (j: Record<FinalStatus, number>) => j.FAILED + j.TIMED_OUT;
  const states = workerStates(points);
  const workersNow = totals.workers;
  const lb = series.endpointType === "lb";
  const errorsText = totals.errors > 0 || lb ? ` ${totals.errors} load-balanced ${totals.errors === 1 ? "answer" : "answers"} with an error (5xx).` : "";
  // Requests beside what failed of them: a load-balanced endpoint's 5xx answers, else the jobs that failed.
  const requests: ChartSpec = {
    key: "requests",
    title: "Requests per minute",
    unit: "per-minute",
    bars: false,
    labels: ["requests", lb ? "errors (5xx)" : "failed jobs"],
    x,
    ys: [points.map((p) => p.requestsPerMinute), points.map((p) => (lb ? p.errors : failed(p.jobs)) / perMinute)],
    summary: lb
      ? `${plural(totals.requests, "request")} in ${within};${errorsText}`
      : `${plural(totals.requests, "request")} in ${within}; ` +
        `${totals.jobs.COMPLETED} completed, ${failed(totals.jobs)} failed` +
        (totals.jobs.CANCELLED > 0 ? `, ${totals.jobs.CANCELLED} cancelled` : "") +
        "." +
        errorsText,
  };
  const latency: ChartSpec = {
    key: "latency",
    title: "Latency (load-balanced requests)",
    unit: "ms",
    bars: false,
    labels: ["p50", "p95"],
    x,
    ys: [points.map((p) => p.latencyMs.p50), points.map((p) => p.latencyMs.p95)],
    summary: percentileText(totals.latencyMs, "Latency", within, `No request answered in ${within}.`),
  };
  const coldStarts: ChartSpec = {
    key: "cold-starts",
    title: "Cold starts",
    unit: "count",
    bars: true,
    labels: ["cold starts"],
    x,
    ys: [points.map((p) => p.coldStarts)],
    summary: `${plural(totals.coldStarts, "cold start")} in ${within}.`,
  };
  const workers: ChartSpec = {
    key: "workers",
    title: "Workers by state",
    unit: "count",
    bars: false,
    labels: states,
    x,
    ys: states.map((s) => points.map((p) => (p.workers === null ? null : (p.workers[s] ?? 0)))),
    summary:
      workersNow === null
        ? `Not sampled in ${within}.`
        : `Now: ${states.length === 0 ? "no workers" : states.map((s) => `${workersNow[s] ?? 0} ${s}`).join(", ")}.`,
  };
  if (lb) return [requests, latency, coldStarts, workers];
  return [
    requests,
    ...(totals.latencyMs.p50 !== null ? [latency] : []),
    {
      key: "delay",
      title: "Delay (queue wait)",
      unit: "ms",
      bars: false,
      labels: ["p50", "p95"],
      x,
      ys: [points.map((p) => p.delayMs.p50), points.map((p) => p.delayMs.p95)],
      summary: percentileText(totals.delayMs, "Delay", within),
    },
    {
      key: "execution",
      title: "Execution time",
      unit: "ms",
      bars: false,
      labels: ["p50", "p95"],
      x,
      ys: [points.map((p) => p.executionMs.p50), points.map((p) => p.executionMs.p95)],
      summary: percentileText(totals.executionMs, "Execution time", within),
    },
    coldStarts,
    {
      key: "queue",
      title: "Queue depth",
      unit: "count",
      bars: false,
      labels: ["deepest", "last"],
      x,
      ys: [points.map((p) => p.queueDepthMax), points.map((p) => p.queueDepth)],
      summary:
        totals.queueDepth === null
          ? `Not sampled in ${within}.`
          : `${plural(totals.queueDepth, "job")} queued now; at most ${totals.queueDepthMax} in ${within}.`,
    },
    workers,
  ];
}
