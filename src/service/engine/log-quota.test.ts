import { describe, expect, it } from "vitest";
import type { LogRow } from "../store/types.js";
import { capLine, DEFAULT_LOG_LIMITS, droppedCount, DROPPED_STREAM, LogQuota, TokenBucket, type DropReason, type LogLimits } from "./log-quota.js";

const line = (text: string, over: Partial<LogRow> = {}): LogRow => ({ ts: 0, endpointId: "e1", workerId: "w1", jobId: "j1", stream: "stdout", text, ...over });
const limits = (over: Partial<LogLimits>): LogLimits => ({ ...DEFAULT_LOG_LIMITS, ...over });

describe("TokenBucket", () => {
  it("starts full, refills at its rate up to its capacity, and takes only what it has", () => {
    const b = new TokenBucket(10, 20, 0);
    expect(b.take(20, 0)).toBe(true);
    expect(b.take(1, 0)).toBe(false);
    expect(b.take(1, 99)).toBe(false); // 0.99 tokens
    expect(b.take(1, 100)).toBe(true);
    expect(b.available(100_000)).toBe(20);
    expect(b.full(100_000)).toBe(true);
  });

  it("lets a single cost larger than its capacity through from a full bucket (it could never pass otherwise)", () => {
    const b = new TokenBucket(1, 5, 0);
    expect(b.take(50, 0)).toBe(true);
    expect(b.take(1, 0)).toBe(false);
  });
});

describe("capLine", () => {
  it("keeps a line that fits, cuts a longer one at a character boundary and says so", () => {
    expect(capLine("short", 10)).toBe("short");
    expect(capLine("abcdefghijkl", 10)).toBe("abcdefghij [svc: line cut at 10 of 12 bytes]");
    // "é" is two bytes: a cut inside one backs off to the character before.
    expect(capLine("aé".repeat(6), 4)).toBe("aéa [svc: line cut at 4 of 18 bytes]");
  });
});

