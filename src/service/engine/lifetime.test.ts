// The ttl decision: a job's life counted from submission, and what it ends with when it runs out.

import { describe, expect, it } from "vitest";
import { deadlineOf, DEFAULT_LIFETIME_MS, lifetimeError, lifetimeOver } from "./lifetime.js";

describe("a job's ttl", () => {
  const at = 1_700_000_000_000;

  it("counts from submission; without one it is 24 hours", () => {
    expect(deadlineOf(at, 10_000)).toBe(at + 10_000);
    expect(deadlineOf(at, undefined)).toBe(at + DEFAULT_LIFETIME_MS);
    expect(DEFAULT_LIFETIME_MS).toBe(86_400_000);
  });

  it("runs out at its deadline for a job that has not ended, never for one that has", () => {
    const deadlineAt = at + 10_000;
    expect(lifetimeOver({ status: "IN_QUEUE", deadlineAt }, deadlineAt - 1)).toBe(false);
    expect(lifetimeOver({ status: "IN_QUEUE", deadlineAt }, deadlineAt)).toBe(true);
    expect(lifetimeOver({ status: "IN_PROGRESS", deadlineAt }, deadlineAt + 5)).toBe(true);
    for (const status of ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"] as const) expect(lifetimeOver({ status, deadlineAt }, deadlineAt + 1)).toBe(false);
    // A job stored before ttls were kept has none.
    expect(lifetimeOver({ status: "IN_QUEUE", deadlineAt: null }, at * 2)).toBe(false);
    expect(lifetimeOver({ status: "IN_QUEUE" }, at * 2)).toBe(false);
  });

  it("ends the job with an error that says the ttl ran out, and whether it had started", () => {
    expect(lifetimeError({ status: "IN_QUEUE", createdAt: at, deadlineAt: at + 1_500 })).toEqual({
      message: "The job's ttl of 1500 ms (policy.ttl, counted from submission) ran out while it waited in the queue; it never started",
      type: "TtlExpired",
    });
    expect(lifetimeError({ status: "IN_PROGRESS", createdAt: at, deadlineAt: at + 60_000 }).message).toMatch(
      /ttl of 60000 ms .* ran out while it ran; it was stopped/,
    );
  });
});
