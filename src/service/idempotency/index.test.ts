import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openSqliteStore } from "../store/sqlite.js";
import { SQLITE_MIGRATIONS } from "../schema/sqlite.js";
import type { JobRow, Store } from "../store/types.js";
import { IdempotentSubmits, invalidIdempotencyKey, requestHash, SWEEP_AFTER_MS } from "./index.js";
import { openSqliteIdempotencyStore, type IdempotencyStore } from "./store.js";

const row = (id: string): JobRow => ({
  id,
  endpointId: "e1",
  status: "IN_QUEUE",
  input: "{}",
  function: null,
  webhook: null,
  sync: false,
  lowPriority: false,
  createdAt: 1,
  startedAt: null,
  completedAt: null,
  output: null,
  error: null,
  errorType: null,
  errorStack: null,
  attempt: 0,
  retried: 0,
  executionTimeoutMs: null,
  ttlMs: 60_000,
  expiresAt: null,
  lease: null,
  workerId: null,
  streamCursor: 0,
});

describe("IdempotentSubmits", () => {
  let dir: string;
  let store: Store;
  let keys: IdempotencyStore;
  let now: number;
  let jobs: Map<string, JobRow>;
  let submits: IdempotentSubmits;
  const request = (key: string, body: unknown = { input: 1 }) => ({ userId: "u1", endpointId: "e1", key, requestHash: requestHash(body) });
  const create = async (id: string) => {
    const job = row(id);
    jobs.set(id, job);
    await store.apply([{ op: "insertJob", job }]);
    return job;
  };
  const find = async (id: string) => jobs.get(id);

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "svc-idem-unit-"));
    store = openSqliteStore(join(dir, "svc.sqlite"), SQLITE_MIGRATIONS);
    keys = openSqliteIdempotencyStore(join(dir, "svc.sqlite"));
    now = 1_000_000;
    jobs = new Map();
    // The fake clock moves only when the code waits.
    submits = new IdempotentSubmits({ store: keys, now: () => now, sleep: async (ms) => void (now += ms), settleMs: 10_000 });
  });
  afterEach(async () => {
    keys.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("makes the job on a key's first use and finds it on every repeat", async () => {
    expect(await submits.submit(request("k"), "j1", create, find)).toMatchObject({ kind: "created", row: { id: "j1" } });
    expect(await submits.submit(request("k"), "j2", create, find)).toMatchObject({ kind: "replayed", row: { id: "j1" } });
    expect([...jobs.keys()]).toEqual(["j1"]);
  });

  it("refuses a repeat whose body differs, while the first job exists and while it is being written", async () => {
    await submits.submit(request("k", { input: 1 }), "j1", create, find);
    expect(await submits.submit(request("k", { input: 2 }), "j2", create, find)).toEqual({ kind: "mismatch", jobId: "j1" });
    // Claimed, its job not written yet.
    await keys.claim({ ...request("pending", { input: 1 }), jobId: "p1", createdAt: now });
    expect(await submits.submit(request("pending", { input: 2 }), "p2", create, find)).toEqual({ kind: "mismatch", jobId: "p1" });
  });

  it("waits for the job of a claim being written, then answers with it", async () => {
    await keys.claim({ ...request("k"), jobId: "first", createdAt: now });
    const started = now;
    // The first request writes its job 100 ms (fake) later.
    const findLate = async (id: string) => (now - started >= 100 ? (jobs.get(id) ?? (await create(id))) : undefined);
    expect(await submits.submit(request("k"), "second", create, findLate)).toMatchObject({ kind: "replayed", row: { id: "first" } });
    expect(jobs.has("second")).toBe(false);
    expect(now - started).toBeGreaterThanOrEqual(100);
    expect(now - started).toBeLessThan(10_000);
  });

  it("takes over a claim whose job never came once it is older than the settle time", async () => {
    await keys.claim({ ...request("k"), jobId: "lost", createdAt: now });
    const started = now;
    expect(await submits.submit(request("k"), "j2", create, find)).toMatchObject({ kind: "created", row: { id: "j2" } });
    expect(now - started).toBeGreaterThanOrEqual(10_000);
    // From now on the key names the new job.
    expect(await submits.submit(request("k"), "j3", create, find)).toMatchObject({ kind: "replayed", row: { id: "j2" } });
  });

  it("frees a key once its job's result is gone, and the sweep forgets such keys", async () => {
    await submits.submit(request("k"), "j1", create, find);
    jobs.delete("j1");
    await store.apply([{ op: "deleteJob", id: "j1" }]);
    now += 10_000;
    expect(await submits.submit(request("k", { input: "another body is fine now" }), "j2", create, find)).toMatchObject({ kind: "created", row: { id: "j2" } });
    await keys.claim({ ...request("gone"), jobId: "never", createdAt: now });
    await keys.claim({ ...request("kept"), jobId: "j2", createdAt: now });
    now += SWEEP_AFTER_MS + 1;
    expect(await submits.sweep()).toBe(1);
    expect(await keys.claim({ ...request("kept"), jobId: "x", createdAt: now })).toMatchObject({ jobId: "j2" });
    expect(await keys.claim({ ...request("gone"), jobId: "y", createdAt: now })).toMatchObject({ jobId: "y" });
  });
});

describe("keys and request digests", () => {
  it("accepts printable ASCII of 1 to 255 characters", () => {
    expect(invalidIdempotencyKey("3f1c2a9e-7d7b-4c1e-9a55-0d3a2c6b9e10")).toBeUndefined();
    expect(invalidIdempotencyKey("")).toMatch(/1 to 255/);
    expect(invalidIdempotencyKey("x".repeat(256))).toMatch(/1 to 255/);
    expect(invalidIdempotencyKey("has space")).toMatch(/printable/);
    expect(invalidIdempotencyKey("é")).toMatch(/printable/);
  });

  it("digests a submission the same whatever the order of its keys, and differently for another value", () => {
    expect(requestHash({ input: { a: 1, b: [1, { y: 2, x: 1 }] }, webhook: "u" })).toBe(requestHash({ webhook: "u", input: { b: [1, { x: 1, y: 2 }], a: 1 } }));
    expect(requestHash({ input: { a: 1 } })).not.toBe(requestHash({ input: { a: 2 } }));
    expect(requestHash({ input: [1, 2] })).not.toBe(requestHash({ input: [2, 1] }));
  });
});
