// Retention: the sweeper deletes expired jobs (and their stream chunks) from the store; low-priority jobs
// wait for normal ones.

import { afterAll, beforeAll, expect, it } from "vitest";
import { call, manifest, ProtocolWorker, resource, startTestService, storedCount, until, type TestService } from "./helpers.js";
import type { DeployedEndpoint } from "../../src/service/index.js";

let t: TestService;
let endpoint: DeployedEndpoint;
let worker: ProtocolWorker;

beforeAll(async () => {
  t = await startTestService({ retentionSweepMs: 100 });
  [endpoint] = await t.service.deploy({ app: "ret", env: "test", artifactPath: t.artifact, manifest: manifest({ r: resource() }) });
  worker = await ProtocolWorker.mint(t, endpoint.id);
  await worker.register();
});
afterAll(async () => {
  await t?.close();
});

async function rowsFor(id: string): Promise<{ jobs: number; chunks: number }> {
  const jobs = await storedCount(t, "SELECT COUNT(*) AS n FROM jobs WHERE id = ?", [id]);
  const chunks = await storedCount(t, "SELECT COUNT(*) AS n FROM stream_chunks WHERE job_id = ?", [id]);
  return { jobs, chunks };
}

it("deletes a job and its chunks from the file once its ttl has passed", async () => {
  const { body } = await call(`${endpoint.url}/run`, { key: t.key, body: { input: {} } });
  const [job] = await worker.take(1);
  await worker.stream(job!.id, job!.lease, [{ output: "chunk" }]);
  await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: 1 }]);
  // Kept 1.5 s from now (the /status ttl query; /run results are otherwise kept 30 minutes).
  expect((await call(`${endpoint.url}/status/${body.id}?ttl=1500`, { key: t.key })).body.status).toBe("COMPLETED");
  expect(await rowsFor(body.id)).toEqual({ jobs: 1, chunks: 1 });
  await until(async () => (await rowsFor(body.id)).jobs === 0, 5000, 50);
  expect((await rowsFor(body.id)).chunks).toBe(0);
  expect((await call(`${endpoint.url}/status/${body.id}`, { key: t.key })).status).toBe(404);
});

it("hands out low-priority jobs only when no normal job waits", async () => {
  const low = (await call(`${endpoint.url}/run`, { key: t.key, body: { input: "low", policy: { lowPriority: true } } })).body.id;
  const normal = (await call(`${endpoint.url}/run`, { key: t.key, body: { input: "normal" } })).body.id;
  const jobs = await worker.take(2);
  expect(jobs.map((j) => j.id)).toEqual([normal, low]);
  await worker.done(jobs.map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const })));
});
