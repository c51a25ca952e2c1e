// The job engine over a real SQLite store that a test double makes refuse writes the way a full disk does
// (SQLITE_FULL): what the engine believes never runs ahead of what was committed.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { JobEngine } from "./index.js";
import { StorageUnavailable } from "../store/faults.js";
import { openSqliteStore } from "../store/sqlite.js";
import { SQLITE_MIGRATIONS } from "../schema/sqlite.js";
import type { Store, StoreOp } from "../store/types.js";

/** Test double: the real store, except that `apply` fails with SQLite's disk-full error while `full` is set. */
function refusingStore(store: Store): Store & { full: boolean } {
  const wrapped = Object.create(store) as Store & { full: boolean };
  wrapped.full = false;
  wrapped.apply = async (ops: StoreOp[]) => {
    if (wrapped.full) throw Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
    return store.apply(ops);
  };
  return wrapped;
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), "svc-engine-storage-"));
  dirs.push(dir);
  const base = openSqliteStore(join(dir, "svc.sqlite"), SQLITE_MIGRATIONS);
  const store = refusingStore(base);
  const states: boolean[] = [];
  const engine = new JobEngine(store, { leaseMs: 30_000, heartbeatMs: 5_000 }, { onStorage: (s) => states.push(s.ok) });
  engine.endpoints.set("e1", { id: "e1", type: "queue", retries: 0, executionTimeoutMs: 60_000, maxConcurrency: 1, functions: [] });
  await engine.load([{ id: "e1", completed: 0, failed: 0, retried: 0 }]);
  const worker = engine.register("w1", "e1", 1);
  return { engine, store, base, worker, states };
}

describe("the engine when the store refuses writes", () => {
  it("drops worker log lines it cannot keep without failing, and counts them in the storage state", async () => {
    const { engine, store } = await setup();
    const line = { ts: 1, endpointId: "e1", workerId: "w1", jobId: null, stream: "stdout", text: "hello" };
    store.full = true;
    await expect(engine.appendLogs([line, { ...line, text: "again" }])).resolves.toBeUndefined();
    expect(engine.storageState()).toMatchObject({ ok: false, droppedLogLines: 2 });
    store.full = false;
    await engine.appendLogs([line]);
    expect((await engine.queryLogs({ endpointId: "e1", limit: 10 })).map((l) => l.text)).toEqual(["hello"]);
    expect(engine.storageState().droppedLogLines).toBe(2);
    await engine.close();
  });

  it("a refused submission leaves no trace: not queued, not counted, never taken", async () => {
    const { engine, store, worker, states } = await setup();
    store.full = true;
    await expect(engine.submit("e1", { input: { a: 1 }, sync: false })).rejects.toBeInstanceOf(StorageUnavailable);
    expect(engine.queuedCount("e1")).toBe(0);
    expect(engine.health("e1").jobs).toMatchObject({ inQueue: 0, inProgress: 0 });
    expect(engine.storageState()).toMatchObject({ ok: false, cause: "full" });
    store.full = false;
    expect(await engine.take(worker, 5, 0)).toEqual([]);
    const kept = await engine.submit("e1", { input: { b: 2 }, sync: false });
    const taken = await engine.take(worker, 5, 0);
    expect(taken.map((j) => j.id)).toEqual([kept.id]);
    expect(states).toEqual([false]);
    await engine.close();
  });

  it("a refused completion keeps the job running under its lease, and the worker's resend is recorded once", async () => {
    const { engine, store, base, worker } = await setup();
    const job = await engine.submit("e1", { input: {}, sync: false });
    const [taken] = await engine.take(worker, 1, 0);
    store.full = true;
    await expect(engine.done(worker, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: { n: 1 } }])).rejects.toBeInstanceOf(
      StorageUnavailable,
    );
    expect(engine.health("e1").jobs).toMatchObject({ completed: 0, inProgress: 1 });
    expect((await engine.record("e1", job.id))!.status).toBe("IN_PROGRESS");
    store.full = false;
    expect(await engine.done(worker, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: { n: 1 } }])).toEqual([
      { jobId: job.id, accepted: true },
    ]);
    expect(engine.health("e1").jobs).toMatchObject({ completed: 1, inProgress: 0 });
    expect((await base.getJob(job.id))!.status).toBe("COMPLETED");
    await engine.close();
  });

  it("a refused take puts its jobs back in the queue as the store has them", async () => {
    const { engine, store, worker } = await setup();
    const job = await engine.submit("e1", { input: {}, sync: false });
    store.full = true;
    await expect(engine.take(worker, 1, 0)).rejects.toBeInstanceOf(StorageUnavailable);
    expect(engine.health("e1").jobs).toMatchObject({ inQueue: 1, inProgress: 0 });
    store.full = false;
    const [again] = await engine.take(worker, 1, 0);
    expect(again).toMatchObject({ id: job.id, attempt: 1 });
    await engine.close();
  });
});
