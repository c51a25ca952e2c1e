// One contract for both stores: the embedded SQLite file and PostgreSQL (a real server, started for this file).
// What the engine and the replicas rely on: batches are atomic, rows read back as written, and the conditional
// job commands change a job only when the caller still holds it — also between two stores on one database.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/service/store/sqlite.js";
import { openPostgresStore } from "../../src/service/store/postgres/index.js";
import { SQLITE_MIGRATIONS } from "../../src/service/schema/sqlite.js";
import { PG_MIGRATIONS } from "../../src/service/schema/postgres.js";
import type { EndpointRow, JobCommands, JobRow, Store, StoreOp } from "../../src/service/store/types.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";
import { openPostgresUsageStore, openSqliteUsageStore, type UsageRow } from "../../src/service/metrics/usage-store.js";
import type { Queryable } from "../../src/service/store/queryable.js";

type AnyStore = Store & JobCommands;

interface Backend {
  name: string;
  /** A new empty database; `open` gives another store (a second replica) on the same one. */
  fresh(): Promise<{ store: AnyStore; open(): Promise<AnyStore> }>;
  available(): string | undefined;
}

const opened: AnyStore[] = [];
const track = (s: AnyStore) => (opened.push(s), s);

const work = mkdtempSync(join(tmpdir(), "svc-contract-"));
let files = 0;
let server: TestPostgres | undefined;

const backends: Backend[] = [
  {
    name: "sqlite",
    available: () => undefined,
    async fresh() {
      const file = join(work, `store-${++files}.sqlite`);
      return { store: track(openSqliteStore(file, SQLITE_MIGRATIONS)), open: async () => track(openSqliteStore(file, SQLITE_MIGRATIONS)) };
    },
  },
  {
    name: "postgres",
    available: postgresUnavailable,
    async fresh() {
      const url = await server!.createDatabase();
      return { store: track(await openPostgresStore(url, PG_MIGRATIONS)), open: async () => track(await openPostgresStore(url, PG_MIGRATIONS)) };
    },
  },
];

beforeAll(async () => {
  if (!postgresUnavailable()) server = await startPostgres();
});

