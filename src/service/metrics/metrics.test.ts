import { describe, expect, it } from "vitest";
import { Registry } from "prom-client";
import { FastHistogram } from "./fast-histogram.js";
import { quantile, RecentSeries } from "./series.js";
import { seriesEndpoints } from "./routes.js";
import type { EndpointRow } from "../store/types.js";
import type { Principal } from "../keys/auth.js";
import { splitHours, UsageMeter } from "./usage.js";
import type { UsageRow } from "./usage-store.js";

describe("FastHistogram", () => {
  it("is written by prom-client's registry in the text format, buckets cumulative", async () => {
    const registry = new Registry();
    const h = new FastHistogram("x_seconds", "help text", ["endpoint"], [0.1, 1], registry);
    const s = h.series({ endpoint: "e1" });
    for (const v of [0.05, 0.5, 0.7, 3]) s.observe(v);
    const text = await registry.metrics();
    expect(text).toContain("# TYPE x_seconds histogram");
    expect(text).toContain('x_seconds_bucket{endpoint="e1",le="0.1"} 1');
    expect(text).toContain('x_seconds_bucket{endpoint="e1",le="1"} 3');
    expect(text).toContain('x_seconds_bucket{endpoint="e1",le="+Inf"} 4');
    expect(text).toContain('x_seconds_sum{endpoint="e1"} 4.25');
    expect(text).toContain('x_seconds_count{endpoint="e1"} 4');
    h.remove({ endpoint: "e1" });
    expect(await registry.metrics()).not.toContain("e1");
  });
});

describe("the recent series", () => {
  it("reads percentiles within a bucket's width, and buckets a day by 5 minutes", () => {
    let now = Date.UTC(2026, 0, 1, 12, 0, 30);
    const r = new RecentSeries(() => now);
    for (let ms = 1; ms <= 100; ms++) r.jobFinal("e", "COMPLETED", ms * 10, null);
    r.request("e");
    now += 60_000;
    r.request("e");
    r.sample("e", 4, { idle: 1 });
    const hour = r.series("e", "1h");
    expect(hour.points).toHaveLength(60);
    const [before, last] = hour.points.slice(-2);
    expect(before!.delayMs.p50! / 500).toBeCloseTo(1, 1);
    expect(before!.delayMs.p95! / 950).toBeCloseTo(1, 1);
    expect(last).toMatchObject({ requestsPerMinute: 1, queueDepth: 4, workers: { idle: 1 }, delayMs: { p50: null } });
    const day = r.series("e", "1d");
    expect(day.points).toHaveLength(288);
    expect(day.points.at(-1)!.requestsPerMinute).toBeCloseTo(2 / 5);
    expect(quantile([], 0.5)).toBeNull();
  });
});

describe("a load-balanced endpoint's series", () => {
  it("counts its answers as requests, its 5xx as errors, and reads latency percentiles of the window", () => {
    let now = Date.UTC(2026, 0, 1, 12, 0, 30);
    const r = new RecentSeries(() => now);
    for (let i = 1; i <= 9; i++) r.lbAnswered("lb", 200, i * 10);
    r.lbAnswered("lb", 504, 1000);
    now += 60_000;
    r.lbAnswered("lb", 502, 5);
    r.lbAnswered("lb", 418, 5);
    const hour = r.series("lb", "1h");
    const [before, last] = hour.points.slice(-2);
    expect(before).toMatchObject({ requests: 10, errors: 1, jobs: { COMPLETED: 0 } });
    expect(before!.latencyMs.p50! / 50).toBeCloseTo(1, 1);
    expect(before!.latencyMs.p95! / 1000).toBeCloseTo(1, 1);
    expect(last).toMatchObject({ requests: 2, errors: 1 });
    expect(hour.totals).toMatchObject({ requests: 12, errors: 2 });
    expect(hour.totals.latencyMs.p95! / 1000).toBeCloseTo(1, 1);
    // A queue endpoint's series has no latency.
    r.request("q");
    expect(r.series("q", "1h").totals).toMatchObject({ requests: 1, errors: 0, latencyMs: { p50: null, p95: null } });
  });
});

