// The retry backoff as a schedule: the exponential ceiling per retry, bounded, and the full jitter under it.

import { describe, expect, it } from "vitest";
import { backoffCeilingMs, DEFAULT_BACKOFF, isRetryable, retryDelayMs } from "./retry-policy.js";

describe("retry backoff", () => {
  it("doubles from the base at each retry up to its maximum", () => {
    const policy = { baseMs: 500, factor: 2, maxMs: 5_000 };
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffCeilingMs(policy, n))).toEqual([500, 1_000, 2_000, 4_000, 5_000, 5_000]);
    expect([1, 2, 3].map((n) => backoffCeilingMs({ baseMs: 100, factor: 3, maxMs: 60_000 }, n))).toEqual([100, 300, 900]);
    // Never overflows, however many retries.
    expect(backoffCeilingMs(policy, 10_000)).toBe(5_000);
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffCeilingMs(DEFAULT_BACKOFF, n))).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
  });

  it("draws each delay uniformly between zero and the ceiling (full jitter)", () => {
    const policy = { baseMs: 1_000, factor: 2, maxMs: 8_000 };
    expect(retryDelayMs(policy, 1, () => 0)).toBe(0);
    expect(retryDelayMs(policy, 1, () => 0.5)).toBe(500);
    expect(retryDelayMs(policy, 3, () => 0.25)).toBe(1_000);
    expect(retryDelayMs(policy, 9, () => 0.999_999_9)).toBe(8_000);
    const draws = Array.from({ length: 2_000 }, () => retryDelayMs(policy, 2));
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...draws)).toBeLessThanOrEqual(2_000);
    // Spread over the whole range, not clustered at the ceiling.
    expect(draws.filter((d) => d < 1_000).length).toBeGreaterThan(700);
    expect(draws.filter((d) => d >= 1_000).length).toBeGreaterThan(700);
  });

  it("a zero base retries at once", () => {
    expect(retryDelayMs({ baseMs: 0, factor: 2, maxMs: 0 }, 4, () => 0.9)).toBe(0);
  });

  it("retries every failure but one marked retryable: false", () => {
    expect(isRetryable(undefined)).toBe(true);
    expect(isRetryable({})).toBe(true);
    expect(isRetryable({ retryable: true })).toBe(true);
    expect(isRetryable({ retryable: false })).toBe(false);
  });
});
