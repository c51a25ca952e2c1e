import { describe, expect, it } from "vitest";
import { durationFlag, parseDuration, parseSince } from "./duration.js";

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
