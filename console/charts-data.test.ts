// The console's pure chart helpers: a series answer turned into each chart's lines and the sentence that says
// its numbers.

import { expect, it } from "vitest";
import { ApiProblem } from "./api.js";
import { chartSpecs, formatDuration, isolated, metricsTurnedOff, workerStates, type MetricsPoint, type MetricsSeries } from "./charts-data.js";

const jobs = (COMPLETED = 0, FAILED = 0) => ({ COMPLETED, FAILED, CANCELLED: 0, TIMED_OUT: 0 });
const point = (t: string, over: Partial<MetricsPoint> = {}): MetricsPoint => ({
  t,
  requests: 0,
  requestsPerMinute: 0,
  errors: 0,
  latencyMs: { p50: null, p95: null },
  jobs: jobs(),
  delayMs: { p50: null, p95: null },
  executionMs: { p50: null, p95: null },
  coldStarts: 0,
  queueDepth: null,
  queueDepthMax: null,
  workers: null,
  ...over,
});

it("reads durations as people do", () => {
  expect(formatDuration(4.56)).toBe("4.6 ms");
  expect(formatDuration(622.4)).toBe("622 ms");
  expect(formatDuration(1530)).toBe("1.5 s");
  expect(formatDuration(150_000)).toBe("2.5 min");
});

it("finds the values a line cannot draw: none on either side", () => {
  expect(isolated([null, 3, null, 1, 2, null, 0])).toEqual([1, 6]);
  expect(isolated([5])).toEqual([0]);
  expect(isolated([1, 2])).toEqual([]);
});

it("draws known worker states first, others after, only those sampled", () => {
  expect(workerStates([point("2026-01-01T00:00:00Z", { workers: { zombie: 1, idle: 2, running: 0 } }), point("2026-01-01T00:01:00Z")])).toEqual([
    "running",
    "idle",
    "zombie",
  ]);
});

it("turns a day's answer into per-minute lines, gaps where nothing was measured, and summaries of its totals", () => {
  const series: MetricsSeries = {
    window: "1d",
    stepSeconds: 300,
    points: [
      point("2026-01-01T00:00:00.000Z"),
      point("2026-01-01T00:05:00.000Z", {
        requests: 10,
        requestsPerMinute: 2,
        jobs: jobs(8, 2),
        delayMs: { p50: 12, p95: 1500 },
        executionMs: { p50: 100, p95: 200 },
        coldStarts: 1,
        queueDepth: 0,
        queueDepthMax: 6,
        workers: { idle: 1, running: 0, initializing: 0, draining: 0 },
      }),
    ],
    totals: {
      requests: 10,
      errors: 0,
      latencyMs: { p50: null, p95: null },
      jobs: jobs(8, 2),
      coldStarts: 1,
      delayMs: { p50: 12, p95: 1500 },
      executionMs: { p50: 100, p95: 200 },
      queueDepth: 0,
      queueDepthMax: 6,
      workers: { idle: 1, running: 0, initializing: 0, draining: 0 },
    },
  };
  const charts = Object.fromEntries(chartSpecs(series).map((c) => [c.key, c]));
  expect(Object.keys(charts)).toEqual(["requests", "delay", "execution", "cold-starts", "queue", "workers"]);
  expect(charts.requests!.x).toEqual([Date.UTC(2026, 0, 1) / 1000, Date.UTC(2026, 0, 1, 0, 5) / 1000]);
  // Failed jobs per minute over a 5-minute step.
  expect(charts.requests!.ys).toEqual([
    [0, 2],
    [0, 0.4],
  ]);
  expect(charts.requests!.summary).toBe("10 requests in the last day; 8 completed, 2 failed.");
  expect(charts.delay!.ys).toEqual([
    [null, 12],
    [null, 1500],
  ]);
  expect(charts.delay!.summary).toBe("Delay: p50 12 ms, p95 1.5 s over the last day.");
  expect(charts["cold-starts"]!.summary).toBe("1 cold start in the last day.");
  expect(charts.queue!.ys).toEqual([
    [null, 6],
    [null, 0],
  ]);
  expect(charts.queue!.summary).toBe("0 jobs queued now; at most 6 in the last day.");
  expect(charts.workers!.labels).toEqual(["running", "idle", "initializing", "draining"]);
  expect(charts.workers!.ys[1]).toEqual([null, 1]);
  expect(charts.workers!.summary).toBe("Now: 0 running, 1 idle, 0 initializing, 0 draining.");

  const empty = chartSpecs({
    ...series,
    window: "1h",
    stepSeconds: 60,
    points: [point("2026-01-01T00:00:00Z")],
    totals: {
      ...series.totals,
      requests: 1,
      jobs: jobs(),
      coldStarts: 0,
      delayMs: { p50: null, p95: null },
      queueDepth: null,
      queueDepthMax: null,
      workers: null,
    },
  });
  expect(empty.map((c) => c.summary)).toEqual([
    "1 request in the last hour; 0 completed, 0 failed.",
    "No job ended in the last hour.",
    "Execution time: p50 100 ms, p95 200 ms over the last hour.",
    "0 cold starts in the last hour.",
    "Not sampled in the last hour.",
    "Not sampled in the last hour.",
  ]);
});

