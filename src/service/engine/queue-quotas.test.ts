// The queue quotas and the inputs kept in the store, in the engine over a real SQLite store: what is counted
// against whom, what a refusal leaves behind (nothing), what leaving the queue gives back, and that a large queued
// input is the store's alone until a worker takes it, whole.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Refusal } from "../../errors.js";
import { openSqliteStore } from "../store/sqlite.js";
import { SQLITE_MIGRATIONS } from "../schema/sqlite.js";
import { INPUT_IN_STORE, JobEngine } from "./index.js";
import type { QueueQuotas } from "./quotas.js";
import { INPUT_HELD_MAX } from "./types.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function setup(queueQuotas: QueueQuotas, heldInputsMax?: number) {
  const dir = mkdtempSync(join(tmpdir(), "svc-engine-quotas-"));
  dirs.push(dir);
  const store = openSqliteStore(join(dir, "svc.sqlite"), SQLITE_MIGRATIONS);
  const refused: string[] = [];
  const engine = new JobEngine(
    store,
    { leaseMs: 30_000, heartbeatMs: 5_000, queueQuotas, heldInputsMax },
    { onQuotaRefused: (id, limit) => refused.push(`${id}:${limit}`) },
  );
  const owners = { a1: "alice", a2: "alice", b1: "bob" };
  for (const [id, userId] of Object.entries(owners))
    engine.endpoints.set(id, { id, userId, type: "queue", retries: 0, executionTimeoutMs: 60_000, maxConcurrency: 1, functions: [] });
  await engine.load(Object.keys(owners).map((id) => ({ id, completed: 0, failed: 0, retried: 0 })));
  return { engine, store, refused };
}

const run = (input: unknown) => ({ input, sync: false });

async function refusal(p: Promise<unknown>): Promise<Refusal> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(Refusal);
  return err as Refusal;
}

describe("queue quotas in the engine", () => {
  it("refuses a job past its endpoint's or its owner's job quota, makes nothing of it, and takes other users' jobs", async () => {
    const { engine, store, refused } = await setup({ user: { jobs: 3, bytes: 1e9 }, endpoint: { jobs: 2, bytes: 1e9 } });
    await engine.submit("a1", run({ n: 1 }));
    await engine.submit("a1", run({ n: 2 }));
    const overEndpoint = await refusal(engine.submit("a1", run({ n: 3 })));
    expect(overEndpoint.kind).toBe("over-quota");
    expect(overEndpoint.message).toMatch(/endpoint_jobs/);
    expect(overEndpoint.retryAfterS).toBeGreaterThan(0);
    await engine.submit("a2", run({ n: 4 }));
    expect((await refusal(engine.submit("a2", run({ n: 5 })))).message).toMatch(/user_jobs/);
    // Bob is another user: Alice's queue is none of his.
    await engine.submit("b1", run({ n: 6 }));
    await engine.submit("b1", run({ n: 7 }));
    expect(refused).toEqual(["a1:endpoint_jobs", "a2:user_jobs"]);
    expect(engine.queueUsage("alice").jobs).toBe(3);
    expect(engine.health("a1").jobs.inQueue).toBe(2);
    await engine.settled();
    expect((await store.activeJobs()).length).toBe(5);
  });

  it("gives the quota back as jobs leave the queue: taken, cancelled, purged", async () => {
    const { engine } = await setup({ user: { jobs: 3, bytes: 1e9 }, endpoint: { jobs: 3, bytes: 1e9 } });
    const jobs = [];
    for (let i = 0; i < 3; i++) jobs.push(await engine.submit("a1", run({ i })));
    await refusal(engine.submit("a2", run({})));
    await engine.cancel("a1", jobs[0]!.id);
    await engine.submit("a2", run({}));
    const worker = engine.register("w1", "a1", 1);
    expect(await engine.take(worker, 1, 0)).toHaveLength(1);
    expect(engine.queueUsage("alice").jobs).toBe(2);
    await engine.submit("a2", run({}));
    expect(await engine.purge("a2")).toBe(2);
    expect(engine.queueUsage("alice")).toEqual({ jobs: 1, bytes: Buffer.byteLength(JSON.stringify({ i: 2 })) });
  });

  it("counts a retry by hand as a new job: refused while the queue is full, accepted once it is not", async () => {
    const { engine } = await setup({ user: { jobs: 10, bytes: 1e9 }, endpoint: { jobs: 1, bytes: 1e9 } });
    const failed = await engine.submit("a1", run({ n: 1 }));
    const worker = engine.register("w1", "a1", 1);
    const [taken] = await engine.take(worker, 1, 0);
    await engine.done(worker, [{ jobId: taken!.id, lease: taken!.lease!, status: "FAILED", error: { message: "no", retryable: false } }]);
    expect((await engine.record("a1", failed.id))?.status).toBe("FAILED");
    await engine.submit("a1", run({ n: 2 }));
    expect((await refusal(engine.retry("a1", failed.id))).message).toMatch(/endpoint_jobs/);
    expect((await engine.record("a1", failed.id))?.status).toBe("FAILED");
    await engine.purge("a1");
    expect((await engine.retry("a1", failed.id))?.status).toBe("IN_QUEUE");
  });

  it("counts the bytes of queued inputs against the endpoint and the user", async () => {
    const { engine } = await setup({ user: { jobs: 100, bytes: 3000 }, endpoint: { jobs: 100, bytes: 2000 } });
    const kb = { text: "x".repeat(980) };
    await engine.submit("a1", run(kb));
    await engine.submit("a1", run(kb));
    expect((await refusal(engine.submit("a1", run(kb)))).message).toMatch(/endpoint_bytes/);
    await engine.submit("a2", run(kb));
    expect((await refusal(engine.submit("a2", run(kb)))).message).toMatch(/user_bytes/);
    await engine.submit("b1", run(kb));
    expect(engine.queueUsage("alice").bytes).toBe(3 * Buffer.byteLength(JSON.stringify(kb)));
  });
});