describe("LogQuota", () => {
  it("passes lines within the worker's burst and drops the rest, then writes one notice with the count and the limit", () => {
    const dropped: Array<[DropReason, number]> = [];
    const q = new LogQuota(limits({ workerLinesPerS: 10, burstS: 1 }), (r, n) => dropped.push([r, n]));
    const burst = Array.from({ length: 25 }, (_, i) => line(`l${i}`));
    const kept = q.admit(burst, 0);
    expect(kept.map((l) => l.text)).toEqual(Array.from({ length: 10 }, (_, i) => `l${i}`));
    expect(dropped).toEqual([["worker_lines", 15]]);
    // Nothing yet: the burst may go on.
    expect(q.flush(500)).toEqual([]);
    // A line kept after the burst comes after the notice of it.
    const after = q.admit([line("next")], 1000);
    expect(after.map((l) => [l.stream, l.text])).toEqual([
      [DROPPED_STREAM, "[svc] 15 log lines dropped: over the worker's 10 lines/s (SVC_LOG_WORKER_LINES_PER_S)"],
      ["stdout", "next"],
    ]);
    expect(after[0]).toMatchObject({ workerId: "w1", endpointId: "e1", jobId: "j1" });
    expect(droppedCount(after[0]!)).toBe(15);
    expect(droppedCount(after[1]!)).toBeUndefined();
    // Once only.
    expect(q.flush(5000)).toEqual([]);
  });

  it("writes the notice of a burst that ended in silence on the next flush after a quiet second", () => {
    const q = new LogQuota(limits({ workerLinesPerS: 1, burstS: 1 }));
    q.admit([line("a"), line("b"), line("c")], 0);
    expect(q.flush(999)).toEqual([]);
    const [notice] = q.flush(1000);
    expect(notice).toMatchObject({
      stream: DROPPED_STREAM,
      text: "[svc] 2 log lines dropped: over the worker's 1 lines/s (SVC_LOG_WORKER_LINES_PER_S)",
      ts: 1000,
    });
  });

  it("tells of a flood that never stops every ten seconds, each notice counting its own part", () => {
    const q = new LogQuota(limits({ workerLinesPerS: 1, burstS: 1 }));
    let total = 0;
    const notices: LogRow[] = [];
    for (let t = 0; t <= 25_000; t += 100) {
      const kept = q.admit(
        Array.from({ length: 100 }, () => line("flood")),
        t,
      );
      notices.push(...kept.filter((l) => l.stream === DROPPED_STREAM), ...q.flush(t));
      total += 100;
    }
    notices.push(...q.flush(27_000));
    // Lines the refilling bucket lets through meanwhile do not end the burst: a notice at 10 s, at 20 s, and when
    // it stopped.
    expect(notices.map((n) => n.ts)).toEqual([10_000, 20_000, 27_000]);
    // Every line not kept is counted once: kept were the burst's one line and one a second after.
    const kept = total - notices.reduce((sum, n) => sum + droppedCount(n)!, 0);
    expect(kept).toBe(26);
  });

  it("limits bytes as well as lines, counting each line's overhead, and cuts long lines", () => {
    const q = new LogQuota(limits({ workerBytesPerS: 1000, burstS: 1, maxLineBytes: 200 }));
    const kept = q.admit([line("x".repeat(500)), line("y".repeat(500)), line("z".repeat(500)), line("w".repeat(500))], 0);
    // Each is cut to 200 bytes and a mark, and costs that and the overhead (336): two fit in the 1000 bytes' burst.
    expect(kept).toHaveLength(2);
    expect(kept[0]!.text).toBe(`${"x".repeat(200)} [svc: line cut at 200 of 500 bytes]`);
    const [notice] = q.flush(1000);
    expect(notice!.text).toBe("[svc] 2 log lines dropped: over the worker's 1000 bytes/s (SVC_LOG_WORKER_BYTES_PER_S)");
  });

  it("holds an endpoint's workers together to the endpoint's limit, and names each limit a burst went over", () => {
    const q = new LogQuota(limits({ workerLinesPerS: 10, endpointLinesPerS: 15, burstS: 1 }));
    const kept1 = q.admit(
      Array.from({ length: 12 }, () => line("a", { workerId: "w1" })),
      0,
    );
    const kept2 = q.admit(
      Array.from({ length: 12 }, () => line("b", { workerId: "w2" })),
      0,
    );
    expect([kept1.length, kept2.length]).toEqual([10, 5]);
    const notices = q.flush(1000);
    expect(notices.map((n) => [n.workerId, n.text])).toEqual([
      ["w1", "[svc] 2 log lines dropped: over the worker's 10 lines/s (SVC_LOG_WORKER_LINES_PER_S)"],
      ["w2", "[svc] 7 log lines dropped: over the endpoint's 15 lines/s (SVC_LOG_ENDPOINT_LINES_PER_S)"],
    ]);
    // A burst over two limits names both, with the count of each.
    const q2 = new LogQuota(limits({ workerLinesPerS: 2, endpointBytesPerS: 250, burstS: 1 }));
    // a passes; the long one is over the endpoint's bytes; b passes (the worker's last line); c is over its lines.
    expect(q2.admit([line("a"), line("x".repeat(100)), line("b"), line("c")], 0).map((l) => l.text)).toEqual(["a", "b"]);
    expect(q2.flush(1000).map((n) => n.text)).toEqual([
      "[svc] 2 log lines dropped: 1 over the endpoint's 250 bytes/s (SVC_LOG_ENDPOINT_BYTES_PER_S), 1 over the worker's 2 lines/s (SVC_LOG_WORKER_LINES_PER_S)",
    ]);
  });

  it("passes the service's own lines whatever the quota, and forgets buckets that refilled", () => {
    const q = new LogQuota(limits({ workerLinesPerS: 1, endpointLinesPerS: 1, burstS: 1 }));
    const svcLines = Array.from({ length: 50 }, () => line("notice", { workerId: "svc" }));
    expect(q.admit(svcLines, 0)).toHaveLength(50);
    expect(q.admit([line("a"), line("b")], 0)).toHaveLength(1);
    q.flush(2000);
    // A fresh bucket (the old one was forgotten) is a full one: the same as it would have been.
    expect(q.admit([line("c")], 2000)).toHaveLength(1);
    expect((q as unknown as { workers: Map<string, unknown> }).workers.size).toBe(1);
    q.flush(10_000);
    expect((q as unknown as { workers: Map<string, unknown> }).workers.size).toBe(0);
  });
});
