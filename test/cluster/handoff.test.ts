// Submissions on every replica: a replica that does not serve jobs writes a `/run` job itself, marked as handed
// off, and the replica serving jobs adopts it (src/service/engine/handoff.ts). The store's side: the mark, the
// notice at commit, adoption once. The service's side: a `/run` through a follower needs neither the jobs
// replica's address nor a hop to it, and every job handed off runs once.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type Service } from "../../src/service/index.js";
import { openPostgresStore, type PostgresStore } from "../../src/service/store/postgres/index.js";
import { PG_MIGRATIONS } from "../../src/service/schema/postgres.js";
import type { EndpointRow, JobRow } from "../../src/service/store/types.js";
import { call, manifest, ProtocolWorker, resource } from "../service/helpers.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";

const unavailable = postgresUnavailable();
if (unavailable) console.warn(`handoff tests skipped: ${unavailable}`);

function job(id: string, createdAt = Date.now()): JobRow {
  return {
    id,
    endpointId: "e1",
    status: "IN_QUEUE",
    input: `{"n":"${id}"}`,
    function: null,
    webhook: null,
    sync: false,
    lowPriority: false,
    createdAt,
    startedAt: null,
    completedAt: null,
    output: null,
    error: null,
    errorType: null,
    errorStack: null,
    attempt: 0,
    retried: 0,
    executionTimeoutMs: 60_000,
    ttlMs: 60_000,
    expiresAt: null,
    lease: null,
    workerId: null,
    streamCursor: 0,
    maxRetries: null,
  };
}