describe("large queued inputs", () => {
  it("are kept in the store only while queued and come back whole with the take; small ones stay in memory", async () => {
    const { engine } = await setup({ user: { jobs: 100, bytes: 1e9 }, endpoint: { jobs: 100, bytes: 1e9 } });
    const large = { text: "é".repeat(INPUT_HELD_MAX) };
    const big = await engine.submit("a1", run(large));
    const small = await engine.submit("a1", run({ n: 1 }));
    expect((await engine.recordHead("a1", big.id))?.row.input).toBe(INPUT_IN_STORE);
    expect((await engine.recordHead("a1", small.id))?.row.input).toBe('{"n":1}');
    // The whole record reads it back.
    expect(JSON.parse((await engine.record("a1", big.id))!.input)).toEqual(large);
    expect(engine.queueUsage("alice").bytes).toBe(Buffer.byteLength(JSON.stringify(large)) + 7);
    const worker = engine.register("w1", "a1", 2);
    const taken = await engine.take(worker, 2, 0);
    expect(taken.map((j) => JSON.parse(j.input))).toEqual([large, { n: 1 }]);
    // The running job still holds no copy of it.
    expect((await engine.recordHead("a1", big.id))?.row.input).toBe(INPUT_IN_STORE);
  });

  it("past the budget of inputs held in memory, small queued inputs are kept in the store only too, and the budget comes back", async () => {
    const { engine } = await setup({ user: { jobs: 100, bytes: 1e9 }, endpoint: { jobs: 100, bytes: 1e9 } }, 25);
    const first = await engine.submit("a1", run({ n: "0123456789" }));
    const second = await engine.submit("a1", run({ n: "0123456789" }));
    expect((await engine.recordHead("a1", first.id))?.row.input).toBe('{"n":"0123456789"}');
    expect((await engine.recordHead("a1", second.id))?.row.input).toBe(INPUT_IN_STORE);
    const worker = engine.register("w1", "a1", 2);
    expect((await engine.take(worker, 2, 0)).map((j) => JSON.parse(j.input))).toEqual([{ n: "0123456789" }, { n: "0123456789" }]);
    const third = await engine.submit("a1", run({ n: 3 }));
    expect((await engine.recordHead("a1", third.id))?.row.input).toBe('{"n":3}');
  });

  it("a large /runsync input is written at once rather than held until the job ends", async () => {
    const { engine, store } = await setup({ user: { jobs: 100, bytes: 1e9 }, endpoint: { jobs: 100, bytes: 1e9 } });
    const big = await engine.submit("a1", { input: { text: "x".repeat(INPUT_HELD_MAX) }, sync: true, deferWrite: true });
    const small = await engine.submit("a1", { input: { n: 1 }, sync: true, deferWrite: true });
    expect(engine.unwrittenJobs("a1").map((r) => r.id)).toEqual([small.id]);
    expect((await store.getJob(big.id))?.status).toBe("IN_QUEUE");
    expect((await engine.recordHead("a1", big.id))?.row.input).toBe(INPUT_IN_STORE);
  });
});
