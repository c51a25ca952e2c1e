import { afterEach, describe, expect, it, vi } from "vitest";
import { HttpProblem } from "./problems.js";
import { DEFAULT_CLIENT_LIMITS, FollowerGate, SharedOutputs } from "./slow-clients.js";

afterEach(() => vi.useRealTimers());

describe("FollowerGate", () => {
  const problem = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return err as HttpProblem;
    }
    throw new Error("admitted");
  };

  it("refuses a user's follower beyond its cap with 429 and any beyond the total with 503, both with Retry-After", () => {
    const gate = new FollowerGate({ ...DEFAULT_CLIENT_LIMITS, followersPerUser: 2, followersTotal: 3 });
    const a1 = gate.admit("a");
    gate.admit("a");
    expect(problem(() => gate.admit("a"))).toMatchObject({ status: 429, headers: { "retry-after": "5" } });
    gate.admit("b");
    expect(problem(() => gate.admit("c"))).toMatchObject({ status: 503, headers: { "retry-after": "5" } });
    a1();
    a1(); // released once only
    gate.admit("c");
    expect(problem(() => gate.admit("a"))).toMatchObject({ status: 503 });
  });
});

describe("SharedOutputs", () => {
  it("reads an output once for concurrent readers and lets it go shortly after the last one", async () => {
    vi.useFakeTimers();
    const outputs = new SharedOutputs(DEFAULT_CLIENT_LIMITS);
    let loads = 0;
    const load = async () => {
      loads++;
      return Buffer.from("x".repeat(100));
    };
    const [a, b] = await Promise.all([outputs.acquire("job:1", 100, load), outputs.acquire("job:1", 100, load)]);
    expect(loads).toBe(1);
    expect(a.buffer).toBe(b.buffer);
    a.release();
    b.release();
    expect(outputs.heldBytes).toBe(100);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(outputs.heldBytes).toBe(0);
    await outputs.acquire("job:1", 100, load);
    expect(loads).toBe(2);
  });

  it("answers 503 when holding another output would pass the cap", async () => {
    const outputs = new SharedOutputs({ ...DEFAULT_CLIENT_LIMITS, pinnedOutputBytes: 150 });
    const load = async () => Buffer.alloc(100);
    await outputs.acquire("job:1", 100, load);
    await expect(outputs.acquire("job:2", 100, load)).rejects.toMatchObject({ status: 503 });
    // The same output is shared, not counted twice.
    await expect(outputs.acquire("job:1", 100, load)).resolves.toBeDefined();
  });
});