describe.skipIf(unavailable !== undefined)("handing /run jobs off between replicas", () => {
  const key = "svc_test_handoff_admin_key_0123456789";
  let server: TestPostgres;
  let work: string;
  beforeAll(async () => {
    server = await startPostgres();
    work = mkdtempSync(join(tmpdir(), "svc-handoff-"));
    writeFileSync(join(work, "artifact.tar.gz"), "not really a tarball; the service only hashes it");
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  describe("the PostgreSQL store", () => {
    let url: string;
    let store: PostgresStore;
    beforeAll(async () => {
      url = await server.createDatabase();
      store = await openPostgresStore(url, PG_MIGRATIONS);
    });
    afterAll(async () => {
      await store?.close();
    });

    it("gives each handed-off job that is still queued to one adoption, oldest first", async () => {
      const endpoint = {
        id: "e1",
        userId: "u",
        app: "a",
        env: "e",
        name: "e1",
        type: "queue",
        resource: { functions: [] },
        artifactPath: "",
        revision: "r1",
        createdAt: 1,
        updatedAt: 1,
        completed: 0,
        failed: 0,
        retried: 0,
      } as unknown as EndpointRow;
      await store.apply([{ op: "upsertEndpoint", endpoint }]);
      await store.handOffJobs!([job("h1", 1), job("h2", 2)], "follower-1");
      // Handed off by a follower that had not heard its endpoint was deleted: goes as the endpoint's jobs went.
      await store.handOffJobs!([{ ...job("orphan"), endpointId: "deleted" }], "follower-2");
      await store.handOffJobs!([job("h3", 3)], "follower-2");
      // The jobs replica's own inserts are never adopted.
      await store.apply([{ op: "insertJob", job: job("own") }]);
      // A handed-off job cancelled before its adoption is not adopted (and keeps no mark).
      await store.apply([{ op: "updateJob", id: "h2", set: { status: "CANCELLED", completedAt: Date.now() } }]);

      // Adopted with a batch of the jobs replica: a job that batch writes itself keeps its mark until the next one
      // (one statement changing a row twice would keep only one of the changes).
      const adopted = await store.applyAndAdopt!([
        { op: "insertJob", job: job("own-2") },
        { op: "updateJob", id: "h3", set: { ttlMs: 5_000 } },
      ]);
      expect(adopted.map((r) => [r.id, r.status, r.input])).toEqual([["h1", "IN_QUEUE", '{"n":"h1"}']]);
      const again = await store.applyAndAdopt!([]);
      expect(again.map((r) => [r.id, r.ttlMs])).toEqual([["h3", 5_000]]);
      expect(await store.applyAndAdopt!([])).toEqual([]);
      const { rows } = await store.pool.query<{ id: string }>("SELECT id FROM jobs ORDER BY seq");
      expect(rows.map((r) => r.id)).toEqual(["h1", "h2", "h3", "own", "own-2"]);
      expect((await store.pool.query("SELECT * FROM job_handoffs")).rows).toEqual([]);
    });
  });

  describe("replicas", () => {
    let url: string;
    let a: Service;
    let b: Service;
    beforeAll(async () => {
      url = await server.createDatabase();
      // `a` serves jobs but names an address nobody answers: a follower that passed `/run` on would fail (503).
      a = await startService({ dataDir: join(work, "a"), storeUrl: url, apiKeys: [key], replicaUrl: "http://127.0.0.1:9" });
      b = await startService({ dataDir: join(work, "b"), storeUrl: url, apiKeys: [key] });
    });
    afterAll(async () => {
      await b?.close();
      await a?.close();
    });

    it("acknowledges a /run through a follower without reaching the jobs replica, and the job completes there, once", async () => {
      const [endpoint] = await a.deploy({
        app: "handoff",
        env: "prod",
        manifest: manifest({ work: resource() }, "handoff"),
        artifactPath: join(work, "artifact.tar.gz"),
      });
      await expect.poll(async () => (await call(`${b.url}/v1/endpoints/${endpoint!.id}`, { key })).status, { timeout: 5_000 }).toBe(200);

      const runs = await Promise.all(Array.from({ length: 200 }, (_, i) => call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: { i } } })));
      expect(runs.map((r) => r.status)).toEqual(runs.map(() => 200));
      const ids = new Set(runs.map((r) => r.body.id as string));
      expect(ids.size).toBe(200);

      // A worker at the jobs replica takes every one of them, each once, and completes it.
      const worker = await ProtocolWorker.mint({ service: a }, endpoint!.id);
      await worker.register();
      const seen = new Map<string, number>();
      const deadline = Date.now() + 20_000;
      while (seen.size < ids.size && Date.now() < deadline) {
        const jobs = await worker.take(50, 1_000);
        for (const j of jobs) seen.set(j.id, (seen.get(j.id) ?? 0) + 1);
        if (jobs.length > 0)
          await worker.done(jobs.map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: { echo: (j.input as { i: number }).i } })));
      }
      expect([...seen.keys()].sort()).toEqual([...ids].sort());
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
      const first = runs[0]!.body.id as string;
      expect((await call(`${a.url}/v2/${endpoint!.id}/status/${first}`, { key })).body).toMatchObject({ status: "COMPLETED", output: { echo: 0 } });
      // Nothing else is queued: no job was adopted twice.
      expect(await worker.take(10, 300)).toEqual([]);

      // The follower tells the jobs replica at once (the change feed), not at its next rescan (every 2 s).
      for (let i = 0; i < 5; i++) {
        const started = Date.now();
        const run = await call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: { i } } });
        const [taken] = await worker.take(1, 2_000);
        expect(taken!.id).toBe(run.body.id);
        expect(Date.now() - started).toBeLessThan(500);
        await worker.done([{ jobId: taken!.id, lease: taken!.lease, status: "COMPLETED", output: {} }]);
      }
    }, 60_000);

    it("vacuums the marks' table itself as it adopts, without waiting for PostgreSQL's autovacuum", async () => {
      const [endpoint] = await a.deploy({
        app: "vacuumed",
        env: "prod",
        manifest: manifest({ work: resource() }, "vacuumed"),
        artifactPath: join(work, "artifact.tar.gz"),
      });
      await expect.poll(async () => (await call(`${b.url}/v1/endpoints/${endpoint!.id}`, { key })).status, { timeout: 5_000 }).toBe(200);
      const db = await openPostgresStore(url, PG_MIGRATIONS);
      try {
        const vacuums = async () =>
          Number((await db.pool.query<{ n: string }>("SELECT vacuum_count AS n FROM pg_stat_user_tables WHERE relname = 'job_handoffs'")).rows[0]!.n);
        const before = await vacuums();
        for (let wave = 0; wave < 12; wave++) {
          const runs = await Promise.all(Array.from({ length: 100 }, (_, i) => call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: { i } } })));
          expect(runs.every((r) => r.status === 200)).toBe(true);
        }
        // (vacuum_count counts the VACUUMs run by a client, not autovacuum's.)
        await expect.poll(vacuums, { timeout: 10_000 }).toBeGreaterThan(before);
        await expect
          .poll(async () => Number((await db.pool.query<{ n: string }>("SELECT count(*) AS n FROM job_handoffs")).rows[0]!.n), { timeout: 10_000 })
          .toBe(0);
      } finally {
        await db.close();
      }
    }, 60_000);

    it("passes /run on to the jobs replica when handing off is turned off (SVC_HAND_OFF_JOBS=off)", async () => {
      const [endpoint] = await a.deploy({
        app: "passed",
        env: "prod",
        manifest: manifest({ work: resource() }, "passed"),
        artifactPath: join(work, "artifact.tar.gz"),
      });
      const off = await startService({ dataDir: join(work, "off"), storeUrl: url, apiKeys: [key], handOffJobs: false });
      try {
        await expect.poll(async () => (await call(`${off.url}/v1/endpoints/${endpoint!.id}`, { key })).status, { timeout: 5_000 }).toBe(200);
        // Passed on to `a`'s address, which nobody answers.
        const run = await call(`${off.url}/v2/${endpoint!.id}/run`, { key, body: { input: {} } });
        expect(run.status).toBe(503);
        expect(run.body.detail ?? run.body.title).toContain("127.0.0.1:9");
      } finally {
        await off.close();
      }
    });

    it("purges with the queue the jobs handed off just before, adopted or not", async () => {
      const [endpoint] = await a.deploy({
        app: "purge",
        env: "prod",
        manifest: manifest({ work: resource() }, "purge"),
        artifactPath: join(work, "artifact.tar.gz"),
      });
      await expect.poll(async () => (await call(`${b.url}/v1/endpoints/${endpoint!.id}`, { key })).status, { timeout: 5_000 }).toBe(200);
      const runs = await Promise.all([1, 2, 3].map((i) => call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: { i } } })));
      expect(runs.map((r) => r.status)).toEqual([200, 200, 200]);
      // At once on the jobs replica: the notice and the adoption may not have come yet.
      const purged = await call(`${a.url}/v2/${endpoint!.id}/purge-queue`, { key, method: "POST" });
      expect(purged.body).toMatchObject({ removed: 3 });
      const worker = await ProtocolWorker.mint({ service: a }, endpoint!.id);
      await worker.register();
      expect(await worker.take(3, 500)).toEqual([]);
    });

    it("queues a handed-off job cancelled before the jobs replica adopted it nowhere", async () => {
      const [endpoint] = await a.deploy({
        app: "cancel",
        env: "prod",
        manifest: manifest({ work: resource() }, "cancel"),
        artifactPath: join(work, "artifact.tar.gz"),
      });
      await expect.poll(async () => (await call(`${b.url}/v1/endpoints/${endpoint!.id}`, { key })).status, { timeout: 5_000 }).toBe(200);
      const run = await call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: {} } });
      expect(run.status).toBe(200);
      // Cancelled at once on the jobs replica, racing its adoption.
      const cancelled = await call(`${a.url}/v2/${endpoint!.id}/cancel/${run.body.id}`, { key, method: "POST" });
      expect(cancelled.body).toMatchObject({ id: run.body.id, status: "CANCELLED" });
      const worker = await ProtocolWorker.mint({ service: a }, endpoint!.id);
      await worker.register();
      expect(await worker.take(1, 1_000)).toEqual([]);
      expect(((await call(`${a.url}/v2/${endpoint!.id}/health`, { key })).body as { jobs: { inQueue: number } }).jobs.inQueue).toBe(0);
    });
  });

  it("runs nothing again when a replica takes over: the jobs it loaded when it started have run since", async () => {
    const url = await server.createDatabase();
    const a = await startService({ dataDir: join(work, "takeover-a"), storeUrl: url, apiKeys: [key] });
    let b: Service | undefined;
    try {
      const [endpoint] = await a.deploy({
        app: "takeover",
        env: "prod",
        manifest: manifest({ work: resource() }, "takeover"),
        artifactPath: join(work, "artifact.tar.gz"),
      });
      const queued = await call(`${a.url}/v2/${endpoint!.id}/run`, { key, body: { input: { once: true } } });
      expect(queued.status).toBe(200);
      // `b` starts while the job is queued, then the job runs and completes at `a`.
      b = await startService({ dataDir: join(work, "takeover-b"), storeUrl: url, apiKeys: [key] });
      const atA = await ProtocolWorker.mint({ service: a }, endpoint!.id);
      await atA.register();
      const [taken] = await atA.take(1);
      expect(taken!.id).toBe(queued.body.id);
      await atA.done([{ jobId: taken!.id, lease: taken!.lease, status: "COMPLETED", output: { ran: 1 } }]);
      await a.close();

      // `b` takes over; a worker there is given no job (the one it saw queued at its start is done).
      const atB = new ProtocolWorker(b.url, atA.workerId, atA.token);
      await expect
        .poll(async () => (await atB.post("register", { workerId: atB.workerId, pid: process.pid, concurrency: 1 })).status, { timeout: 15_000, interval: 200 })
        .toBe(200);
      expect(await atB.take(1, 1_000)).toEqual([]);
      // It does serve jobs: a new one comes.
      const next = await call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: {} } });
      const [nextTaken] = await atB.take(1, 2_000);
      expect(nextTaken!.id).toBe(next.body.id);
      expect((await call(`${b.url}/v2/${endpoint!.id}/status/${queued.body.id}`, { key })).body).toMatchObject({ status: "COMPLETED", output: { ran: 1 } });
    } finally {
      await b?.close();
      await a.close();
    }
  }, 60_000);

  it.skipIf(process.env.SVC_TEST_POSTGRES_URL !== undefined)(
    "refuses a /run on a follower with 503 while the database is down, and runs only the jobs it acknowledged, once each",
    async () => {
      // A server of its own, the test stops it; durable, or a commit just acknowledged could be lost with it.
      const own = await startPostgres({ durable: true });
      const url = await own.createDatabase();
      // `a` names an address nobody answers: what `b` answers, it answers itself.
      const a = await startService({ dataDir: join(work, "outage-a"), storeUrl: url, apiKeys: [key], replicaUrl: "http://127.0.0.1:9" });
      const b = await startService({ dataDir: join(work, "outage-b"), storeUrl: url, apiKeys: [key] });
      try {
        const [endpoint] = await a.deploy({
          app: "outage",
          env: "prod",
          manifest: manifest({ work: resource() }, "outage"),
          artifactPath: join(work, "artifact.tar.gz"),
        });
        await expect.poll(async () => (await call(`${b.url}/v1/endpoints/${endpoint!.id}`, { key })).status, { timeout: 5_000 }).toBe(200);
        const before = await call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: { tag: "before" } } });
        expect(before.status).toBe(200);

        own.kill();
        const during = await fetch(`${b.url}/v2/${endpoint!.id}/run`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ input: { tag: "during" } }),
        });
        expect(during.status).toBe(503);
        expect(during.headers.get("content-type")).toBe("application/problem+json");
        expect(((await during.json()) as { detail: string }).detail).toContain("The service's storage is unavailable");

        own.start();
        // Back: a /run through the follower is acknowledged again (retried while its connections come back).
        await expect
          .poll(async () => (await call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: { tag: "after" } } })).status, {
            timeout: 20_000,
            interval: 500,
          })
          .toBe(200);
        const worker = await ProtocolWorker.mint({ service: a }, endpoint!.id);
        await worker.register();
        const tags: string[] = [];
        for (const until = Date.now() + 15_000; Date.now() < until && !tags.includes("after"); ) {
          const jobs = await worker.take(10, 1_000);
          tags.push(...jobs.map((j) => (j.input as { tag: string }).tag));
          if (jobs.length > 0) await worker.done(jobs.map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: {} })));
        }
        tags.push(...(await worker.take(10, 500)).map((j) => (j.input as { tag: string }).tag));
        // The one acknowledged before the outage ran once; the refused one never ran.
        expect(tags.filter((t) => t === "before")).toEqual(["before"]);
        expect(tags).not.toContain("during");
        expect(tags).toContain("after");
      } finally {
        await b.close();
        await a.close();
        await own.stop();
      }
    },
    90_000,
  );
});
