// The job API's official JS client (runpod-sdk), unchanged but for its base URL, against an endpoint whose worker
// speaks the provider's worker protocol (the standard-library worker of fixtures/provider-worker, run as a child
// process): what a user of the provider's workers calls them with works the same on svc.

import runpodSdk from "runpod-sdk";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import type { DeployedEndpoint } from "../../src/service/index.js";
import { manifest, resource, startTestService, until, type TestService } from "../service/helpers.js";
import { startProviderWorker, type ProviderWorkerProcess } from "../service/provider-worker-process.js";

let t: TestService;
let endpoint: DeployedEndpoint;
let client: ReturnType<ReturnType<typeof runpodSdk>["endpoint"]>;
const workers: ProviderWorkerProcess[] = [];

beforeAll(async () => {
  t = await startTestService({ leaseMs: 2500, heartbeatMs: 1000 });
  [endpoint] = (await t.service.deploy({
    app: "provider-client",
    env: "test",
    artifactPath: t.artifact,
    manifest: manifest({ work: resource({ retries: 0, maxConcurrency: 2 }) }),
  })) as [DeployedEndpoint];
  client = runpodSdk(t.key, { baseUrl: `${t.service.url}/v2` }).endpoint(endpoint.id)!;
  workers.push(await startProviderWorker(t, endpoint.id, { concurrency: 2 }));
});
afterEach(() => {
  for (const worker of workers.splice(1)) worker.kill();
});
afterAll(async () => {
  for (const worker of workers) worker.kill();
  await t?.close();
});

it("runSync, and run then statusSync, answer the handler's output", async () => {
  const sync = await client.runSync({ input: { mode: "echo", value: "hello" } }, 30_000);
  expect(sync).toMatchObject({ status: "COMPLETED", output: { value: "hello", worker: workers[0]!.id }, completed: true, succeeded: true });
  const queued = await client.run({ input: { mode: "echo", value: 7 } });
  expect(queued).toMatchObject({ id: expect.any(String), status: "IN_QUEUE" });
  expect(await client.statusSync(queued.id, 30_000)).toMatchObject({ id: queued.id, status: "COMPLETED", output: { value: 7 } });
});

it("a handler's exception reaches the client as a failed job with the SDK's error report", async () => {
  const sync = await client.runSync({ input: { mode: "error", message: "bad prompt" } }, 30_000);
  expect(sync).toMatchObject({ status: "FAILED", completed: true, succeeded: false });
  expect(JSON.stringify((sync as { error?: unknown }).error)).toContain("bad prompt");
});

it("stream yields a generator's values in order", async () => {
  const chunks = ["a", "b", "c", "d"];
  const job = await client.run({ input: { mode: "stream", chunks, pause: 0.05 } });
  const seen: unknown[] = [];
  for await (const chunk of client.stream(job.id)) seen.push(chunk);
  expect(seen).toEqual(chunks.map((output) => ({ output })));
});

it("cancel of a running job reaches the worker, and health counts the worker and the jobs", async () => {
  const job = await client.run({ input: { mode: "sleep", seconds: 30 } });
  await until(() => workers[0]!.lines.some((l) => l.startsWith("taken ") && l.includes(job.id)), 15_000);
  expect(await client.cancel(job.id)).toMatchObject({ id: job.id, status: "CANCELLED" });
  await workers[0]!.line(`stopped ${job.id}`);
  const health = await client.health();
  expect(health.workers.idle + health.workers.running).toBeGreaterThanOrEqual(1);
  expect(health.jobs).toMatchObject({ completed: expect.any(Number), failed: expect.any(Number), inQueue: 0 });
});
