// The job engine over an in-memory store and a fake clock (engine-fixture.ts): a failed job's retries and their
// backoff, a job's ttl in the queue and while it runs, and a final job's retention.

import { afterEach, describe, expect, it } from "vitest";
import { JobEngine } from "./index.js";
import type { JobRow } from "../store/types.js";
import { closeEngines, engines, LEASE_MS, setup } from "./engine-fixture.js";

afterEach(closeEngines);

describe("the job engine's failures, retries and ttl", () => {
  it("a failed job with retries left is queued again; out of retries it ends FAILED, counted once each way", async () => {
    const { engine, store, clock, w1 } = setup({ endpoint: { retries: 1 } });
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [a] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: job.id, lease: a!.lease!, status: "FAILED", error: { message: "boom" } }]);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "IN_QUEUE", retried: 1, error: null });
    clock.advance(1_000); // the first retry's backoff is at most the default base, 1 s
    const [b] = await engine.take(w1, 1, 0);
    expect(b).toMatchObject({ id: job.id, attempt: 2 });
    await engine.done(w1, [{ jobId: job.id, lease: b!.lease!, status: "FAILED", error: { message: "boom again", type: "Oops" } }]);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "FAILED", error: "boom again", errorType: "Oops" });
    expect(engine.health("e1").jobs).toMatchObject({ failed: 1, retried: 1 });
    expect(store.counters.get("e1")).toEqual({ completed: 0, failed: 1, retried: 1 });
  });

  it("a failed job waits out its backoff before it can be taken again, also after a restart; the wait is kept in the store", async () => {
    const backoff = { baseMs: 1_000, factor: 2, maxMs: 3_000 };
    const { engine, store, clock, w1 } = setup({ endpoint: { retries: 3, backoff } });
    const job = await engine.submit("e1", { input: 1, sync: false });
    const ceilings: number[] = [];
    for (let retry = 1; retry <= 3; retry++) {
      const [taken] = await engine.take(w1, 1, 0);
      expect(taken).toMatchObject({ id: job.id, attempt: retry });
      const failedAt = clock.now();
      await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "FAILED", error: { message: "flaky" } }]);
      const notBefore = (await engine.record("e1", job.id))!.notBefore!;
      // Full jitter: anywhere from now to the exponential ceiling, capped at maxMs.
      ceilings.push(Math.min(3_000, 1_000 * 2 ** (retry - 1)));
      expect(notBefore - failedAt).toBeGreaterThanOrEqual(0);
      expect(notBefore - failedAt).toBeLessThanOrEqual(ceilings[retry - 1]!);
      await engine.write([]);
      expect(store.jobs.get(job.id)).toMatchObject({ status: "IN_QUEUE", notBefore });
      // The job's logs say why it waits and for how long.
      expect(store.logLines.at(-1)).toMatchObject({
        jobId: job.id,
        workerId: "svc",
        stream: "log",
        text: `attempt ${retry} failed; retry ${retry} of 3 in ${notBefore - failedAt} ms`,
      });
      if (notBefore > clock.now()) {
        clock.advance(notBefore - clock.now() - 1);
        expect(await engine.take(w1, 1, 0)).toEqual([]);
        // Waiting out a backoff is not waiting for a worker: the scaler is not told of it.
        expect(engine.waiting("e1", 10)).toEqual({ normal: 0, low: 0, waitingSince: [] });
        expect(engine.health("e1").jobs.inQueue).toBe(1);
      }
      clock.advance(1);
    }
    expect(ceilings).toEqual([1_000, 2_000, 3_000]);
    const [last] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: job.id, lease: last!.lease!, status: "FAILED", error: { message: "flaky" } }]);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "FAILED", retried: 3, attempt: 4 });

    // Across a restart: a job still backing off is loaded as such and taken only once its backoff is over.
    const other = await engine.submit("e1", { input: 2, sync: false });
    const [o] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: other.id, lease: o!.lease!, status: "FAILED", error: { message: "flaky" } }]);
    const notBefore = (await engine.record("e1", other.id))!.notBefore!;
    await engine.close();
    const restarted = new JobEngine(store, { leaseMs: LEASE_MS, heartbeatMs: 10_000 }, {}, clock);
    engines.push(restarted);
    restarted.endpoints.set("e1", { id: "e1", type: "queue", retries: 3, backoff, executionTimeoutMs: 600_000, maxConcurrency: 2, functions: [] });
    await restarted.load([{ id: "e1", completed: 0, failed: 1, retried: 3 }]);
    const w9 = restarted.register("w9", "e1", 1);
    if (notBefore > clock.now()) expect(await restarted.take(w9, 1, 0)).toEqual([]);
    clock.advance(Math.max(0, notBefore - clock.now()));
    expect((await restarted.take(w9, 1, 0)).map((j) => j.id)).toEqual([other.id]);
  });

  it("a failure the handler marks not retryable ends the job FAILED at once, whatever retries are left", async () => {
    const { engine, w1 } = setup({ endpoint: { retries: 5 } });
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [a] = await engine.take(w1, 1, 0);
    await engine.done(w1, [
      { jobId: job.id, lease: a!.lease!, status: "FAILED", error: { message: "bad input", type: "NonRetryableError", retryable: false } },
    ]);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "FAILED", retried: 0, attempt: 1, error: "bad input", errorType: "NonRetryableError" });
    expect(engine.health("e1").jobs).toMatchObject({ failed: 1, retried: 0, inQueue: 0 });
  });

  it("a job whose ttl runs out in the queue is never taken and ends TIMED_OUT saying so; a running one is stopped", async () => {
    const finals: JobRow[] = [];
    const { engine, store, clock, w1 } = setup({ hooks: { onFinal: (row) => finals.push(row) } });
    const queued = await engine.submit("e1", { input: "late", lifetimeMs: 5_000, sync: false });
    clock.advance(4_999);
    engine.tick();
    expect((await engine.record("e1", queued.id))!.status).toBe("IN_QUEUE");
    clock.advance(1);
    // Taken at the very moment its ttl ran out, before any tick noticed: never handed out.
    expect(await engine.take(w1, 1, 0)).toEqual([]);
    expect(await engine.record("e1", queued.id)).toMatchObject({
      status: "TIMED_OUT",
      startedAt: null,
      attempt: 0,
      errorType: "TtlExpired",
      error: expect.stringMatching(/ttl of 5000 ms .* ran out while it waited in the queue; it never started/),
    });
    expect(engine.health("e1").jobs).toMatchObject({ inQueue: 0, inProgress: 0 });

    const running = await engine.submit("e1", { input: "slow", lifetimeMs: 5_000, sync: false });
    await engine.take(w1, 1, 0);
    clock.advance(5_000);
    engine.tick();
    expect(await engine.record("e1", running.id)).toMatchObject({
      status: "TIMED_OUT",
      errorType: "TtlExpired",
      error: expect.stringMatching(/ran out while it ran; it was stopped/),
    });
    expect(await engine.events(w1, 0)).toEqual({ cancel: [running.id], drain: false });
    await engine.write([]);
    expect(store.jobs.get(running.id)).toMatchObject({ status: "TIMED_OUT" });
    // Kept for the interface's retention after it ended (30 min for /run), then gone.
    expect(store.jobs.get(running.id)!.expiresAt).toBe(clock.now() + 30 * 60_000);
    expect(finals.map((r) => r.id)).toEqual([queued.id, running.id]);
  });

  it("a job without a ttl lives the provider's default, 24 hours; /retry gives a job its whole ttl again", async () => {
    const { engine, clock } = setup();
    const job = await engine.submit("e1", { input: 1, sync: false });
    expect((await engine.record("e1", job.id))!.deadlineAt).toBe(clock.now() + 24 * 3600_000);
    clock.advance(24 * 3600_000);
    engine.tick();
    expect((await engine.record("e1", job.id))!.status).toBe("TIMED_OUT");
    clock.advance(1_000);
    await engine.retry("e1", job.id);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "IN_QUEUE", deadlineAt: clock.now() + 24 * 3600_000 });
  });

  it("a final job is gone from record() once its ttl passed, and sweep() deletes it from the store", async () => {
    const { engine, store, clock, w1 } = setup();
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [taken] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: 1 }]);
    await engine.setTtl("e1", job.id, 1_000);

    clock.advance(999);
    expect(await engine.sweep()).toBe(0);
    expect((await engine.record("e1", job.id))?.status).toBe("COMPLETED");
    clock.advance(1);
    expect(await engine.record("e1", job.id)).toBeUndefined();
    expect(store.jobs.has(job.id)).toBe(true);
    expect(await engine.sweep()).toBe(1);
    expect(store.jobs.has(job.id)).toBe(false);
  });
});
