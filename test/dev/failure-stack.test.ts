// The stack `svc dev` prints under a failed job's line (src/dev/failure-stack.ts), against a real service and a
// worker speaking the protocol: the worker's "failed" line comes before its result reaches the service, so the
// stack is read once the job is final, and shows even when the result comes later.

import { afterAll, beforeAll, expect, it } from "vitest";
import { JobsClient } from "svc/internal";
import { failedJobStack } from "../../src/dev/failure-stack.js";
import type { DeployedEndpoint } from "../../src/service/index.js";
import { call, manifest, ProtocolWorker, resource, startTestService, type TestService } from "../service/helpers.js";

let t: TestService;
let endpoint: DeployedEndpoint;

beforeAll(async () => {
  t = await startTestService();
  [endpoint] = await t.service.deploy({ app: "dev-stack", env: "dev", artifactPath: t.artifact, manifest: manifest({ noisy: resource() }) });
});
afterAll(async () => {
  await t?.close();
});

const STACK = [
  "RangeError: nope",
  "    at talk (src/noisy.ts:5:25)",
  "    at WorkerLoop.execute (file:///app/node_modules/svc-cli/dist/runtime/loop.js:346:50)",
  "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
].join("\n");

it("shows a failed job's stack once its result arrives, though the stack was asked for while the job still ran", async () => {
  const worker = await ProtocolWorker.mint(t, endpoint.id);
  await worker.register();
  const submitted = await call(`${endpoint.url}/run`, { key: t.key, body: { input: { fail: true } } });
  expect(submitted.status).toBe(200);
  const [job] = await worker.take();
  expect(job!.id).toBe(submitted.body.id);

  // Asked as the terminal prints the worker's line, before the worker has reported the failure.
  const stack = failedJobStack(new JobsClient(endpoint.url, t.key), job!.id, 10_000);
  await new Promise((r) => setTimeout(r, 300));
  const results = await worker.done([
    { jobId: job!.id, lease: job!.lease, status: "FAILED", error: { message: "nope", type: "RangeError", stack: STACK, retryable: false } },
  ]);
  expect(results).toEqual([{ jobId: job!.id, accepted: true }]);
  expect(await stack).toEqual(["    at talk (src/noisy.ts:5:25)"]);
});

it("shows nothing for a job that has no stack", async () => {
  const worker = await ProtocolWorker.mint(t, endpoint.id);
  await worker.register();
  const submitted = await call(`${endpoint.url}/run`, { key: t.key, body: { input: {} } });
  const [job] = await worker.take();
  await worker.done([{ jobId: job!.id, lease: job!.lease, status: "FAILED", error: { message: "no stack", retryable: false } }]);
  expect(await failedJobStack(new JobsClient(endpoint.url, t.key), submitted.body.id, 1000)).toEqual([]);
});
