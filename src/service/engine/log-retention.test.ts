// Worker logs through the engine over the real SQLite store and a clock the test moves: quotas before anything is
// written, the notice of dropped lines, and the retention sweep by age and by each endpoint's size.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteStore } from "../store/sqlite.js";
import { SQLITE_MIGRATIONS } from "../schema/sqlite.js";
import type { LogRow } from "../store/types.js";
import type { Clock } from "./clock.js";
import { JobEngine } from "./index.js";
import { DROPPED_STREAM, LOG_LINE_OVERHEAD_BYTES, type LogLimits } from "./log-quota.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(logLimits: Partial<LogLimits>) {
  const dir = mkdtempSync(join(tmpdir(), "svc-log-retention-"));
  const store = openSqliteStore(join(dir, "svc.sqlite"), SQLITE_MIGRATIONS);
  let t = 1_000_000;
  const clock: Clock = { now: () => t, setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout) };
  const removed: Array<[string, number]> = [];
  const dropped: Array<[string, number]> = [];
  const engine = new JobEngine(
    store,
    { leaseMs: 30_000, heartbeatMs: 5_000, logLimits },
    { onLogsRemoved: (r, n) => removed.push([r, n]), onLogsDropped: (r, n) => dropped.push([r, n]) },
    clock,
  );
  for (const id of ["e1", "e2"]) engine.endpoints.set(id, { id, type: "queue", retries: 0, executionTimeoutMs: 60_000, maxConcurrency: 1, functions: [] });
  cleanups.push(
    () => rmSync(dir, { recursive: true, force: true }),
    () => store.close(),
    () => engine.close(),
  );
  const lines = (n: number, over: Partial<LogRow> = {}): LogRow[] =>
    Array.from({ length: n }, (_, i) => ({ ts: t, endpointId: "e1", workerId: "w1", jobId: null, stream: "stdout", text: `line ${i}`, ...over }));
  const texts = async (endpointId = "e1") => (await engine.queryLogs({ endpointId, limit: 100_000 })).map((l) => l.text);
  return { engine, store, lines, texts, removed, dropped, advance: (ms: number) => (t += ms), now: () => t };
}

describe("worker logs in the engine", () => {
  it("writes only what the quota lets through, and the notice of the rest, with its count", async () => {
    const { engine, lines, texts, dropped, advance } = setup({ workerLinesPerS: 100, burstS: 1 });
    await engine.appendLogs(lines(5_000));
    expect((await texts()).length).toBe(100);
    expect(dropped).toEqual([["worker_lines", 4_900]]);
    advance(1_500);
    engine.tick();
    await engine.settled();
    const stored = await engine.queryLogs({ endpointId: "e1", limit: 10_000 });
    expect(stored.at(-1)).toMatchObject({
      stream: DROPPED_STREAM,
      workerId: "w1",
      text: "[svc] 4900 log lines dropped: over the worker's 100 lines/s (SVC_LOG_WORKER_LINES_PER_S)",
    });
    expect(await engine.droppedLogLines({ endpointId: "e1" })).toBe(4_900);
  });

  it("never stores a worker's line in the future (it would outlive the retention age)", async () => {
    const { engine, lines, now } = setup({});
    await engine.appendLogs(lines(1, { ts: now() + 365 * 24 * 3600_000 }));
    expect((await engine.queryLogs({ endpointId: "e1", limit: 1 }))[0]!.ts).toBe(now());
  });

  it("sweeps lines past the retention age, oldest first, and leaves newer lines and other endpoints alone", async () => {
    const { engine, lines, texts, removed, advance } = setup({ retentionMs: 60_000 });
    await engine.appendLogs(lines(3, { text: "old" }));
    advance(30_000);
    await engine.appendLogs([...lines(2, { text: "new" }), ...lines(1, { endpointId: "e2", text: "other" })]);
    expect(await engine.sweepLogs()).toBe(0);
    advance(30_001);
    expect(await engine.sweepLogs()).toBe(3);
    expect(await texts()).toEqual(["new", "new"]);
    expect(await texts("e2")).toEqual(["other"]);
    expect(removed).toEqual([["age", 3]]);
    advance(60_000);
    expect(await engine.sweepLogs()).toBe(3);
    expect(await texts()).toEqual([]);
  });

  it("removes more lines than one step takes in one sweep, a step at a time", async () => {
    const { engine, lines, texts, advance } = setup({ retentionMs: 1_000, workerLinesPerS: 100_000 });
    await engine.appendLogs(lines(12_000, { text: "old" }));
    advance(2_000);
    await engine.appendLogs(lines(1, { text: "new" }));
    expect(await engine.sweepLogs()).toBe(12_000);
    expect(await texts()).toEqual(["new"]);
  });

  it("keeps each endpoint to its size: the oldest lines beyond it go, measured once and followed after", async () => {
    // 10 lines of 100 text bytes each count 200 with the overhead: a 1000-byte endpoint keeps the newest 5.
    const text = (i: number) => `${String(i).padStart(3, "0")}${"x".repeat(97)}`;
    const { engine, store, texts, removed } = setup({ endpointMaxBytes: 5 * (100 + LOG_LINE_OVERHEAD_BYTES) });
    const row = (i: number): LogRow => ({ ts: 1_000_000, endpointId: "e1", workerId: "w1", jobId: null, stream: "stdout", text: text(i) });
    await engine.appendLogs(Array.from({ length: 10 }, (_, i) => row(i)));
    expect(await engine.sweepLogs()).toBe(5);
    expect((await texts()).map((t) => t.slice(0, 3))).toEqual(["005", "006", "007", "008", "009"]);
    expect(removed).toEqual([["size", 5]]);
    // Followed from what was appended (no new measure): two more lines, the two oldest go.
    await engine.appendLogs([row(10), row(11)]);
    await engine.settled();
    expect((await store.logBytes!({ endpointId: "e1", lineOverheadBytes: LOG_LINE_OVERHEAD_BYTES, afterSeq: 0, limit: 100 })).bytes).toBe(7 * 200);
    expect(await engine.sweepLogs()).toBe(2);
    expect((await texts()).map((t) => t.slice(0, 3))).toEqual(["007", "008", "009", "010", "011"]);
    expect(await engine.sweepLogs()).toBe(0);
  });
});
