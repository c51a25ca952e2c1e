import { describe, expect, it } from "vitest";
import { durationFlag, parseDuration, parseSince, timeAgo, timeFromNow } from "./duration.js";
import { columnHeader } from "./management.js";

describe("durations", () => {
  it("reads units and sums of units", () => {
    expect(parseDuration("250ms")).toBe(250);
    expect(parseDuration("90s")).toBe(90_000);
    expect(parseDuration("10m")).toBe(600_000);
    expect(parseDuration("1h30m")).toBe(5_400_000);
    expect(parseDuration("2d")).toBe(172_800_000);
    expect(parseDuration("1.5h")).toBe(5_400_000);
    expect(parseDuration("10")).toBeUndefined();
    expect(parseDuration("10 minutes")).toBeUndefined();
    expect(parseDuration("m")).toBeUndefined();
  });

  it("flags keep their unit for a bare number and convert durations to it", () => {
    expect(durationFlag("--idle-timeout", "s")("30")).toBe(30);
    expect(durationFlag("--idle-timeout", "s")("2m")).toBe(120);
    expect(durationFlag("--execution-timeout", "ms")("600000")).toBe(600_000);
    expect(durationFlag("--execution-timeout", "ms")("10m")).toBe(600_000);
    expect(() => durationFlag("--ttl", "ms")("soon")).toThrow(/--ttl must be a duration like 90s/);
  });

  it("--since takes a duration back from now, an ISO time or epoch ms", () => {
    const now = Date.parse("2026-11-24T10:00:00Z");
    expect(parseSince("10m", now)).toBe(now - 600_000);
    expect(parseSince("2026-11-24T09:00:00Z", now)).toBe(now - 3_600_000);
    expect(parseSince("1764000000000", now)).toBe(1764000000000);
    expect(() => parseSince("yesterday", now)).toThrow(/--since must be/);
  });
});

describe("times and headers in tables", () => {
  it("says how long ago, in the largest unit that fits", () => {
    const now = 1_800_000_000_000;
    expect(timeAgo(now - 2_000, now)).toBe("just now");
    expect(timeAgo(now - 45_000, now)).toBe("45s ago");
    expect(timeAgo(now - 3 * 60_000 - 5_000, now)).toBe("3m ago");
    expect(timeAgo(now - 2 * 3_600_000, now)).toBe("2h ago");
    expect(timeAgo(now - 4 * 86_400_000, now)).toBe("4d ago");
    expect(timeAgo(now + 10_000, now)).toBe("just now");
    expect(timeFromNow(now + 3_600_000 - 1_000, now)).toBe("in 59m");
    expect(timeFromNow(now + 30 * 86_400_000, now)).toBe("in 30d");
    expect(timeFromNow(now - 2 * 86_400_000, now)).toBe("2d ago");
  });

  it("heads a column with its field's words", () => {
    expect(["id", "dataCenter", "userId", "allocatedGpuType", "containerDiskInGb", "workerSeconds"].map(columnHeader)).toEqual([
      "id",
      "data Center",
      "user Id",
      "allocated Gpu Type",
      "container Disk In Gb",
      "worker Seconds",
    ]);
  });
});
