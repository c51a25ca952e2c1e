import { describe, expect, it } from "vitest";
import { parseRateLimits, RateLimiter } from "./ratelimit.js";

describe("RateLimiter", () => {
  const windows = [
    { name: "minute", seconds: 60, quota: 2 },
    { name: "hour", seconds: 3600, quota: 3 },
  ];

  it("counts per user and window, refuses past a quota naming the window that resets last, and resets", () => {
    const limiter = new RateLimiter(windows);
    const t0 = 1_000_000;
    expect(limiter.hit("a", t0)).toMatchObject({ allowed: true, rateLimit: '"minute";r=1;t=60, "hour";r=2;t=3600' });
    expect(limiter.hit("a", t0 + 1500).rateLimit).toBe('"minute";r=0;t=59, "hour";r=1;t=3599');
    const refused = limiter.hit("a", t0 + 2000);
    expect(refused).toMatchObject({ allowed: false, retryAfter: 58, exceeded: { name: "minute" } });
    expect(limiter.hit("b", t0 + 2000).allowed).toBe(true);
    // after the minute: one more fits the hour, then the hour is the exceeded window
    expect(limiter.hit("a", t0 + 60_000).allowed).toBe(true);
    const hour = limiter.hit("a", t0 + 60_001);
    expect(hour).toMatchObject({ allowed: false, exceeded: { name: "hour" }, retryAfter: 3540 });
    expect(limiter.policy).toBe('"minute";q=2;w=60, "hour";q=3;w=3600');
  });

  it("parses quota settings", () => {
    const parsed = parseRateLimits("minute=60, hour=1000/120s");
    expect(parsed.find((w) => w.name === "minute")).toEqual({ name: "minute", seconds: 60, quota: 60 });
    expect(parsed.find((w) => w.name === "hour")).toEqual({ name: "hour", seconds: 120, quota: 1000 });
    expect(() => parseRateLimits("week=3")).toThrow(/week=3/);
  });
});