it("tells a service that keeps no metrics (its 404) from a real error, which stays an error", () => {
  expect(metricsTurnedOff(new ApiProblem(404, "Not Found", "Metrics are turned off on this service (SVC_METRICS=off)"))).toBe(true);
  // An endpoint that is gone is a 404 too, but not this one.
  expect(metricsTurnedOff(new ApiProblem(404, "Not Found", "No endpoint abc"))).toBe(false);
  expect(metricsTurnedOff(new ApiProblem(500, "Internal Server Error", "Metrics are turned off"))).toBe(false);
  expect(metricsTurnedOff(new Error("Metrics are turned off"))).toBe(false);
  expect(metricsTurnedOff(null)).toBe(false);
});

it("charts a load-balanced endpoint by its requests, errors and latency, with no job or queue chart", () => {
  const series: MetricsSeries = {
    endpointType: "lb",
    window: "1h",
    stepSeconds: 60,
    points: [
      point("2026-01-01T00:00:00.000Z"),
      point("2026-01-01T00:01:00.000Z", { requests: 5, requestsPerMinute: 5, errors: 1, latencyMs: { p50: 4, p95: 30 }, workers: { idle: 1 } }),
    ],
    totals: {
      requests: 5,
      errors: 1,
      latencyMs: { p50: 4, p95: 30 },
      jobs: jobs(),
      coldStarts: 1,
      delayMs: { p50: null, p95: null },
      executionMs: { p50: null, p95: null },
      queueDepth: 0,
      queueDepthMax: 0,
      workers: { idle: 1 },
    },
  };
  const charts = chartSpecs(series);
  expect(charts.map((c) => c.key)).toEqual(["requests", "latency", "cold-starts", "workers"]);
  expect(charts[0]!.labels).toEqual(["requests", "errors (5xx)"]);
  expect(charts[0]!.ys).toEqual([
    [0, 5],
    [0, 1],
  ]);
  expect(charts[0]!.summary).toBe("5 requests in the last hour; 1 load-balanced answer with an error (5xx).");
  expect(charts[1]!.summary).toBe("Latency: p50 4 ms, p95 30 ms over the last hour.");
  // No request yet: said, not a blank chart.
  const idle = chartSpecs({
    ...series,
    points: [point("2026-01-01T00:00:00.000Z")],
    totals: { ...series.totals, requests: 0, errors: 0, latencyMs: { p50: null, p95: null } },
  });
  expect(idle.map((c) => c.summary).slice(0, 2)).toEqual([
    "0 requests in the last hour; 0 load-balanced answers with an error (5xx).",
    "No request answered in the last hour.",
  ]);
  // Several endpoints (the home page): the jobs' charts, and latency after requests once load-balanced requests were answered.
  const home = chartSpecs({ ...series, endpointType: undefined });
  expect(home.map((c) => c.key)).toEqual(["requests", "latency", "delay", "execution", "cold-starts", "queue", "workers"]);
  expect(home[0]!.summary).toBe("5 requests in the last hour; 0 completed, 0 failed. 1 load-balanced answer with an error (5xx).");
});
