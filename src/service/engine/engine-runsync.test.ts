// The job engine over an in-memory store and a fake clock (engine-fixture.ts): a /runsync job, whose write to the
// store waits for its end when the caller's wait allows.

import { afterEach, describe, expect, it } from "vitest";
import { StorageUnavailable } from "../store/faults.js";
import type { StoreOp } from "../store/types.js";
import { closeEngines, setup, type MemoryJobStore } from "./engine-fixture.js";

afterEach(closeEngines);

describe("a /runsync job (its caller learns its id only from the answer)", () => {
  /** Every state of `id` the store was given, in order. */
  function statesStored(store: MemoryJobStore, id: () => string | undefined): string[] {
    const seen: string[] = [];
    const apply = store.apply.bind(store);
    store.apply = async (ops: StoreOp[]) => {
      await apply(ops);
      for (const o of ops) {
        if (o.op === "insertJob" && o.job.id === id()) seen.push(`insert ${o.job.status}`);
        if (o.op === "updateJob" && o.id === id()) seen.push(`update ${o.set.status ?? "-"}`);
      }
    };
    return seen;
  }

  it("reaches the store once, whole, when it ends within its wait: one commit for the job instead of one per change", async () => {
    const { engine, store, w1 } = setup();
    let id: string | undefined;
    const seen = statesStored(store, () => id);
    const job = await engine.submit("e1", { input: { n: 5 }, sync: true, deferWrite: true });
    id = job.id;
    const [taken] = await engine.take(w1, 1, 0);
    expect(taken).toMatchObject({ id: job.id, status: "IN_PROGRESS" });
    expect(store.jobs.has(job.id)).toBe(false);
    // The service's own reads see it all along.
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "IN_PROGRESS", workerId: "w1" });

    await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: { sum: 6 } }]);
    await engine.persist(job.id);
    expect(seen).toEqual(["insert COMPLETED"]);
    expect(store.jobs.get(job.id)).toMatchObject({ status: "COMPLETED", output: JSON.stringify({ sum: 6 }), workerId: "w1", attempt: 1 });
    expect(store.counters.get("e1")).toEqual({ completed: 1, failed: 0, retried: 0 });
  });

  it("is in the store before a caller whose wait ended first learns its id, and its end is an update from there", async () => {
    const { engine, store, w1 } = setup();
    let id: string | undefined;
    const seen = statesStored(store, () => id);
    const job = await engine.submit("e1", { input: 1, sync: true, deferWrite: true });
    id = job.id;
    const [taken] = await engine.take(w1, 1, 0);
    await engine.persist(job.id);
    expect(store.jobs.get(job.id)).toMatchObject({ status: "IN_PROGRESS", lease: taken!.lease });
    await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: 2 }]);
    expect(seen).toEqual(["insert IN_PROGRESS", "update COMPLETED"]);
    expect(store.jobs.get(job.id)).toMatchObject({ status: "COMPLETED", output: "2" });
  });

  it("goes to the store before its first stream chunk, which readers find there by its id", async () => {
    const { engine, store, w1 } = setup();
    const job = await engine.submit("e1", { input: 1, sync: true, deferWrite: true });
    const [taken] = await engine.take(w1, 1, 0);
    expect(await engine.appendStream(w1, job.id, taken!.lease, ["a"])).toBe(true);
    expect(store.jobs.get(job.id)).toMatchObject({ status: "IN_PROGRESS" });
    expect(await engine.readStream("e1", job.id)).toEqual({ status: "IN_PROGRESS", chunks: [JSON.stringify({ output: "a" })] });
  });

  it("whose end the store refused runs on unwritten: the worker's resend is accepted and writes it whole", async () => {
    const { engine, store, w1 } = setup();
    const job = await engine.submit("e1", { input: 1, sync: true, deferWrite: true });
    const [taken] = await engine.take(w1, 1, 0);
    store.refuse = "SQLITE_FULL";
    const result = { jobId: job.id, lease: taken!.lease!, status: "COMPLETED" as const, output: 3 };
    await expect(engine.done(w1, [result])).rejects.toBeInstanceOf(StorageUnavailable);
    expect(store.jobs.has(job.id)).toBe(false);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "IN_PROGRESS" });
    store.refuse = undefined;
    expect(await engine.done(w1, [result])).toEqual([{ jobId: job.id, accepted: true }]);
    await engine.persist(job.id);
    expect(store.jobs.get(job.id)).toMatchObject({ status: "COMPLETED", output: "3" });
  });

  it("is written at once, and refused at once, while the store refuses writes", async () => {
    const { engine, store } = setup();
    store.refuse = "SQLITE_FULL";
    await expect(engine.submit("e1", { input: 1, sync: false })).rejects.toBeInstanceOf(StorageUnavailable);
    await expect(engine.submit("e1", { input: 2, sync: true, deferWrite: true })).rejects.toBeInstanceOf(StorageUnavailable);
    expect(engine.queuedCount("e1")).toBe(0);
    store.refuse = undefined;
  });
});
