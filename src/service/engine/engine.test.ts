// The job engine driven as the service drives it, over an in-memory store and a clock the test moves
// (engine-fixture.ts): what a caller observes of submit/take/done, leases and their lapse, priorities,
// cancellation, execution timeouts, a worker gone and a restart, and a store that refuses writes. Beside it, by
// concern: engine-retries.test.ts, engine-progress.test.ts, engine-runsync.test.ts, engine-handoff.test.ts.

import { afterEach, describe, expect, it } from "vitest";
import { JobEngine } from "./index.js";
import { StorageUnavailable, type StorageState } from "../store/faults.js";
import { closeEngines, engines, LEASE_MS, setup } from "./engine-fixture.js";

afterEach(closeEngines);

describe("the job engine over an in-memory store and a fake clock", () => {
  it("a submitted job is taken under a lease; its completion is recorded with its output, in memory and in the store", async () => {
    const { engine, store, w1 } = setup();
    const job = await engine.submit("e1", { input: { n: 1 }, sync: false });
    expect(job).toMatchObject({ status: "IN_QUEUE", attempt: 0 });
    expect(store.jobs.get(job.id)?.status).toBe("IN_QUEUE");

    const [taken] = await engine.take(w1, 1, 0);
    expect(taken).toMatchObject({ id: job.id, status: "IN_PROGRESS", attempt: 1, workerId: "w1" });
    const lease = taken!.lease!;
    expect(typeof lease).toBe("string");
    expect(store.jobs.get(job.id)).toMatchObject({ status: "IN_PROGRESS", lease });
    expect(engine.health("e1")).toMatchObject({ jobs: { inQueue: 0, inProgress: 1 }, workers: { running: 1, idle: 1 } });

    const answers = await engine.done(w1, [{ jobId: job.id, lease, status: "COMPLETED", output: { sum: 3 } }]);
    expect(answers).toEqual([{ jobId: job.id, accepted: true }]);
    const record = await engine.record("e1", job.id);
    expect(record).toMatchObject({ status: "COMPLETED", output: JSON.stringify({ sum: 3 }), lease: null });
    expect(store.jobs.get(job.id)).toMatchObject({ status: "COMPLETED", output: JSON.stringify({ sum: 3 }) });
    expect(engine.health("e1").jobs).toMatchObject({ completed: 1, inProgress: 0 });
    expect(store.counters.get("e1")).toEqual({ completed: 1, failed: 0, retried: 0 });
    // The same result sent again is told why it is refused.
    expect(await engine.done(w1, [{ jobId: job.id, lease, status: "COMPLETED", output: 1 }])).toEqual([
      { jobId: job.id, accepted: false, code: "job-final", status: "COMPLETED", reason: "job is COMPLETED" },
    ]);
  });

  it("a caller waiting for a job's end is answered from the final state just committed, without reading the store again", async () => {
    const { engine, store, w1 } = setup();
    const job = await engine.submit("e1", { input: { n: 2 }, sync: true });
    const waiting = engine.waitFinalHead("e1", job.id, 60_000);
    const [taken] = await engine.take(w1, 1, 0);
    // The take woke the waiter (the job changed); it waits again before the result comes, as over a network.
    await new Promise((resolve) => setImmediate(resolve));
    let reads = 0;
    const getJob = store.getJob.bind(store);
    store.getJob = async (id: string) => {
      reads++;
      return getJob(id);
    };
    await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: { sum: 4 } }]);
    const answer = await waiting;
    expect(answer).toEqual({ row: expect.objectContaining({ id: job.id, status: "COMPLETED", output: JSON.stringify({ sum: 4 }) }), outputBytes: null });
    // On PostgreSQL each such read is a round trip on every /runsync's path.
    expect(reads).toBe(0);
    // A later reader, with the job out of memory, reads what the store has.
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "COMPLETED" });
    expect(reads).toBe(1);
  });

  it("a heartbeat keeps the lease; a lease left alone lapses at leaseMs: the job is queued again, taken as attempt 2, and the stale result is refused", async () => {
    const { engine, clock, w1, w2 } = setup();
    const job = await engine.submit("e1", { input: 1, sync: false });
    // Taken rows are the live records: keep the lease as it was handed out.
    const [first] = await engine.take(w1, 1, 0);
    const lease1 = first!.lease!;

    clock.advance(LEASE_MS - 1);
    expect(engine.heartbeat(w1, [lease1])).toEqual([]);
    clock.advance(LEASE_MS - 1);
    engine.tick();
    expect((await engine.record("e1", job.id))!.status).toBe("IN_PROGRESS");

    clock.advance(1);
    engine.tick();
    expect((await engine.record("e1", job.id))!.status).toBe("IN_QUEUE");
    expect(engine.queuedCount("e1")).toBe(1);
    expect(engine.health("e1").workers).toMatchObject({ running: 0, idle: 2 });

    const [second] = await engine.take(w2, 1, 0);
    const lease2 = second!.lease!;
    expect(second).toMatchObject({ id: job.id, attempt: 2, workerId: "w2" });
    expect(lease2).not.toBe(lease1);
    expect(engine.heartbeat(w1, [lease1])).toEqual([lease1]);
    expect(await engine.done(w1, [{ jobId: job.id, lease: lease1, status: "COMPLETED", output: "from w1" }])).toEqual([
      { jobId: job.id, accepted: false, code: "lease-lost", reason: "lease lost" },
    ]);
    expect(await engine.done(w2, [{ jobId: job.id, lease: lease2, status: "COMPLETED", output: "from w2" }])).toEqual([{ jobId: job.id, accepted: true }]);
    expect((await engine.record("e1", job.id))!.output).toBe(JSON.stringify("from w2"));
  });

  it("normal-priority jobs are taken before low-priority ones, each kind in order of submission", async () => {
    const { engine, w1 } = setup();
    const low1 = await engine.submit("e1", { input: "low1", lowPriority: true, sync: false });
    const normal1 = await engine.submit("e1", { input: "normal1", sync: false });
    const low2 = await engine.submit("e1", { input: "low2", lowPriority: true, sync: false });
    const normal2 = await engine.submit("e1", { input: "normal2", sync: false });
    const taken = await engine.take(w1, 10, 0);
    expect(taken.map((j) => j.id)).toEqual([normal1.id, normal2.id, low1.id, low2.id]);
  });

  it("a waiting take is answered with a job submitted meanwhile, and answers empty when its wait is over", async () => {
    const { engine, clock, w1 } = setup();
    const waiting = engine.take(w1, 1, 10_000);
    const job = await engine.submit("e1", { input: 1, sync: false });
    // A real second at most: a take nobody serves would otherwise wait for the fake clock forever.
    const answer = await Promise.race([waiting, new Promise((resolve) => setTimeout(() => resolve("still waiting"), 1000))]);
    expect((answer as Array<{ id: string }>).map((j) => j.id)).toEqual([job.id]);

    const empty = engine.take(w1, 1, 10_000);
    let answered = false;
    void empty.then(() => (answered = true));
    await new Promise((r) => setImmediate(r));
    expect(answered).toBe(false);
    clock.advance(10_000);
    expect(await empty).toEqual([]);
  });

  it("cancelling a running job tells its worker through the events long poll, and the job ends CANCELLED", async () => {
    const { engine, w1 } = setup();
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [taken] = await engine.take(w1, 1, 0);
    const lease = taken!.lease!;
    const events = engine.events(w1, 60_000);
    const cancelled = await engine.cancel("e1", job.id);
    expect(cancelled).toMatchObject({ status: "CANCELLED" });
    expect(await events).toEqual({ cancel: [job.id], drain: false });
    expect(await engine.done(w1, [{ jobId: job.id, lease, status: "COMPLETED" }])).toEqual([
      { jobId: job.id, accepted: false, code: "job-final", status: "CANCELLED", reason: "job is CANCELLED" },
    ]);
    await expect(engine.cancel("e1", job.id)).rejects.toMatchObject({ kind: "invalid" });
  });

  it("a job past its execution timeout ends TIMED_OUT at the next tick and its worker is told to stop it", async () => {
    const { engine, store, clock, w1 } = setup({ endpoint: { executionTimeoutMs: 5_000 } });
    const job = await engine.submit("e1", { input: 1, sync: false });
    await engine.take(w1, 1, 0);
    clock.advance(5_000);
    engine.tick();
    expect((await engine.record("e1", job.id))!.status).toBe("IN_PROGRESS");
    clock.advance(1);
    engine.tick();
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "TIMED_OUT", errorType: "TimeoutError" });
    await engine.write([]);
    expect(store.jobs.get(job.id)).toMatchObject({ status: "TIMED_OUT" });
    expect(await engine.events(w1, 0)).toEqual({ cancel: [job.id], drain: false });
  });

  it("a job's own execution timeout (policy.executionTimeout) wins over its endpoint's", async () => {
    const { engine, clock, w1 } = setup({ endpoint: { executionTimeoutMs: 600_000 } });
    const job = await engine.submit("e1", { input: 1, executionTimeoutMs: 2_000, sync: false });
    const [taken] = await engine.take(w1, 1, 0);
    expect(taken).toMatchObject({ executionTimeoutMs: 2_000 });
    clock.advance(2_001);
    engine.tick();
    expect(await engine.record("e1", job.id)).toMatchObject({
      status: "TIMED_OUT",
      errorType: "TimeoutError",
      error: "The job ran longer than its execution timeout of 2000 ms",
    });
  });

  it("a worker that is gone hands its jobs back at once; a restarted engine loads queued and running jobs from the store", async () => {
    const { engine, store, clock, w1 } = setup();
    const a = await engine.submit("e1", { input: "a", sync: false });
    const b = await engine.submit("e1", { input: "b", sync: false });
    await engine.take(w1, 1, 0);
    engine.workerGone("w1");
    expect(engine.health("e1").jobs).toMatchObject({ inQueue: 2, inProgress: 0 });
    const w3 = engine.register("w3", "e1", 1);
    const [again] = await engine.take(w3, 1, 0);
    const lease = again!.lease;
    expect(again).toMatchObject({ id: a.id, attempt: 2 });
    await engine.close();

    const restarted = new JobEngine(store, { leaseMs: LEASE_MS, heartbeatMs: 10_000 }, {}, clock);
    engines.push(restarted);
    await restarted.load([{ id: "e1", completed: 0, failed: 0, retried: 0 }]);
    expect(restarted.health("e1").jobs).toMatchObject({ inQueue: 1, inProgress: 1 });
    const w4 = restarted.register("w4", "e1", 1);
    expect((await restarted.take(w4, 5, 0)).map((j) => j.id)).toEqual([b.id]);
    // The running job keeps its lease for one more lease period after the restart.
    clock.advance(LEASE_MS - 1);
    restarted.heartbeat(w4, []);
    restarted.tick();
    expect(await restarted.record("e1", a.id)).toMatchObject({ status: "IN_PROGRESS", lease });
    clock.advance(1);
    restarted.tick();
    expect(await restarted.record("e1", a.id)).toMatchObject({ status: "IN_QUEUE", lease: null });
  });

  it("a store that refuses writes fails the submission with 503 and says so in the storage state, until writes go through again for a while", async () => {
    const states: StorageState[] = [];
    const { engine, store, clock, w1 } = setup({ hooks: { onStorage: (s) => states.push(s) } });
    store.refuse = "SQLITE_FULL";
    await expect(engine.submit("e1", { input: 1, sync: false })).rejects.toBeInstanceOf(StorageUnavailable);
    expect(engine.storageState()).toMatchObject({ ok: false, cause: "full", since: clock.now() });
    expect(engine.queuedCount("e1")).toBe(0);
    expect(store.jobs.size).toBe(0);

    store.refuse = undefined;
    const kept = await engine.submit("e1", { input: 2, sync: false });
    expect((await engine.take(w1, 5, 0)).map((j) => j.id)).toEqual([kept.id]);
    clock.advance(1_999);
    engine.tick();
    expect(engine.storageState().ok).toBe(false);
    clock.advance(1);
    engine.tick();
    expect(engine.storageState()).toEqual({ ok: true });
    expect(states.map((s) => s.ok)).toEqual([false, true]);
  });
});
