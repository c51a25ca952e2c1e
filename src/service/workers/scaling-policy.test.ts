import { describe, expect, it } from "vitest";
import { defaultPolicy, desiredWorkers, type DemandInput } from "./scaling-policy.js";
import { planScaling, type ScalingInput } from "./scaling-plan.js";

// A fake clock: every case states `now` and when each job was queued.
const NOW = 1_000_000;
const queueDelay = (value: number) => ({ type: "QUEUE_DELAY" as const, value });
const requestCount = (value: number) => ({ type: "REQUEST_COUNT" as const, value });
const input = (over: Partial<DemandInput>): DemandInput => ({
  policy: queueDelay(4),
  workersMin: 0,
  workersMax: 5,
  maxConcurrency: 1,
  queue: { normal: 0, low: 0, waitingSince: [] },
  inProgress: 0,
  workers: { live: 0, starting: 0 },
  now: NOW,
  ...over,
});
const queued = (...agesMs: number[]) => ({ normal: agesMs.length, low: 0, waitingSince: agesMs.map((a) => NOW - a).sort((a, b) => a - b) });

describe("QUEUE_DELAY", () => {
  it("adds no worker while the oldest job has waited the delay or less", () => {
    const busy = { live: 1, starting: 0 };
    expect(desiredWorkers(input({ workers: busy, inProgress: 1, queue: queued(0) }))).toBe(1);
    expect(desiredWorkers(input({ workers: busy, inProgress: 1, queue: queued(3_999, 2_000) }))).toBe(1);
    expect(desiredWorkers(input({ workers: busy, inProgress: 1, queue: queued(4_000) }))).toBe(1);
  });

  it("adds a worker once a job has waited longer than the delay, one per maxConcurrency overdue jobs", () => {
    const busy = { live: 1, starting: 0 };
    expect(desiredWorkers(input({ workers: busy, inProgress: 1, queue: queued(4_001) }))).toBe(2);
    expect(desiredWorkers(input({ workers: busy, inProgress: 1, queue: queued(9_000, 5_000, 1_000) }))).toBe(3);
    expect(desiredWorkers(input({ workers: busy, inProgress: 2, maxConcurrency: 2, queue: queued(9_000, 5_000, 4_500) }))).toBe(3);
    // The same queue a second later than the delay: with value 10 nothing is overdue yet.
    expect(desiredWorkers(input({ policy: queueDelay(10), workers: busy, inProgress: 1, queue: queued(9_000, 5_000) }))).toBe(1);
  });

  it("counts workers still starting against the overdue jobs (no second start for the same wait)", () => {
    expect(desiredWorkers(input({ workers: { live: 2, starting: 1 }, inProgress: 1, queue: queued(6_000) }))).toBe(2);
    expect(desiredWorkers(input({ workers: { live: 2, starting: 1 }, inProgress: 1, queue: queued(6_000, 5_000) }))).toBe(3);
  });

  it("starts the first worker of an endpoint with none at once, as the provider does", () => {
    expect(desiredWorkers(input({ queue: queued(0) }))).toBe(1);
    expect(desiredWorkers(input({ queue: queued(0, 0, 0) }))).toBe(1);
  });

  it("stays within workersMin and workersMax", () => {
    expect(desiredWorkers(input({ workersMin: 2 }))).toBe(2);
    expect(desiredWorkers(input({ workersMax: 2, workers: { live: 1, starting: 0 }, inProgress: 1, queue: queued(9_000, 8_000, 7_000) }))).toBe(2);
  });
});

describe("REQUEST_COUNT", () => {
  it("wants ceil((queued + in progress) / value) workers, at once", () => {
    expect(desiredWorkers(input({ policy: requestCount(2), queue: queued(0) }))).toBe(1);
    expect(desiredWorkers(input({ policy: requestCount(2), queue: queued(0, 0, 0), inProgress: 2 }))).toBe(3);
    expect(desiredWorkers(input({ policy: requestCount(4), queue: queued(0, 0, 0), inProgress: 1 }))).toBe(1);
    expect(desiredWorkers(input({ policy: requestCount(1), queue: queued(0, 0, 0) }))).toBe(3);
  });

  it("stays within workersMin and workersMax", () => {
    expect(desiredWorkers(input({ policy: requestCount(1), workersMax: 2, queue: queued(0, 0, 0, 0) }))).toBe(2);
    expect(desiredWorkers(input({ policy: requestCount(10), workersMin: 1 }))).toBe(1);
  });

  it("is the default rule with value maxConcurrency", () => {
    expect(defaultPolicy(4)).toEqual({ type: "REQUEST_COUNT", value: 4 });
    expect(defaultPolicy(0)).toEqual({ type: "REQUEST_COUNT", value: 1 });
  });
});

describe("low-priority jobs", () => {
  it("start no worker under either policy", () => {
    const lowOnly = { normal: 0, low: 5, waitingSince: [] };
    for (const policy of [queueDelay(1), requestCount(1)]) {
      expect(desiredWorkers(input({ policy, queue: lowOnly }))).toBe(0);
      expect(desiredWorkers(input({ policy, queue: lowOnly, workers: { live: 1, starting: 0 }, inProgress: 1 }))).toBe(1);
    }
  });
});

describe("planScaling with a policy", () => {
  const base: ScalingInput = {
    workersMin: 0,
    workersMax: 5,
    maxConcurrency: 1,
    idleTimeoutMs: 1000,
    queued: 0,
    inProgress: 0,
    revision: "r",
    workers: [],
    now: NOW,
    backoffUntil: 0,
  };
  const running = { id: "a", revision: "r", state: "running" as const, idleSince: NOW };

  it("starts what the policy wants beyond the live workers", () => {
    const waiting = queued(5_000, 3_000);
    expect(planScaling({ ...base, policy: queueDelay(4), queued: 2, waitingSince: waiting.waitingSince, inProgress: 1, workers: [running] }).start).toBe(1);
    expect(planScaling({ ...base, policy: queueDelay(6), queued: 2, waitingSince: waiting.waitingSince, inProgress: 1, workers: [running] }).start).toBe(0);
    expect(planScaling({ ...base, policy: requestCount(1), queued: 2, inProgress: 1, workers: [running] }).start).toBe(2);
    // No policy: the default rule (one worker per maxConcurrency jobs).
    expect(planScaling({ ...base, queued: 2, inProgress: 1, workers: [running] }).start).toBe(2);
  });

  it("keeps idle workers while low-priority jobs wait, and drains them after idleTimeout once nothing does", () => {
    const idle = { id: "b", revision: "r", state: "idle" as const, idleSince: NOW - 5_000 };
    expect(planScaling({ ...base, policy: queueDelay(4), lowQueued: 3, workers: [idle] })).toEqual({ start: 0, drain: [] });
    expect(planScaling({ ...base, policy: queueDelay(4), workers: [idle] })).toEqual({ start: 0, drain: ["b"] });
    expect(planScaling({ ...base, policy: requestCount(1), lowQueued: 3 })).toEqual({ start: 0, drain: [] });
  });
});