afterAll(async () => {
  for (const s of opened) await s.close();
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

let ids = 0;
function job(over: Partial<JobRow> = {}): JobRow {
  return {
    id: `job-${++ids}`,
    endpointId: "ep1",
    status: "IN_QUEUE",
    input: '{"n":1}',
    function: null,
    webhook: null,
    sync: false,
    lowPriority: false,
    createdAt: 1_700_000_000_000 + ids,
    startedAt: null,
    completedAt: null,
    output: null,
    error: null,
    errorType: null,
    errorStack: null,
    attempt: 0,
    retried: 0,
    executionTimeoutMs: 600_000,
    ttlMs: 86_400_000,
    expiresAt: null,
    lease: null,
    workerId: null,
    streamCursor: 0,
    ...over,
  };
}

function endpoint(id: string): EndpointRow {
  return {
    id,
    userId: "u1",
    app: "app",
    env: "prod",
    name: id,
    type: "queue",
    resource: { kind: "endpoint", name: id } as unknown as EndpointRow["resource"],
    artifactPath: "/a",
    revision: "r1",
    createdAt: 1,
    updatedAt: 1,
    completed: 0,
    failed: 0,
    retried: 0,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const backend of backends) {
  const reason = backend.available();
  if (reason) console.warn(`store contract on ${backend.name} skipped: ${reason}`);
  describe.skipIf(reason !== undefined)(`store contract: ${backend.name}`, () => {
    it("keeps usage: each write adds to the hour's row (jobs and a load-balanced endpoint's requests alike); reads a user's rows or everyone's", async () => {
      const { store } = await backend.fresh();
      // The usage table lives beside the jobs: the SQLite file fresh() just made, or the store's database.
      const usage =
        backend.name === "sqlite"
          ? openSqliteUsageStore(join(work, `store-${files}.sqlite`))
          : openPostgresUsageStore((store as unknown as { db: Queryable }).db);
      const HOUR = 3_600_000;
      const row = (over: Partial<UsageRow>): UsageRow => ({
        userId: "u1",
        endpointId: "e1",
        hour: 10 * HOUR,
        gpuType: "",
        workerSeconds: 0,
        gpuSeconds: 0,
        jobs: 0,
        requests: 0,
        ...over,
      });
      await usage.add([row({ jobs: 2, workerSeconds: 30 }), row({ endpointId: "lb", requests: 40, workerSeconds: 10 })]);
      // Another replica's write of the same hours adds to them.
      await usage.add([row({ endpointId: "lb", requests: 2 }), row({ userId: "u2", hour: 11 * HOUR, jobs: 1 })]);
      expect(await usage.read({ userId: "u1", from: 0, to: 24 * HOUR })).toEqual([
        row({ jobs: 2, workerSeconds: 30 }),
        row({ endpointId: "lb", requests: 42, workerSeconds: 10 }),
      ]);
      expect((await usage.read({ from: 0, to: 24 * HOUR })).map((r) => [r.userId, r.endpointId, r.requests, r.jobs])).toEqual([
        ["u1", "e1", 0, 2],
        ["u1", "lb", 42, 0],
        ["u2", "e1", 0, 1],
      ]);
      if (backend.name === "sqlite") usage.close();
    });

    it("keeps an expired job's record as history: listed, read, filtered, kept once, swept after its time, gone with its endpoint", async () => {
      const { store } = await backend.fresh();
      const failed = job({
        status: "FAILED",
        error: "boom",
        errorType: "ValueError",
        errorStack: "at x",
        attempt: 2,
        retried: 1,
        startedAt: 10,
        completedAt: 20,
        workerId: "w9",
        output: '{"big":1}',
      });
      const done = job({ status: "COMPLETED", startedAt: 11, completedAt: 12, function: "hi", sync: true });
      const other = job({ endpointId: "ep2", status: "COMPLETED" });
      await store.apply([failed, done, other].map((j) => ({ op: "insertJob", job: j }) as StoreOp));
      await store.archiveJobs!([failed.id, done.id, other.id], 1000, 5000);
      // Archived again (a sweep repeated after a crash): the first record stays.
      await store.archiveJobs!([failed.id], 2000, 9000);
      await store.apply([failed, done, other].map((j) => ({ op: "deleteJob", id: j.id }) as StoreOp));
      const kept = await store.jobHistory!("ep1", 10);
      expect(kept.map((h) => h.id)).toEqual([done.id, failed.id]);
      expect(kept[1]).toEqual({
        id: failed.id,
        endpointId: "ep1",
        status: "FAILED",
        function: null,
        sync: false,
        createdAt: failed.createdAt,
        startedAt: 10,
        completedAt: 20,
        error: "boom",
        errorType: "ValueError",
        attempt: 2,
        retried: 1,
        workerId: "w9",
        resultExpiredAt: 1000,
        keptUntil: 5000,
      });
      expect(kept[0]).toMatchObject({ function: "hi", sync: true });
      expect((await store.jobHistory!("ep1", 10, { statuses: ["FAILED", "TIMED_OUT"] })).map((h) => h.id)).toEqual([failed.id]);
      expect((await store.jobHistory!("ep1", 10, { since: done.createdAt })).map((h) => h.id)).toEqual([done.id]);
      expect(await store.historyJob!("ep1", failed.id)).toMatchObject({ status: "FAILED", error: "boom" });
      // Another endpoint's record is not this one's.
      expect(await store.historyJob!("ep1", other.id)).toBeUndefined();
      // The live list filters the same way.
      const live = [job({ status: "FAILED" }), job({ status: "COMPLETED" })];
      await store.apply(live.map((j) => ({ op: "insertJob", job: j }) as StoreOp));
      expect(await store.recentJobIds!("ep1", 10, { statuses: ["FAILED"] })).toEqual([live[0]!.id]);
      expect(await store.recentJobIds!("ep1", 10)).toEqual([live[1]!.id, live[0]!.id]);
      // Swept when kept_until has come; the endpoint's deletion takes the rest.
      expect(await store.sweepJobHistory!(4999, 100)).toBe(0);
      expect(await store.sweepJobHistory!(5000, 100)).toBe(3);
      expect(await store.jobHistory!("ep1", 10)).toEqual([]);
      await store.archiveJobs!([live[0]!.id], 1000, 99_000);
      await store.apply([
        { op: "upsertEndpoint", endpoint: endpoint("ep1") },
        { op: "deleteEndpoint", id: "ep1" },
      ]);
      expect(await store.historyJob!("ep1", live[0]!.id)).toBeUndefined();
    });

    it("reads back what a batch wrote, with a job's changes in the batch folded into its row", async () => {
      const { store } = await backend.fresh();
      const a = job({ sync: true, lowPriority: true, maxRetries: 2 });
      const b = job();
      await store.apply([
        { op: "insertJob", job: a },
        { op: "insertJob", job: b },
        { op: "updateJob", id: a.id, set: { status: "IN_PROGRESS", lease: "L1", workerId: "w1", attempt: 1, startedAt: 5 } },
        { op: "updateJob", id: b.id, set: { status: "COMPLETED", output: '{"ok":"é"}', completedAt: 9, expiresAt: 99 } },
      ]);
      expect(await store.getJob(a.id)).toEqual({ ...a, status: "IN_PROGRESS", lease: "L1", workerId: "w1", attempt: 1, startedAt: 5 });
      const head = await store.getJobHead!(b.id);
      expect(head).toMatchObject({ id: b.id, status: "COMPLETED", output: null, outputBytes: Buffer.byteLength('{"ok":"é"}') });
      expect((await store.jobOutput!(b.id))!.toString("utf8")).toBe('{"ok":"é"}');
      // The engine reads a large queued input back from here when a worker takes its job.
      expect(await store.jobInput(a.id)).toBe(a.input);
      expect(await store.jobInput("nope")).toBeUndefined();
      expect((await store.activeJobs()).map((j) => j.id)).toEqual([a.id]);
      expect(await store.expiredJobIds(100, 10)).toEqual([b.id]);
      expect(await store.expiredJobIds(98, 10)).toEqual([]);
      expect(await store.recentJobIds!("ep1", 1)).toEqual([b.id]);
      expect(await store.getJob("nope")).toBeUndefined();
    });

    it("keeps the text a worker's failure carried, a NUL or a lone surrogate as U+FFFD where it cannot be held", async () => {
      const { store } = await backend.fresh();
      const text = "nul\u0000 lone\ud800 pair\ud83d\ude00 back\\u0000slash ünï";
      // A /runsync's job is written once, when it ends: inserted with its final state, beside another job.
      const failed = job({ status: "FAILED", error: text, errorType: "Error", errorStack: `Error: ${text}`, completedAt: 9 });
      const other = job();
      await store.apply([
        { op: "insertJob", job: failed },
        { op: "insertJob", job: other },
      ]);
      const row = await store.getJob(failed.id);
      // (SQLite keeps a NUL, and writes a lone surrogate's three bytes, each read back as a U+FFFD.)
      const held = (s: string | null | undefined) => s?.replaceAll("\u0000", "\uFFFD").replace(/\uFFFD+/g, "\uFFFD");
      expect(held(row?.error)).toBe("nul\uFFFD lone\uFFFD pair\ud83d\ude00 back\\u0000slash ünï");
      expect(held(row?.errorStack)).toBe(`Error: ${held(row?.error)}`);
      expect((await store.getJob(other.id))?.input).toBe(other.input);
    });

    it("applies a batch all or nothing", async () => {
      const { store } = await backend.fresh();
      const a = job();
      await store.apply([{ op: "insertJob", job: a }]);
      const b = job();
      // The second insert of `a` breaks the batch: `b` must not be kept either.
      await expect(
        store.apply([
          { op: "insertJob", job: b },
          { op: "deleteChunksAfter", jobId: "x", seq: 0 },
          { op: "insertJob", job: a },
        ]),
      ).rejects.toThrow();
      expect(await store.getJob(b.id)).toBeUndefined();
      // And the store still takes the next batch.
      await store.apply([{ op: "insertJob", job: b }]);
      expect((await store.getJob(b.id))?.id).toBe(b.id);
    });

    it("keeps stream chunks in order, replaces a chunk sent again, and drops an attempt's unread ones", async () => {
      const { store } = await backend.fresh();
      const a = job();
      await store.apply([
        { op: "insertJob", job: a },
        ...[1, 2, 3, 4].map((seq) => ({ op: "insertChunk" as const, chunk: { jobId: a.id, seq, data: `{"output":${seq}}` } })),
        { op: "insertChunk", chunk: { jobId: a.id, seq: 2, data: '{"output":"two"}' } },
      ]);
      expect((await store.chunksAfter(a.id, 1)).map((c) => c.data)).toEqual(['{"output":"two"}', '{"output":3}', '{"output":4}']);
      expect(await store.lastChunkSeq(a.id)).toBe(4);
      await store.apply([{ op: "deleteChunksAfter", jobId: a.id, seq: 2 }]);
      expect((await store.chunksAfter(a.id, 0)).map((c) => c.seq)).toEqual([1, 2]);
      await store.apply([{ op: "deleteJob", id: a.id }]);
      expect(await store.chunksAfter(a.id, 0)).toEqual([]);
      expect(await store.lastChunkSeq(a.id)).toBe(0);
    });

    it("queries logs by endpoint, job, time and position, and keeps any text a worker printed", async () => {
      const { store } = await backend.fresh();
      const line = (over: object) => ({ ts: 10, endpointId: "ep1", workerId: "w1", jobId: null, stream: "stdout", text: "x", ...over });
      await store.apply([
        { op: "insertLog", line: line({ text: "one" }) },
        { op: "insertLog", line: line({ text: "two", jobId: "j1", ts: 20 }) },
        { op: "insertLog", line: line({ text: "other", endpointId: "ep2" }) },
        { op: "insertLog", line: line({ text: "nul\u0000byte ünï", ts: 30 }) },
      ]);
      const all = await store.logs({ endpointId: "ep1", limit: 10 });
      expect(all.map((l) => l.text.replace("\uFFFD", "\u0000"))).toEqual(["one", "two", "nul\u0000byte ünï"]);
      expect((await store.logs({ endpointId: "ep1", jobId: "j1", limit: 10 })).map((l) => l.text)).toEqual(["two"]);
      expect((await store.logs({ endpointId: "ep1", since: 20, limit: 10 })).map((l) => l.ts)).toEqual([20, 30]);
      expect((await store.logs({ endpointId: "ep1", afterId: all[0]!.seq, limit: 1 })).map((l) => l.text)).toEqual(["two"]);
    });

    it("finds an endpoint's notices of dropped lines by job and time, without the other lines", async () => {
      const { store } = await backend.fresh();
      const line = (over: object) => ({
        op: "insertLog" as const,
        line: { ts: 10, endpointId: "ep1", workerId: "w1", jobId: null, stream: "stdout", text: "x", ...over },
      });
      await store.apply([
        line({ text: "[svc] 5 log lines dropped: a", stream: "dropped", jobId: "j1" }),
        line({ text: "[svc] 7 log lines dropped: b", stream: "dropped", ts: 20 }),
        line({ text: "[svc] 9 log lines dropped: printed by the worker" }),
        line({ text: "[svc] 1 log line dropped: other endpoint", stream: "dropped", endpointId: "ep2" }),
      ]);
      expect(await store.droppedLogNotices!({ endpointId: "ep1", limit: 10 })).toEqual(["[svc] 5 log lines dropped: a", "[svc] 7 log lines dropped: b"]);
      expect(await store.droppedLogNotices!({ endpointId: "ep1", jobId: "j1", limit: 10 })).toEqual(["[svc] 5 log lines dropped: a"]);
      expect(await store.droppedLogNotices!({ endpointId: "ep1", since: 15, limit: 10 })).toEqual(["[svc] 7 log lines dropped: b"]);
    });

    it("prunes an endpoint's oldest log lines by age, then by size, never another endpoint's, at most `limit` at once", async () => {
      const { store } = await backend.fresh();
      const line = (ts: number, text: string, endpointId = "ep1") => ({
        op: "insertLog" as const,
        line: { ts, endpointId, workerId: "w1", jobId: null, stream: "stdout", text },
      });
      // Sizes with an overhead of 10 bytes a line: "aaaa" counts 14, "é" (2 bytes) 12.
      await store.apply([line(10, "aaaa"), line(20, "bbbb"), line(5, "late"), line(30, "cccc"), line(40, "é"), line(10, "old", "ep2")]);
      expect(await store.logBytes!({ endpointId: "ep1", lineOverheadBytes: 10, afterSeq: 0, limit: 100 })).toMatchObject({ bytes: 14 * 4 + 12, lines: 5 });
      // A part at a time: the first two lines, then the rest after the last one counted.
      const part = await store.logBytes!({ endpointId: "ep1", lineOverheadBytes: 10, afterSeq: 0, limit: 2 });
      expect(part).toMatchObject({ bytes: 28, lines: 2 });
      expect(await store.logBytes!({ endpointId: "ep1", lineOverheadBytes: 10, afterSeq: part.lastSeq!, limit: 100 })).toMatchObject({
        bytes: 14 * 2 + 12,
        lines: 3,
      });
      // Nothing older than 5: nothing goes.
      expect(await store.pruneLogs!({ endpointId: "ep1", before: 5, dropBytes: 0, lineOverheadBytes: 10, limit: 100 })).toEqual({
        removedByAge: 0,
        removedBySize: 0,
        removedBytes: 0,
      });
      // Before 25, from the oldest line on up to the first newer one: aaaa, bbbb, late (ts 5, after them).
      expect(await store.pruneLogs!({ endpointId: "ep1", before: 25, dropBytes: 0, lineOverheadBytes: 10, limit: 100 })).toEqual({
        removedByAge: 3,
        removedBySize: 0,
        removedBytes: 42,
      });
      expect((await store.logs({ endpointId: "ep1", limit: 10 })).map((l) => l.text)).toEqual(["cccc", "é"]);
      // By size: 1 byte to drop takes the oldest whole line.
      expect(await store.pruneLogs!({ endpointId: "ep1", before: 0, dropBytes: 1, lineOverheadBytes: 10, limit: 100 })).toEqual({
        removedByAge: 0,
        removedBySize: 1,
        removedBytes: 14,
      });
      expect((await store.logs({ endpointId: "ep1", limit: 10 })).map((l) => l.text)).toEqual(["é"]);
      // More to drop than there is: all of it.
      expect(await store.pruneLogs!({ endpointId: "ep1", before: 0, dropBytes: 1000, lineOverheadBytes: 10, limit: 100 })).toEqual({
        removedByAge: 0,
        removedBySize: 1,
        removedBytes: 12,
      });
      expect(await store.logBytes!({ endpointId: "ep1", lineOverheadBytes: 10, afterSeq: 0, limit: 100 })).toEqual({ bytes: 0, lines: 0, lastSeq: null });
      expect((await store.logs({ endpointId: "ep2", limit: 10 })).map((l) => l.text)).toEqual(["old"]);
      // `limit` lines at most, age and size together.
      await store.apply([line(1, "a"), line(2, "b"), line(3, "c"), line(100, "d"), line(101, "e")]);
      expect(await store.pruneLogs!({ endpointId: "ep1", before: 50, dropBytes: 1000, lineOverheadBytes: 0, limit: 2 })).toEqual({
        removedByAge: 2,
        removedBySize: 0,
        removedBytes: 2,
      });
      expect(await store.pruneLogs!({ endpointId: "ep1", before: 50, dropBytes: 1000, lineOverheadBytes: 0, limit: 2 })).toEqual({
        removedByAge: 1,
        removedBySize: 1,
        removedBytes: 2,
      });
      expect((await store.logs({ endpointId: "ep1", limit: 10 })).map((l) => l.text)).toEqual(["e"]);
    });

    it("keeps endpoints with their counters; deleting one deletes its jobs, chunks and logs", async () => {
      const { store } = await backend.fresh();
      await store.apply([
        { op: "upsertEndpoint", endpoint: endpoint("ep1") },
        { op: "upsertEndpoint", endpoint: endpoint("ep2") },
      ]);
      await store.apply([
        { op: "addCounters", endpointId: "ep1", completed: 2, failed: 1, retried: 0 },
        { op: "addCounters", endpointId: "ep1", completed: 1, failed: 0, retried: 3 },
        { op: "upsertEndpoint", endpoint: { ...endpoint("ep1"), revision: "r2", updatedAt: 5 } },
      ]);
      const [ep1] = await store.endpoints();
      expect(ep1).toMatchObject({ id: "ep1", revision: "r2", updatedAt: 5, createdAt: 1, completed: 3, failed: 1, retried: 3 });
      expect(ep1!.resource).toEqual({ kind: "endpoint", name: "ep1" });
      const a = job({ endpointId: "ep1" });
      await store.apply([
        { op: "insertJob", job: a },
        { op: "insertChunk", chunk: { jobId: a.id, seq: 1, data: "{}" } },
        { op: "insertLog", line: { ts: 1, endpointId: "ep1", workerId: "w", jobId: a.id, stream: "stdout", text: "t" } },
      ]);
      await store.apply([{ op: "deleteEndpoint", id: "ep1" }]);
      expect((await store.endpoints()).map((e) => e.id)).toEqual(["ep2"]);
      expect(await store.getJob(a.id)).toBeUndefined();
      expect(await store.chunksAfter(a.id, 0)).toEqual([]);
      expect(await store.logs({ endpointId: "ep1", limit: 10 })).toEqual([]);
    });

    it("finds keys by hash, revoked and deleted", async () => {
      const { store } = await backend.fresh();
      const key = { id: "k1", hash: "h1", userId: "u1", scopes: ["admin"], createdAt: 3, revokedAt: null };
      await store.apply([{ op: "insertKey", key }]);
      expect(await store.keyByHash("h1")).toEqual({ ...key, expiresAt: null });
      await store.apply([{ op: "revokeKey", id: "k1", at: 7 }]);
      expect((await store.keyByHash("h1"))?.revokedAt).toBe(7);
      await store.apply([{ op: "deleteKey", id: "k1" }]);
      expect(await store.keyByHash("h1")).toBeUndefined();
    });

    it("keeps apps, environments, builds and releases (newest release first)", async () => {
      const { store } = await backend.fresh();
      const build = { id: "b1", userId: "u1", app: "app", size: 10, fingerprint: "f", manifest: { version: 1 } as never, path: "/p", createdAt: 1 };
      const release = (id: string, startedAt: number) => ({
        id,
        userId: "u1",
        app: "app",
        env: "prod",
        buildId: "b1",
        previousBuildId: null,
        kind: "deploy" as const,
        state: "live" as const,
        startedAt,
        finishedAt: null,
        endpoints: [],
        error: null,
      });
      await store.apply([
        { op: "upsertApp", app: { userId: "u1", name: "app", createdAt: 1 } },
        { op: "upsertApp", app: { userId: "u1", name: "app", createdAt: 2 } },
        { op: "insertBuild", build },
        { op: "upsertEnvironment", environment: { userId: "u1", app: "app", name: "prod", buildId: "b1", createdAt: 1, activatedAt: 2 } },
        { op: "upsertRelease", release: release("r1", 1) },
        { op: "upsertRelease", release: release("r2", 2) },
        { op: "upsertRelease", release: { ...release("r1", 1), state: "superseded" as const } },
      ]);
      expect(await store.apps("u1")).toEqual([{ userId: "u1", name: "app", createdAt: 1 }]);
      expect(await store.build("u1", "b1")).toEqual(build);
      expect((await store.environments("u1", "app"))[0]).toMatchObject({ buildId: "b1", activatedAt: 2 });
      expect((await store.releases("u1", "app", "prod", 10)).map((r) => [r.id, r.state])).toEqual([
        ["r2", "live"],
        ["r1", "superseded"],
      ]);
      await store.apply([{ op: "deleteApp", userId: "u1", name: "app" }]);
      expect(await store.apps("u1")).toEqual([]);
      expect(await store.build("u1", "b1")).toBeUndefined();
      expect(await store.releases("u1", "app", "prod", 10)).toEqual([]);
    });

    it("keeps webhooks to deliver until they are deleted, due by their time", async () => {
      const { store } = await backend.fresh();
      const hook = (id: string, nextAt: number) => ({
        id,
        jobId: `j-${id}`,
        endpointId: "ep1",
        event: "completed",
        url: "http://x/y",
        body: '{"id":"j"}',
        attempts: 0,
        nextAt,
        createdAt: nextAt,
      });
      await store.apply([
        { op: "insertWebhook", webhook: hook("w1", 100) },
        { op: "insertWebhook", webhook: hook("w2", 50) },
        { op: "insertWebhook", webhook: hook("w3", 500) },
      ]);
      expect((await store.dueWebhooks(200, 10)).map((w) => w.id)).toEqual(["w2", "w1"]);
      await store.apply([
        { op: "retryWebhook", id: "w2", attempts: 1, nextAt: 300 },
        { op: "deleteWebhook", id: "w1" },
      ]);
      expect(await store.dueWebhooks(200, 10)).toEqual([]);
      expect(await store.dueWebhooks(1_000, 10)).toEqual([{ ...hook("w2", 50), attempts: 1, nextAt: 300 }, hook("w3", 500)]);
    });

    it("keeps a job's webhook delivery log and filter, and each endpoint's webhook settings, until their job or endpoint goes", async () => {
      const { store } = await backend.fresh();
      const withFilter = job({ webhook: "http://x/y", webhookEvents: "started,completed" });
      const attempt = (jobId: string, n: number, at: number) => ({
        jobId,
        endpointId: "ep1",
        messageId: `msg_${jobId}`,
        event: "completed",
        attempt: n,
        at,
        durationMs: 12,
        status: n === 1 ? 503 : 200,
        error: n === 1 ? "answered 503" : null,
        outcome: n === 1 ? ("retrying" as const) : ("delivered" as const),
      });
      const settings = {
        endpointId: "ep1",
        events: "completed",
        secret: "c2VhbGVk",
        secretKeyId: "k1",
        secretCreatedAt: 5,
        previousSecret: null,
        previousKeyId: null,
        previousExpiresAt: null,
        updatedAt: 5,
      };
      await store.apply([
        { op: "upsertEndpoint", endpoint: endpoint("ep1") },
        { op: "insertJob", job: withFilter },
        {
          op: "insertWebhook",
          webhook: { id: "w1", jobId: withFilter.id, endpointId: "ep1", event: "started", url: "http://x/y", body: "{}", attempts: 0, nextAt: 1, createdAt: 1 },
        },
        { op: "insertWebhookDelivery", delivery: attempt(withFilter.id, 1, 100) },
        { op: "insertWebhookDelivery", delivery: attempt(withFilter.id, 2, 200) },
        { op: "insertWebhookDelivery", delivery: attempt("gone", 1, 100) },
        { op: "putWebhookSettings", settings },
      ]);
      expect((await store.getJob(withFilter.id))?.webhookEvents).toBe("started,completed");
      expect((await store.pendingWebhooks!(withFilter.id)).map((w) => [w.id, w.event])).toEqual([["w1", "started"]]);
      expect(await store.webhookDeliveries!(withFilter.id)).toEqual([attempt(withFilter.id, 1, 100), attempt(withFilter.id, 2, 200)]);
      expect(await store.webhookSettings!()).toEqual([settings]);
      await store.apply([
        { op: "putWebhookSettings", settings: { ...settings, events: null, previousSecret: "b2xk", previousKeyId: "k1", previousExpiresAt: 9, updatedAt: 6 } },
      ]);
      expect(await store.webhookSettings!("ep1")).toEqual([
        { ...settings, events: null, previousSecret: "b2xk", previousKeyId: "k1", previousExpiresAt: 9, updatedAt: 6 },
      ]);
      // Only the log of a job no longer stored, older than the cut, goes.
      await store.apply([{ op: "pruneWebhookDeliveries", before: 150 }]);
      expect(await store.webhookDeliveries!("gone")).toEqual([]);
      expect(await store.webhookDeliveries!(withFilter.id)).toHaveLength(2);
      await store.apply([{ op: "deleteEndpoint", id: "ep1" }]);
      expect(await store.webhookDeliveries!(withFilter.id)).toEqual([]);
      expect(await store.webhookSettings!()).toEqual([]);
    });

    it("claims queued jobs normal priority first, oldest first, under a new lease, counting the attempt", async () => {
      const { store } = await backend.fresh();
      const low = job({ lowPriority: true });
      const first = job();
      const second = job();
      const other = job({ endpointId: "ep2" });
      await store.apply([low, first, second, other].map((j) => ({ op: "insertJob" as const, job: j })));
      const before = await store.now();
      const claimed = await store.claim({ endpointId: "ep1", workerId: "w1", max: 2, leaseMs: 30_000 });
      expect(claimed.map((j) => j.id)).toEqual([first.id, second.id]);
      for (const c of claimed) {
        expect(c).toMatchObject({ status: "IN_PROGRESS", workerId: "w1", attempt: 1 });
        expect(c.lease).toEqual(expect.any(String));
        expect(c.leaseExpiresAt).toBeGreaterThanOrEqual(before + 30_000);
        expect((await store.getJob(c.id))?.lease).toBe(c.lease);
      }
      expect(new Set(claimed.map((c) => c.lease)).size).toBe(2);
      expect((await store.claim({ endpointId: "ep1", workerId: "w1", max: 5, leaseMs: 30_000 })).map((j) => j.id)).toEqual([low.id]);
      expect(await store.claim({ endpointId: "ep1", workerId: "w1", max: 5, leaseMs: 30_000 })).toEqual([]);
    });

    it("keeps a job's progress, retry backoff and ttl deadline, and claims no job before its backoff is over", async () => {
      const { store } = await backend.fresh();
      const now = await store.now();
      const waiting = job({ notBefore: now + 60_000, deadlineAt: now + 3_600_000, retried: 1 });
      const due = job({ notBefore: now - 1, progress: null });
      const running = job({ status: "IN_PROGRESS", lease: `lease-${ids}`, progress: '{"step":2,"of":5}', deadlineAt: now + 1000 });
      await store.apply([waiting, due, running].map((j) => ({ op: "insertJob" as const, job: j })));
      expect(await store.getJob(waiting.id)).toMatchObject({ notBefore: now + 60_000, deadlineAt: now + 3_600_000 });
      expect(await store.getJob(running.id)).toMatchObject({ progress: '{"step":2,"of":5}', deadlineAt: now + 1000 });
      await store.apply([{ op: "updateJob", id: running.id, set: { progress: '"almost"' } }]);
      expect((await store.getJob(running.id))?.progress).toBe('"almost"');
      expect((await store.claim({ endpointId: "ep1", workerId: "w1", max: 5, leaseMs: 30_000 })).map((j) => j.id)).toEqual([due.id]);
      await store.apply([{ op: "updateJob", id: waiting.id, set: { notBefore: now - 1 } }]);
      expect((await store.claim({ endpointId: "ep1", workerId: "w1", max: 5, leaseMs: 30_000 })).map((j) => j.id)).toEqual([waiting.id]);
    });

    it("never gives one job to two claims, from two stores on one database at once", async () => {
      const { store, open } = await backend.fresh();
      const second = await open();
      const jobs = Array.from({ length: 60 }, () => job());
      await store.apply(jobs.map((j) => ({ op: "insertJob" as const, job: j })));
      const claims = await Promise.all(
        Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? store : second).claim({ endpointId: "ep1", workerId: `w${i}`, max: 7, leaseMs: 30_000 })),
      );
      const got = claims.flat().map((j) => j.id);
      expect(got.length).toBe(60);
      expect(new Set(got).size).toBe(60);
    });

    it("completes a job only under its current lease, once", async () => {
      const { store } = await backend.fresh();
      const a = job();
      await store.apply([{ op: "insertJob", job: a }]);
      const [claimed] = await store.claim({ endpointId: "ep1", workerId: "w1", max: 1, leaseMs: 30_000 });
      const done = { status: "COMPLETED" as const, output: '{"r":1}', completedAt: 50, expiresAt: 500 };
      expect(await store.completeIfLeased(a.id, "not-the-lease", done)).toBe(false);
      expect(await store.completeIfLeased(a.id, claimed!.lease!, done)).toBe(true);
      expect(await store.completeIfLeased(a.id, claimed!.lease!, { ...done, output: '{"r":2}' })).toBe(false);
      expect(await store.getJob(a.id)).toMatchObject({ status: "COMPLETED", output: '{"r":1}', lease: null, completedAt: 50 });
    });

    it("extends current leases and reports the lost ones; expired leases go back to the queue by the store's clock", async () => {
      const { store } = await backend.fresh();
      const a = job();
      const b = job();
      await store.apply([
        { op: "insertJob", job: a },
        { op: "insertJob", job: b },
      ]);
      const claimed = await store.claim({ endpointId: "ep1", workerId: "w1", max: 2, leaseMs: 300 });
      const [la, lb] = claimed.map((c) => c.lease!);
      expect(await store.extendLeases([la!, "gone"], 60_000)).toEqual({ extended: [la], lost: ["gone"] });
      expect(await store.requeueExpired(10)).toEqual([]);
      await sleep(450);
      const requeued = await store.requeueExpired(10);
      expect(requeued.map((j) => [j.id, j.status, j.lease, j.workerId])).toEqual([[b.id, "IN_QUEUE", null, null]]);
      // The requeued job's old lease is worth nothing now; the next claim counts a second attempt.
      expect(await store.completeIfLeased(b.id, lb!, { status: "COMPLETED" })).toBe(false);
      expect(await store.extendLeases([lb!], 60_000)).toEqual({ extended: [], lost: [lb] });
      const [again] = await store.claim({ endpointId: "ep1", workerId: "w2", max: 1, leaseMs: 60_000 });
      expect(again).toMatchObject({ id: b.id, attempt: 2, workerId: "w2" });
    });

    it("hands a job back under its lease, and cancels a job that is not final", async () => {
      const { store } = await backend.fresh();
      const a = job();
      const b = job();
      await store.apply([
        { op: "insertJob", job: a },
        { op: "insertJob", job: b },
      ]);
      const [claimed] = await store.claim({ endpointId: "ep1", workerId: "w1", max: 1, leaseMs: 30_000 });
      expect(await store.releaseLease(a.id, "wrong")).toBe(false);
      expect(await store.releaseLease(a.id, claimed!.lease!)).toBe(true);
      expect(await store.getJob(a.id)).toMatchObject({ status: "IN_QUEUE", lease: null, workerId: null });
      const cancelled = await store.cancelJob(b.id, 1_000);
      expect(cancelled).toMatchObject({ status: "CANCELLED", completedAt: 1_000, expiresAt: 1_000 + b.ttlMs, lease: null });
      // A final job stays as it is; an unknown one is undefined.
      expect((await store.cancelJob(b.id, 2_000))?.completedAt).toBe(1_000);
      expect(await store.cancelJob("nope", 1)).toBeUndefined();
      expect((await store.claim({ endpointId: "ep1", workerId: "w1", max: 5, leaseMs: 30_000 })).map((j) => j.id)).toEqual([a.id]);
    });
  });
}
