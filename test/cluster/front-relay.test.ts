// A follower's LB front passes job reads (an endpoint's health, a job's status) on to the replica serving jobs by
// their bytes (src/service/lb/front.ts relay), instead of handing the caller's connection to node:http for good:
// a client polling status on the connection it submits on through a follower keeps its `/run`s on the front.
// Two replicas on one PostgreSQL database; raw sockets, so that which connection carries which request is what
// the test says it is.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type Service } from "../../src/service/index.js";
import { Raw } from "../lb/raw-http.js";
import { call, manifest, ProtocolWorker, resource, until } from "../service/helpers.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";

const unavailable = postgresUnavailable();
if (unavailable) console.warn(`front relay tests skipped: ${unavailable}`);

const key = "svc_test_front_relay_admin_key_0123456789";

describe.skipIf(unavailable !== undefined)("job reads through a follower's LB front", () => {
  let server: TestPostgres;
  let work: string;
  let jobs: Service;
  let follower: Service;
  let endpointId: string;

  beforeAll(async () => {
    server = await startPostgres();
    work = mkdtempSync(join(tmpdir(), "svc-front-relay-"));
    writeFileSync(join(work, "artifact.tar.gz"), "not really a tarball; the service only hashes it");
    const url = await server.createDatabase();
    jobs = await startService({ dataDir: join(work, "jobs"), storeUrl: url, apiKeys: [key] });
    follower = await startService({ dataDir: join(work, "follower"), storeUrl: url, apiKeys: [key] });
    const [endpoint] = await jobs.deploy({
      app: "relay",
      env: "prod",
      manifest: manifest({ work: resource() }, "relay"),
      artifactPath: join(work, "artifact.tar.gz"),
    });
    endpointId = endpoint!.id;
    // The follower hears of the deploy within a second (the change feed).
    await until(async () => (await call(`${follower.url}/v1/endpoints/${endpointId}`, { key })).status === 200, 5_000, 50);
  }, 60_000);

  afterAll(async () => {
    await follower?.close();
    await jobs?.close();
    await server?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const request = (method: string, path: string, body?: string) =>
    Buffer.from(
      `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${key}\r\n` +
        (body === undefined ? "\r\n" : `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`),
    );
  async function exchange(conn: Raw, bytes: Buffer) {
    conn.send(bytes);
    const answer = await conn.answer();
    return { ...answer, text: answer.body.toString("utf8") };
  }
  const stats = () => follower.lbFrontStats()!;

  it("passes health and status on to the jobs replica and keeps the connection for the next /run", async () => {
    const port = Number(new URL(follower.url).port);
    const conn = new Raw(port);
    const before = stats();
    const run = await exchange(conn, request("POST", `/v2/${endpointId}/run`, '{"input":{"n":1}}'));
    expect(run.status).toBe(200);
    const { id } = JSON.parse(run.text) as { id: string };

    const health = await exchange(conn, request("GET", `/v2/${endpointId}/health`));
    expect(health.status).toBe(200);
    expect(JSON.parse(health.text)).toHaveProperty("jobs");
    // The jobs replica's answer as it gave it: its rate-limit state, no worker named.
    expect(health.headers["ratelimit"]).toMatch(/^"minute";r=\d+;t=\d+/);
    expect(health.headers["x-svc-worker"]).toBeUndefined();
    expect(health.headers["connection"]).toBe("keep-alive");

    const queued = await exchange(conn, request("GET", `/v2/${endpointId}/status/${id}`));
    expect(queued.status).toBe(200);
    expect(JSON.parse(queued.text)).toMatchObject({ id, status: "IN_QUEUE" });

    // A worker at the jobs replica completes it; the status read through the follower shows its output.
    const worker = await ProtocolWorker.mint({ service: jobs }, endpointId);
    await worker.register();
    const [taken] = await worker.take(1, 5_000);
    expect(taken!.id).toBe(id);
    await worker.done([{ jobId: id, lease: taken!.lease, status: "COMPLETED", output: { echo: 1 } }]);
    const done = await exchange(conn, request("GET", `/v2/${endpointId}/status/${id}`));
    expect(JSON.parse(done.text)).toMatchObject({ id, status: "COMPLETED", output: { echo: 1 } });
    // The same read through node:http's forwarding (a query string is node's to read): the same record.
    const viaNode = await call(`${follower.url}/v2/${endpointId}/status/${id}?x=1`, { key });
    expect(viaNode.body).toEqual(JSON.parse(done.text));

    // An unknown job: the jobs replica's 404, passed on; the connection still stays.
    const unknown = await exchange(conn, request("GET", `/v2/${endpointId}/status/no-such-job`));
    expect(unknown.status).toBe(404);
    expect(unknown.headers["content-type"]).toBe("application/problem+json");

    const next = await exchange(conn, request("POST", `/v2/${endpointId}/run`, '{"input":{"n":2}}'));
    expect(next.status).toBe(200);
    // Every one of the six was the front's: the connection never went to node:http.
    expect(stats().served).toBe(before.served + 6);
    conn.close();
  }, 30_000);

  it("answers 503 naming the jobs replica when it does not answer, as node:http's forwarding does", async () => {
    // A follower told the replica serving jobs is at an address nobody answers (the database says who serves).
    const storeUrl = await server.createDatabase();
    const lost = await startService({ dataDir: join(work, "lost"), storeUrl, apiKeys: [key], replicaUrl: "http://127.0.0.1:9" });
    const reader = await startService({ dataDir: join(work, "reader"), storeUrl, apiKeys: [key] });
    try {
      const [endpoint] = await lost.deploy({
        app: "lost",
        env: "prod",
        manifest: manifest({ work: resource() }, "lost"),
        artifactPath: join(work, "artifact.tar.gz"),
      });
      await expect.poll(async () => (await call(`${reader.url}/v1/endpoints/${endpoint!.id}`, { key })).status, { timeout: 5_000 }).toBe(200);
      const conn = new Raw(Number(new URL(reader.url).port));
      const before = reader.lbFrontStats()!.served;
      const answer = await exchange(conn, request("GET", `/v2/${endpoint!.id}/health`));
      // Answered by the front: the connection stays there for when the jobs replica is back.
      expect(reader.lbFrontStats()!.served).toBe(before + 1);
      expect(answer.status).toBe(503);
      expect(answer.headers["content-type"]).toBe("application/problem+json");
      expect(answer.headers["retry-after"]).toBe("5");
      expect((JSON.parse(answer.text) as { detail: string }).detail).toMatch(/replica serving jobs at http:\/\/127\.0\.0\.1:9 does not answer/);
      conn.close();
    } finally {
      await reader.close();
      await lost.close();
    }
  }, 30_000);
});
