import { describe, expect, it } from "vitest";
import { TIMEOUT_GRACE_MS, waitDeadline } from "./run.js";

describe("waitDeadline: when `svc run` stops waiting", () => {
  it("waits --wait from submission while the job is queued, however small its timeout", () => {
    expect(waitDeadline({ submittedAt: 1000, waitMs: 60_000, timeoutMs: 5_000 })).toEqual({ at: 61_000, reason: "wait" });
  });

  it("once the job was seen running, stops at its timeout plus the grace from then", () => {
    expect(waitDeadline({ submittedAt: 1000, waitMs: 60_000, timeoutMs: 5_000, seenRunningAt: 9_000 })).toEqual({
      at: 9_000 + 5_000 + TIMEOUT_GRACE_MS,
      reason: "timeout",
    });
  });

  it("keeps --wait when it comes first, and without --timeout", () => {
    expect(waitDeadline({ submittedAt: 0, waitMs: 3_000, timeoutMs: 5_000, seenRunningAt: 100 })).toEqual({ at: 3_000, reason: "wait" });
    expect(waitDeadline({ submittedAt: 0, waitMs: 3_000, seenRunningAt: 100 })).toEqual({ at: 3_000, reason: "wait" });
  });
});
