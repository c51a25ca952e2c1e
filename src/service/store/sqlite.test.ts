import { afterEach, describe, expect, it } from "vitest";
import { openDatabase } from "./driver.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { foldJobOps, openSqliteStore } from "./sqlite.js";
import { SQLITE_MIGRATIONS as MIGRATIONS } from "../schema/sqlite.js";
import type { JobRow } from "./types.js";
import { WEBHOOKS_MIGRATION } from "../webhooks/schema.js";

const dirs: string[] = [];
const tempFile = () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-store-"));
  dirs.push(dir);
  return join(dir, "svc.sqlite");
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const job = (id: string): JobRow => ({
  id,
  endpointId: "e1",
  status: "IN_QUEUE",
  input: '{"a":1}',
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
  executionTimeoutMs: 1000,
  ttlMs: 5000,
  expiresAt: null,
  lease: null,
  workerId: null,
  streamCursor: 0,
});

describe("sqlite store", () => {
  it("migrates to the latest schema version, in WAL mode, and reopens with the data", async () => {
    const file = tempFile();
    const store = openSqliteStore(file, MIGRATIONS);
    await store.apply([
      { op: "insertJob", job: job("j1") },
      { op: "updateJob", id: "j1", set: { status: "IN_PROGRESS", lease: "L", attempt: 1 } },
    ]);
    await store.close();
    const db = openDatabase(file);
    expect(db.pragma("user_version", { simple: true })).toBe(MIGRATIONS.length);
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    db.close();
    const reopened = openSqliteStore(file, MIGRATIONS);
    expect(await reopened.activeJobs()).toEqual([{ ...job("j1"), status: "IN_PROGRESS", lease: "L", attempt: 1 }]);
    await reopened.close();
  });

  it("applies a batch all or nothing", async () => {
    const store = openSqliteStore(tempFile(), MIGRATIONS);
    await store.apply([{ op: "insertJob", job: job("j1") }]);
    await expect(
      store.apply([
        { op: "insertJob", job: job("j2") },
        { op: "insertJob", job: job("j1") },
      ]),
    ).rejects.toThrow(/UNIQUE/);
    expect(await store.getJob("j2")).toBeUndefined();
    expect((await store.activeJobs()).map((j) => j.id)).toEqual(["j1"]);
    await store.close();
  });

  it("commits a batch before apply resolves: another connection reads it at once", async () => {
    const file = tempFile();
    const store = openSqliteStore(file, MIGRATIONS);
    await store.apply([
      { op: "insertJob", job: job("j1") },
      { op: "insertLog", line: { ts: 1, endpointId: "e1", workerId: "w", jobId: "j1", stream: "log", text: "hi" } },
    ]);
    const reader = openDatabase(file, { readonly: true });
    expect(reader.prepare("SELECT id, status FROM jobs").all()).toEqual([{ id: "j1", status: "IN_QUEUE" }]);
    expect(reader.prepare("SELECT text FROM logs").all()).toEqual([{ text: "hi" }]);
    reader.close();
    await store.close();
  });

  it("gives webhooks an older svc left to deliver their job's endpoint and event", async () => {
    const file = tempFile();
    const db = openDatabase(file);
    const before = MIGRATIONS.indexOf(WEBHOOKS_MIGRATION);
    for (const m of MIGRATIONS.slice(0, before)) db.exec(m);
    db.pragma(`user_version = ${before}`);
    const insertJob = db.prepare(
      `INSERT INTO jobs (id, endpoint_id, status, input, sync, low_priority, created_at, attempt, retried, ttl_ms) VALUES (?, 'e1', ?, '{}', 0, 0, 1, 1, 0, 1000)`,
    );
    insertJob.run("done", "COMPLETED");
    insertJob.run("bad", "TIMED_OUT");
    const hook = db.prepare("INSERT INTO webhook_outbox (id, job_id, url, body, attempts, next_at, created_at) VALUES (?, ?, 'http://x', '{}', 0, ?, 1)");
    hook.run("w1", "done", 1);
    hook.run("w2", "bad", 2);
    hook.run("w3", "gone", 3);
    db.close();
    const store = openSqliteStore(file, MIGRATIONS);
    expect((await store.dueWebhooks(10, 10)).map((w) => [w.id, w.endpointId, w.event])).toEqual([
      ["w1", "e1", "completed"],
      ["w2", "e1", "failed"],
      ["w3", "", "completed"],
    ]);
    await store.close();
  });

  it("refuses a data file written by a newer svc", async () => {
    const file = tempFile();
    const db = openDatabase(file);
    db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    db.close();
    expect(() => openSqliteStore(file, MIGRATIONS)).toThrow(/newer svc/);
  });
});

describe("foldJobOps", () => {
  it("folds a job's updates into its insert or first update of the batch, keeping the last value of each column", () => {
    const folded = foldJobOps([
      { op: "insertJob", job: job("j1") },
      { op: "updateJob", id: "j2", set: { status: "IN_PROGRESS", lease: "A" } },
      { op: "updateJob", id: "j1", set: { status: "IN_PROGRESS", lease: "L", attempt: 1 } },
      { op: "insertLog", line: { ts: 1, endpointId: "e1", workerId: "w", jobId: "j1", stream: "log", text: "x" } },
      { op: "updateJob", id: "j2", set: { status: "COMPLETED", lease: null } },
    ]);
    expect(folded).toEqual([
      { op: "insertJob", job: { ...job("j1"), status: "IN_PROGRESS", lease: "L", attempt: 1 } },
      { op: "updateJob", id: "j2", set: { status: "COMPLETED", lease: null } },
      { op: "insertLog", line: { ts: 1, endpointId: "e1", workerId: "w", jobId: "j1", stream: "log", text: "x" } },
    ]);
  });

  it("does not fold across a delete or any other op", () => {
    const ops = [
      { op: "insertJob", job: job("j1") },
      { op: "deleteJob", id: "j1" },
      { op: "updateJob", id: "j1", set: { status: "COMPLETED" } },
    ] as const;
    expect(foldJobOps([...ops])).toEqual([...ops]);
  });
});
