// Two `svc` services on one PostgreSQL database (replicas): what one changes is in force on the other within a
// second — a deploy and an endpoint's deletion, a template, a secret, a key's revocation — and a user's rate
// limit is one quota across both.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type Service } from "../../src/service/index.js";
import { call, manifest, ProtocolWorker, resource } from "../service/helpers.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";

const unavailable = postgresUnavailable();
if (unavailable) console.warn(`replica tests skipped: ${unavailable}`);

/** How long a change on one replica may take to be in force on another. */
const IN_FORCE_MS = 1_000;

async function within<T>(ms: number, probe: () => Promise<T | undefined | false>): Promise<{ value: T; afterMs: number }> {
  const start = Date.now();
  for (;;) {
    const value = await probe();
    if (value) return { value, afterMs: Date.now() - start };
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.skipIf(unavailable !== undefined)("replicas on one database", () => {
  const key = "svc_test_replicas_admin_key_0123456789";
  let server: TestPostgres;
  let work: string;
  let a: Service;
  let b: Service;
  let url: string;
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase();
    work = mkdtempSync(join(tmpdir(), "svc-replicas-"));
    a = await startService({ dataDir: join(work, "a"), storeUrl: url, apiKeys: [key] });
    b = await startService({ dataDir: join(work, "b"), storeUrl: url, apiKeys: [key] });
    (await import("node:fs")).writeFileSync(join(work, "artifact.tar.gz"), "not really a tarball; the service only hashes it");
  });
  afterAll(async () => {
    await a?.close().catch(() => undefined /* closed by the failover test */);
    await b?.close();
    await server?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("serves on one replica an endpoint deployed through the other, and forgets it when deleted there", async () => {
    const artifact = join(work, "artifact.tar.gz");
    const [endpoint] = await a.deploy({ app: "shop", env: "prod", manifest: manifest({ api: resource() }, "shop"), artifactPath: artifact });
    const seen = await within(IN_FORCE_MS, async () => (await call(`${b.url}/v1/endpoints/${endpoint!.id}`, { key })).status === 200);
    expect(seen.afterMs).toBeLessThanOrEqual(IN_FORCE_MS);

    expect((await call(`${a.url}/v1/apps/shop`, { key, method: "DELETE" })).status).toBeLessThan(300);
    await within(IN_FORCE_MS, async () => (await call(`${b.url}/v1/endpoints/${endpoint!.id}`, { key })).status === 404);
  });

  it("lists on one replica the template and secret created through the other", async () => {
    const template = await call(`${a.url}/v1/templates`, { key, body: { name: "t1", imageName: "busybox:latest" } });
    expect(template.status).toBe(201);
    await within(IN_FORCE_MS, async () =>
      ((await call(`${b.url}/v1/templates`, { key })).body as Array<{ id: string }>).some((t) => t.id === template.body.id),
    );
    expect((await call(`${a.url}/v1/secrets/API_TOKEN`, { key, method: "PUT", body: { value: "s3cret" } })).status).toBeLessThan(300);
    await within(IN_FORCE_MS, async () => JSON.stringify((await call(`${b.url}/v1/secrets`, { key })).body).includes("API_TOKEN"));
  });

  it("refuses on one replica a key revoked through the other", async () => {
    const minted = await call(`${a.url}/v1/keys`, { key, body: { scopes: ["admin"] } });
    expect(minted.status).toBe(201);
    expect((await call(`${b.url}/v1/endpoints`, { key: minted.body.key })).status).toBe(200);
    expect((await call(`${a.url}/v1/keys/${minted.body.id}`, { key, method: "DELETE" })).status).toBeLessThan(300);
    const refused = await within(IN_FORCE_MS, async () => (await call(`${b.url}/v1/endpoints`, { key: minted.body.key })).status === 401);
    expect(refused.afterMs).toBeLessThanOrEqual(IN_FORCE_MS);
  });

  it("passes job traffic that reaches another replica to the one serving jobs: jobs submitted and worked through it complete", async () => {
    // `a` started first and serves the jobs; `b` passes job routes to it.
    const artifact = join(work, "artifact.tar.gz");
    const [endpoint] = await a.deploy({ app: "jobs", env: "prod", manifest: manifest({ work: resource() }, "jobs"), artifactPath: artifact });
    // One worker, seen through either replica: each step talks to one side only and needs the other, so it works
    // only when `b` passes its job traffic on.
    const throughB = await ProtocolWorker.mint({ service: b }, endpoint!.id);
    const throughA = new ProtocolWorker(a.url, throughB.workerId, throughB.token);
    await throughA.register();
    // Submitted through `b`, taken from `a`, read through `b`.
    const run = await call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: { x: 1 } } });
    expect(run.status).toBe(200);
    const [job] = await throughA.take(1);
    expect(job!.id).toBe(run.body.id);
    await throughA.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: { y: 2 } }]);
    expect((await call(`${b.url}/v2/${endpoint!.id}/status/${run.body.id}`, { key })).body).toMatchObject({ status: "COMPLETED", output: { y: 2 } });
    // A /runsync waiting on `b` while the worker takes and reports at `a`.
    const waiting = call(`${b.url}/v2/${endpoint!.id}/runsync`, { key, body: { input: { x: 3 } } });
    const [second] = await throughA.take(1, 5_000);
    await throughA.done([{ jobId: second!.id, lease: second!.lease, status: "COMPLETED", output: { y: 4 } }]);
    expect((await waiting).body).toMatchObject({ status: "COMPLETED", output: { y: 4 } });
    // Submitted at `a`, taken and reported through `b`.
    const third = await call(`${a.url}/v2/${endpoint!.id}/run`, { key, body: { input: { x: 5 } } });
    const [taken] = await throughB.take(1);
    expect(taken!.id).toBe(third.body.id);
    await throughB.done([{ jobId: taken!.id, lease: taken!.lease, status: "COMPLETED", output: { y: 6 } }]);
    expect((await call(`${a.url}/v2/${endpoint!.id}/status/${third.body.id}`, { key })).body).toMatchObject({ status: "COMPLETED", output: { y: 6 } });
    // Management stays on every replica.
    expect((await call(`${b.url}/v2/network-volumes`, { key })).status).toBe(200);
  });

  it("names the replica serving jobs to a worker whose call it passes on, and to nobody else", async () => {
    const [endpoint] = await a.deploy({
      app: "direct",
      env: "prod",
      manifest: manifest({ work: resource() }, "direct"),
      artifactPath: join(work, "artifact.tar.gz"),
    });
    const worker = await ProtocolWorker.mint({ service: b }, endpoint!.id);
    const registered = await worker.post("register", { workerId: worker.workerId, pid: process.pid, concurrency: 1 });
    expect(registered.status).toBe(200);
    expect(registered.headers.get("svc-jobs-replica")).toBe(a.url);
    // The worker's runtime then talks to `a` straight: its calls there work (and are not named again).
    const direct = new ProtocolWorker(a.url, worker.workerId, worker.token);
    const taken = await direct.post("take", { workerId: worker.workerId, max: 1, waitMs: 0 });
    expect(taken.status).toBe(200);
    expect(taken.headers.get("svc-jobs-replica")).toBeNull();
    // A client's job route passed on is not named: clients keep the address they were given.
    const run = await call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: {} } });
    expect(run.status).toBe(200);
    expect(run.headers.get("svc-jobs-replica")).toBeNull();

    // A replica told that workers reach replicas only through the cluster address names nobody.
    const quiet = await startService({ dataDir: join(work, "quiet"), storeUrl: url, apiKeys: [key], workersDirect: false });
    try {
      const throughQuiet = new ProtocolWorker(quiet.url, worker.workerId, worker.token);
      const answer = await throughQuiet.post("take", { workerId: worker.workerId, max: 1, waitMs: 0 });
      expect(answer.status).toBe(200);
      expect(answer.headers.get("svc-jobs-replica")).toBeNull();
    } finally {
      await quiet.close();
    }
  });

  it("takes over the jobs when the replica serving them goes away: a job acknowledged before is worked through a follower after", async () => {
    // `a` serves jobs; `e` waits as a follower too. A job is acknowledged through `b` and waits in the queue.
    const e = await startService({ dataDir: join(work, "e"), storeUrl: url, apiKeys: [key] });
    try {
      const [endpoint] = await a.deploy({
        app: "failover",
        env: "prod",
        manifest: manifest({ work: resource() }, "failover"),
        artifactPath: join(work, "artifact.tar.gz"),
      });
      const queued = await call(`${b.url}/v2/${endpoint!.id}/run`, { key, body: { input: { before: true } } });
      expect(queued.status).toBe(200);
      await a.close();
      // One of the followers takes the lease (at its next attempt), loads the queue from the database, and the
      // other one passes job traffic to it.
      const worker = await ProtocolWorker.mint({ service: b }, endpoint!.id);
      const taken = await within(15_000, async () => {
        if ((await worker.post("register", { workerId: worker.workerId, pid: process.pid, concurrency: 1 })).status !== 200) return undefined;
        const r = await worker.post("take", { workerId: worker.workerId, max: 1, waitMs: 500 });
        return r.status === 200 && r.body.jobs?.length > 0 ? r.body.jobs : undefined;
      });
      expect(taken.value[0].id).toBe(queued.body.id);
      await worker.done([{ jobId: taken.value[0].id, lease: taken.value[0].lease, status: "COMPLETED", output: { after: true } }]);
      expect((await call(`${b.url}/v2/${endpoint!.id}/status/${queued.body.id}`, { key })).body).toMatchObject({
        status: "COMPLETED",
        output: { after: true },
      });
    } finally {
      await e.close();
    }
  }, 60_000);

  it("counts a user's requests on both replicas against one quota", async () => {
    // A pair of its own, with a small quota.
    const quotaUrl = await server.createDatabase();
    const rateLimits = [{ name: "minute", seconds: 60, quota: 40 }];
    const c = await startService({ dataDir: join(work, "c"), storeUrl: quotaUrl, apiKeys: [key], rateLimits });
    const d = await startService({ dataDir: join(work, "d"), storeUrl: quotaUrl, apiKeys: [key], rateLimits });
    let admitted = 0;
    for (let i = 0; i < 80; i++) {
      const r = await call(`${(i % 2 ? c : d).url}/v1/endpoints`, { key });
      if (r.status === 200) admitted++;
      else expect(r.status).toBe(429);
      // About the pace of a client; the replicas sync every 250 ms.
      await new Promise((r) => setTimeout(r, 15));
    }
    // Each replica alone would admit 40 (80 in all); one quota admits 40 and what a sync period lets slip.
    expect(admitted).toBeGreaterThanOrEqual(40);
    expect(admitted).toBeLessThanOrEqual(50);
    await c.close();
    await d.close();
  });
});
