import { describe, expect, it } from "vitest";
import { planScaling, type ScalingInput } from "./scaling-plan.js";

const base: ScalingInput = {
  workersMin: 0,
  workersMax: 3,
  maxConcurrency: 1,
  idleTimeoutMs: 1000,
  queued: 0,
  inProgress: 0,
  revision: "r2",
  workers: [],
  now: 10_000,
  backoffUntil: 0,
};
const worker = (id: string, state: "initializing" | "idle" | "running", idleSince = 10_000, revision = "r2") => ({ id, state, idleSince, revision });

describe("planScaling", () => {
  it("starts workers from zero for waiting jobs, up to workersMax and by concurrency", () => {
    expect(planScaling({ ...base, queued: 1 })).toEqual({ start: 1, drain: [] });
    expect(planScaling({ ...base, queued: 10 })).toEqual({ start: 3, drain: [] });
    expect(planScaling({ ...base, queued: 10, maxConcurrency: 4 })).toEqual({ start: 3, drain: [] });
    expect(planScaling({ ...base, queued: 3, maxConcurrency: 4 })).toEqual({ start: 1, drain: [] });
    expect(planScaling({ ...base, queued: 2, workers: [worker("a", "initializing")] })).toEqual({ start: 1, drain: [] });
  });

  it("keeps workersMin running with nothing to do", () => {
    expect(planScaling({ ...base, workersMin: 2 })).toEqual({ start: 2, drain: [] });
    expect(planScaling({ ...base, workersMin: 1, workers: [worker("a", "idle", 0)] })).toEqual({ start: 0, drain: [] });
  });

  it("drains idle workers above the minimum after idleTimeout, oldest idle first", () => {
    const workers = [worker("a", "idle", 9_500), worker("b", "idle", 8_000), worker("c", "running")];
    expect(planScaling({ ...base, inProgress: 1, workers })).toEqual({ start: 0, drain: ["b"] });
    expect(planScaling({ ...base, inProgress: 1, workers, now: 20_000 })).toEqual({ start: 0, drain: ["b", "a"] });
    expect(planScaling({ ...base, queued: 1, inProgress: 1, workers, now: 20_000 }).drain).toEqual([]);
  });

  it("waits out the crash backoff before starting more", () => {
    expect(planScaling({ ...base, queued: 1, backoffUntil: 10_500 })).toEqual({ start: 0, drain: [] });
    expect(planScaling({ ...base, queued: 1, backoffUntil: 9_000 })).toEqual({ start: 1, drain: [] });
  });

  it("replaces workers of an old revision: idle ones at once, busy ones once new workers exist", () => {
    const old = [worker("a", "idle", 10_000, "r1"), worker("b", "running", 10_000, "r1")];
    expect(planScaling({ ...base, inProgress: 1, queued: 1, workers: old })).toEqual({ start: 2, drain: ["a", "b"] });
    expect(planScaling({ ...base, workers: [worker("a", "idle", 10_000, "r1")] })).toEqual({ start: 0, drain: ["a"] });
  });
});
