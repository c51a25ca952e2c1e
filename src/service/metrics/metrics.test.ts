import { describe, expect, it } from "vitest";
import { Registry } from "prom-client";
import { FastHistogram } from "./fast-histogram.js";
import { quantile, RecentSeries } from "./series.js";
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
    for (let ms = 1; ms <= 100; ms++) r.jobFinal("e", ms * 10, null);
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
      { add: async (rows) => { if (fail) throw new Error("disk full"); written.push(...rows); }, read: async () => [], close: () => undefined },
      { now: () => 0, log: () => undefined },
    );
    meter.job("e", "u");
    await meter.flush();
    fail = false;
    await meter.flush();
    expect(written.map((r) => r.jobs)).toEqual([1]);
  });
});
