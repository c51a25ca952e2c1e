// Leases: heartbeats keep a job with its worker; a worker that stops heartbeating loses the job to another
// worker (at-least-once), and its late completion is rejected and not recorded.

import { afterAll, beforeAll, expect, it } from "vitest";
import { call, manifest, ProtocolWorker, resource, startTestService, until, type TestService } from "./helpers.js";
import type { DeployedEndpoint } from "../../src/service/index.js";

let t: TestService;
let endpoint: DeployedEndpoint;
const LEASE_MS = 400;

beforeAll(async () => {
  t = await startTestService({ leaseMs: LEASE_MS, heartbeatMs: 100 });
  [endpoint] = await t.service.deploy({ app: "lease", env: "test", artifactPath: t.artifact, manifest: manifest({ work: resource() }) });
});
afterAll(async () => {
  await t?.close();
});

it("renews leases on heartbeat; a silent worker's job is retried to completion by another; the stale result is rejected", async () => {
  const a = await ProtocolWorker.mint(t, endpoint.id);
  const b = await ProtocolWorker.mint(t, endpoint.id);
  const registered = await a.register();
  expect(registered).toMatchObject({ endpoint: { id: endpoint.id }, leaseMs: LEASE_MS, heartbeatMs: 100 });
  await b.register();
  const { body } = await call(`${endpoint.url}/run`, { key: t.key, body: { input: { task: 1 } } });
  const [job] = await a.take(1);

  // Heartbeats for three lease periods keep the job where it is.
  for (let i = 0; i < 12; i++) {
    expect(await a.heartbeat([job!.lease])).toEqual([]);
    await new Promise((r) => setTimeout(r, 100));
  }
  expect((await call(`${endpoint.url}/status/${body.id}`, { key: t.key })).body.status).toBe("IN_PROGRESS");

  // Worker a goes silent: the lease lapses and worker b gets the job.
  const [retried] = await b.take(1, 3000);
  expect(retried).toMatchObject({ id: body.id, attempt: 2, input: { task: 1 } });
  expect(retried!.lease).not.toBe(job!.lease);
  expect(await a.heartbeat([job!.lease])).toEqual([job!.lease]);
  const [stale] = await a.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "from a" }]);
  expect(stale).toEqual({ jobId: body.id, accepted: false, code: "lease-lost", reason: "lease lost" });
  expect(await a.stream(job!.id, job!.lease, [{ output: "x" }])).toMatchObject({ ok: false });
  await b.done([{ jobId: retried!.id, lease: retried!.lease, status: "COMPLETED", output: "from b" }]);
  const record = await call(`${endpoint.url}/status/${body.id}`, { key: t.key });
  expect(record.body).toMatchObject({ status: "COMPLETED", output: "from b" });
  const [late] = await a.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "from a" }]);
  expect(late!.accepted).toBe(false);
  expect((await call(`${endpoint.url}/status/${body.id}`, { key: t.key })).body.output).toBe("from b");
});

it("release hands a job back at once; drain-free events long-poll answers empty when nothing happens", async () => {
  const a = await ProtocolWorker.mint(t, endpoint.id);
  const b = await ProtocolWorker.mint(t, endpoint.id);
  await a.register();
  await b.register();
  const { body } = await call(`${endpoint.url}/run`, { key: t.key, body: { input: 2 } });
  const [job] = await a.take(1);
  const started = Date.now();
  expect((await a.post("release", { workerId: a.workerId, leases: [job!.lease] })).body).toEqual({ released: 1 });
  const [again] = await b.take(1, 3000);
  expect(again!.id).toBe(body.id);
  expect(Date.now() - started).toBeLessThan(LEASE_MS);
  await b.done([{ jobId: again!.id, lease: again!.lease, status: "COMPLETED", output: 2 }]);
  const quiet = Date.now();
  expect(await a.events(300)).toEqual({ cancel: [], drain: false });
  expect(Date.now() - quiet).toBeGreaterThanOrEqual(250);
  await until(async () => (await call(`${endpoint.url}/status/${body.id}`, { key: t.key })).body.status === "COMPLETED");
});

it("a take long-poll the worker hung up on gets no job: the next worker takes it at once", async () => {
  const a = await ProtocolWorker.mint(t, endpoint.id);
  const b = await ProtocolWorker.mint(t, endpoint.id);
  await a.register();
  await b.register();
  const hangUp = new AbortController();
  const abandoned = fetch(`${t.service.url}/_worker/v1/take`, {
    method: "POST",
    headers: { authorization: `Bearer ${a.token}`, "content-type": "application/json" },
    body: JSON.stringify({ workerId: a.workerId, max: 1, waitMs: 10_000 }),
    signal: hangUp.signal,
  }).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 100));
  hangUp.abort();
  await abandoned;
  await new Promise((r) => setTimeout(r, 50));
  const { body } = await call(`${endpoint.url}/run`, { key: t.key, body: { input: 3 } });
  const started = Date.now();
  const [job] = await b.take(1, 3000);
  expect(job!.id).toBe(body.id);
  expect(job!.attempt).toBe(1);
  expect(Date.now() - started).toBeLessThan(LEASE_MS);
  await b.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: 3 }]);
});

it("a take may carry results: they are recorded (stale ones refused) and answered beside the next jobs", async () => {
  const a = await ProtocolWorker.mint(t, endpoint.id);
  expect(await a.register()).toMatchObject({ takeResults: true });
  const first = (await call(`${endpoint.url}/run`, { key: t.key, body: { input: "first" } })).body;
  const [job] = await a.take(1);
  const second = (await call(`${endpoint.url}/run`, { key: t.key, body: { input: "second" } })).body;
  const result = { jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "done first" };
  const answer = await a.post("take", { workerId: a.workerId, max: 1, waitMs: 2000, results: [result] });
  expect(answer.status).toBe(200);
  expect(answer.body.results).toEqual([{ jobId: first.id, accepted: true }]);
  expect(answer.body.jobs).toMatchObject([{ id: second.id, input: "second" }]);
  expect((await call(`${endpoint.url}/status/${first.id}`, { key: t.key })).body).toMatchObject({ status: "COMPLETED", output: "done first" });
  // The same results again (a retried request): refused as recorded; a malformed list is a 422 and takes nothing.
  const next = answer.body.jobs[0];
  const again = await a.post("take", {
    workerId: a.workerId,
    max: 1,
    waitMs: 0,
    results: [result, { jobId: next.id, lease: next.lease, status: "COMPLETED", output: 2 }],
  });
  expect(again.body).toEqual({
    jobs: [],
    results: [
      { jobId: first.id, accepted: false, code: "job-final", status: "COMPLETED", reason: "job is COMPLETED" },
      { jobId: second.id, accepted: true },
    ],
  });
  const bad = await a.post("take", { workerId: a.workerId, max: 1, results: [{ jobId: 1 }] });
  expect(bad.status).toBe(422);
  expect(bad.body.errors).toContain("$.results[0].jobId: is required");
});