describe("the series added up over endpoints", () => {
  it("adds counts and latest samples, reads percentiles from the merged buckets, and totals the window", () => {
    let now = Date.UTC(2026, 0, 1, 12, 0, 30);
    const r = new RecentSeries(() => now);
    for (let i = 0; i < 3; i++) r.request("a");
    r.jobFinal("a", "COMPLETED", 10, 100);
    r.jobFinal("a", "FAILED", 10, 100);
    r.coldStarted("a");
    r.sample("a", 7, { idle: 1, running: 0 });
    r.sample("a", 2, { idle: 1, running: 0 });
    now += 60_000;
    r.request("b");
    // b's jobs are slow: the merged p95 is b's, the p50 a's (never an average of the endpoints' percentiles).
    for (let i = 0; i < 2; i++) r.jobFinal("b", "COMPLETED", 1000, 5000);
    r.sample("b", 5, { running: 2 });
    r.sample("a", 1, { idle: 1, running: 0 });

    const both = r.series(["a", "b", "unknown"], "1h");
    const [first, last] = both.points.slice(-2);
    expect(first).toMatchObject({
      requests: 3,
      coldStarts: 1,
      jobs: { COMPLETED: 1, FAILED: 1 },
      queueDepth: 2,
      queueDepthMax: 7,
      workers: { idle: 1, running: 0 },
    });
    expect(last).toMatchObject({ requests: 1, requestsPerMinute: 1, queueDepth: 6, queueDepthMax: 6, workers: { idle: 1, running: 2 } });
    expect(both.totals).toMatchObject({
      requests: 4,
      coldStarts: 1,
      jobs: { COMPLETED: 3, FAILED: 1, CANCELLED: 0, TIMED_OUT: 0 },
      queueDepth: 6,
      queueDepthMax: 12,
      workers: { idle: 1, running: 2 },
    });
    expect(both.totals.executionMs.p50! / 100).toBeCloseTo(1, 1);
    expect(both.totals.executionMs.p95! / 5000).toBeCloseTo(1, 1);
    expect(both.totals.delayMs.p95! / 1000).toBeCloseTo(1, 1);

    // An endpoint not sampled in the last minute still counts with its previous sample in the totals.
    now += 60_000;
    r.sample("b", 0, { idle: 2 });
    expect(r.series(["a", "b"], "1h").totals).toMatchObject({ queueDepth: 1, workers: { idle: 3, running: 0 } });
    expect(r.series(["a", "b"], "1h").points.at(-1)).toMatchObject({ queueDepth: 0, workers: { idle: 2 } });

    // The day by 5 minutes: the same totals; nothing at all: zeros and nulls.
    expect(r.series(["a", "b"], "1d").totals).toMatchObject({ requests: 4, coldStarts: 1, jobs: { COMPLETED: 3, FAILED: 1 } });
    expect(r.series([], "1d").totals).toEqual({
      requests: 0,
      errors: 0,
      latencyMs: { p50: null, p95: null },
      coldStarts: 0,
      jobs: { COMPLETED: 0, FAILED: 0, CANCELLED: 0, TIMED_OUT: 0 },
      delayMs: { p50: null, p95: null },
      executionMs: { p50: null, p95: null },
      queueDepth: null,
      queueDepthMax: null,
      workers: null,
    });
  });

  it("reads a user's own endpoints it may use; the operator's admin or metrics key reads all", () => {
    const row = (id: string, userId: string) => ({ id, userId }) as EndpointRow;
    const rows = [row("e1", "default"), row("e2", "bob"), row("e3", "bob")];
    const key = (userId: string, scopes: string[]): Principal => ({ userId, scopes, keyId: "k" }) as Principal;
    expect(seriesEndpoints(key("bob", ["admin"]), rows)).toEqual(["e2", "e3"]);
    expect(seriesEndpoints(key("bob", ["jobs:e3"]), rows)).toEqual(["e3"]);
    expect(seriesEndpoints(key("bob", ["metrics"]), rows)).toEqual(["e2", "e3"]);
    expect(seriesEndpoints(key("bob", ["deploy"]), rows)).toEqual([]);
    expect(seriesEndpoints(key("default", ["admin"]), rows)).toEqual(["e1", "e2", "e3"]);
    expect(seriesEndpoints(key("default", ["metrics"]), rows)).toEqual(["e1", "e2", "e3"]);
    expect(seriesEndpoints(key("default", ["jobs:*"]), rows)).toEqual(["e1"]);
  });
});

describe("usage", () => {
  it("splits a worker's time at hour boundaries and adds it up per user, endpoint, hour and GPU type", async () => {
    expect(splitHours(3_600_000 - 500, 3_600_000 + 1500)).toEqual([
      { hour: 0, seconds: 0.5 },
      { hour: 3_600_000, seconds: 1.5 },
    ]);
    const written: UsageRow[] = [];
    let now = 3_600_000 - 2000;
    const meter = new UsageMeter({ add: async (rows) => void written.push(...rows), read: async () => [], close: () => undefined }, { now: () => now });
    meter.started({ workerId: "w", endpointId: "e", userId: "u", gpuType: "ADA_24", gpus: 2 });
    now += 1000;
    await meter.flush();
    now += 3000;
    meter.job("e", "u");
    await meter.stopped("w");
    const total = (k: "workerSeconds" | "gpuSeconds" | "jobs") => written.reduce((s, r) => s + r[k], 0);
    expect(total("workerSeconds")).toBeCloseTo(4);
    expect(total("gpuSeconds")).toBeCloseTo(8);
    expect(total("jobs")).toBe(1);
    expect(new Set(written.map((r) => r.hour))).toEqual(new Set([0, 3_600_000]));
    expect(written.every((r) => r.userId === "u" && r.endpointId === "e")).toBe(true);
  });

  it("keeps what the store refused for the next flush", async () => {
    let fail = true;
    const written: UsageRow[] = [];
    const meter = new UsageMeter(
      {
        add: async (rows) => {
          if (fail) throw new Error("disk full");
          written.push(...rows);
        },
        read: async () => [],
        close: () => undefined,
      },
      { now: () => 0, log: () => undefined },
    );
    meter.job("e", "u");
    await meter.flush();
    fail = false;
    await meter.flush();
    expect(written.map((r) => r.jobs)).toEqual([1]);
  });
});
