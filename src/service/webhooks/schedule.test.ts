import { describe, expect, it } from "vitest";
import { afterFailure } from "../jobs/webhook-outbox.js";
import { DEFAULT_RETRY_POLICY, longestSchedule, retryDelay, retryPolicy } from "./schedule.js";

const row = { id: "w", jobId: "j", endpointId: "e", event: "completed", url: "http://x", body: "{}", attempts: 0, nextAt: 0, createdAt: 0 };

describe("the webhook retry schedule", () => {
  it("grows exponentially, each wait between half and all of its step, and gives up after the last attempt", () => {
    const p = DEFAULT_RETRY_POLICY;
    expect([1, 2, 3, 4].map((n) => retryDelay(p, n, 0))).toEqual([1_000, 4_000, 16_000, 64_000]);
    expect([1, 2, 3, 4].map((n) => retryDelay(p, n, 0.999999))).toEqual([2_000, 8_000, 32_000, 128_000]);
    expect(retryDelay(p, 5, 0.5)).toBeUndefined();
    // "A few minutes": the whole schedule of one message, at the most.
    expect(longestSchedule(p)).toBe(170_000);
  });

  it("is bounded by maxDelayMs, and configurable", () => {
    const p = retryPolicy({ attempts: 8, baseMs: 1_000, factor: 10, maxDelayMs: 60_000 });
    expect([1, 2, 3, 4, 5].map((n) => retryDelay(p, n, 0.999999))).toEqual([1_000, 10_000, 60_000, 60_000, 60_000]);
    expect(() => retryPolicy({ attempts: 0 })).toThrow(/attempts/);
    expect(() => retryPolicy({ baseMs: 10, maxDelayMs: 5 })).toThrow(/maxDelayMs/);
  });

  it("plans a failed attempt's next one on the clock it is given, and deletes the message after the last", () => {
    const now = 1_000_000;
    const p = retryPolicy({ attempts: 3, baseMs: 100, factor: 2, maxDelayMs: 10_000 });
    expect(afterFailure(row, now, p, 0.5)).toEqual({ op: "retryWebhook", id: "w", attempts: 1, nextAt: now + 75 });
    expect(afterFailure({ ...row, attempts: 1 }, now, p, 0.5)).toEqual({ op: "retryWebhook", id: "w", attempts: 2, nextAt: now + 150 });
    expect(afterFailure({ ...row, attempts: 2 }, now, p, 0.5)).toEqual({ op: "deleteWebhook", id: "w" });
  });
});
