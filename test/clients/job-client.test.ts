// The job API's official JS client (runpod-sdk) against the real service, unchanged but for its base URL: every
// method, webhookV2 included, on examples/hello built and run by real process workers.

import runpodSdk from "runpod-sdk";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startApp, type LiveApp } from "../lb/harness.js";
import { until, webhookReceiver } from "../service/helpers.js";

let app: LiveApp;
let hello: ReturnType<ReturnType<typeof runpodSdk>["endpoint"]>;
let countdown: typeof hello;

beforeAll(async () => {
  // The webhook receiver listens on 127.0.0.1, which webhooks reach only when the operator allows it.
  app = await startApp("examples/hello", { service: { webhooks: { allow: ["127.0.0.1/32"] } } });
  const sdk = runpodSdk(app.key, { baseUrl: `${app.service.url}/v2` });
  hello = sdk.endpoint(app.endpoints.find((e) => e.name === "hello")!.id);
  countdown = sdk.endpoint(app.endpoints.find((e) => e.name === "countdown")!.id);
}, 120_000);
afterAll(async () => {
  await app?.close();
});

it("runSync, run with webhookV2, status, statusSync", async () => {
  const sync = await hello!.runSync({ input: { name: "Ada" } }, 60_000);
  expect(sync).toMatchObject({ status: "COMPLETED", output: { greeting: "Hello, Ada!" }, completed: true, succeeded: true });

  const hook = await webhookReceiver();
  const received = hook.received;
  try {
    const webhookV2 = hook.url;
    const queued = await hello!.run({ input: { name: "Grace" }, webhookV2, policy: { ttl: 600_000, executionTimeout: 60_000 } });
    expect(queued).toMatchObject({ id: expect.any(String), status: "IN_QUEUE" });
    const done = await hello!.statusSync(queued.id, 60_000);
    expect(done).toMatchObject({ id: queued.id, status: "COMPLETED", output: { greeting: "Hello, Grace!" }, completed: true });
    expect(await hello!.status(queued.id)).toMatchObject({ status: "COMPLETED", started: true, succeeded: true });
    await until(() => received.length > 0, 10_000);
    expect(received[0]).toMatchObject({ id: queued.id, status: "COMPLETED", output: { greeting: "Hello, Grace!" } });
  } finally {
    await hook.close();
  }
}, 90_000);

it("stream, cancel, health and purgeQueue", async () => {
  const job = await countdown!.run({ input: { from: 3 } });
  const chunks: unknown[] = [];
  for await (const chunk of countdown!.stream(job.id)) chunks.push(chunk);
  expect(chunks).toEqual([{ output: { n: 3 } }, { output: { n: 2 } }, { output: { n: 1 } }, { output: { n: 0 } }]);

  const long = await countdown!.run({ input: { from: 200 } });
  const cancelled = await countdown!.cancel(long.id);
  expect(cancelled).toMatchObject({ id: long.id, status: "CANCELLED" });

  const health = await hello!.health();
  // The fields the client's HealthCheck type names are all there.
  expect(Object.keys(health.workers).sort()).toEqual(expect.arrayContaining(["idle", "initializing", "ready", "running", "throttled"]));
  expect(health.jobs).toMatchObject({ completed: expect.any(Number), failed: 0, inProgress: expect.any(Number), inQueue: expect.any(Number), retried: 0 });

  const purged = await countdown!.purgeQueue();
  expect(purged).toMatchObject({ removed: expect.any(Number), status: "completed" });
}, 90_000);
