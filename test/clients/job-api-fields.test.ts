// What the job API's official clients send and read, against a real service with a protocol worker: webhookV2
// (delivered like webhook), s3Config (accepted when its bucket is one of the owner's volumes, 422 otherwise), an
// unknown member (422), the health fields their types name
// (workers.ready and workers.throttled beside svc's own), and one endpoint list holding deployed endpoints too.

import { afterAll, beforeAll, expect, it } from "vitest";
import { call, manifest, ProtocolWorker, resource, startTestService, until, webhookReceiver, type TestService } from "../service/helpers.js";

let t: TestService;
let echo: { id: string; url: string };
let worker: ProtocolWorker;

beforeAll(async () => {
  // The webhook receiver listens on 127.0.0.1, which webhooks reach only when the operator allows it.
  t = await startTestService({ webhooks: { allow: ["127.0.0.1/32"] } });
  [echo] = (await t.service.deploy({
    app: "clients",
    env: "test",
    artifactPath: t.artifact,
    manifest: manifest({ echo: resource({ workersMax: 1 }) }),
  })) as Array<{ id: string; url: string }>;
  worker = await ProtocolWorker.mint(t, echo.id);
  await worker.register();
});
afterAll(async () => {
  await t?.close();
});

it("delivers the job record to webhookV2, accepts an s3Config on one's own volume, and refuses an unknown member or two different webhooks", async () => {
  const hook = await webhookReceiver();
  const received = hook.received;
  try {
    const webhookV2 = hook.url;
    const volume = (await call(`${t.service.url}/v2/network-volumes`, { key: t.key, body: { name: "outputs", size: 10, dataCenter: "local" } })).body;
    const s3Config = { accessId: "a", accessSecret: "s", bucketName: volume.id, endpointUrl: `${t.service.url}/s3` };
    const elsewhere = await call(`${echo.url}/run`, { key: t.key, body: { input: {}, s3Config: { ...s3Config, bucketName: "my-aws-bucket" } } });
    expect(elsewhere.status).toBe(422);
    expect(elsewhere.body.errors[0]).toMatch(/^\$\.s3Config\.bucketName: "my-aws-bucket" is not one of your network volumes/);
    const { status, body } = await call(`${echo.url}/run`, { key: t.key, body: { input: { n: 1 }, webhookV2, s3Config, policy: { ttl: 60_000 } } });
    expect(status).toBe(200);
    const [job] = await worker.take(1);
    await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: { ok: 1 } }]);
    await until(() => received.length > 0, 5000);
    expect(received[0]).toMatchObject({ id: body.id, status: "COMPLETED", output: { ok: 1 } });

    const typo = await call(`${echo.url}/run`, { key: t.key, body: { input: {}, webhok: webhookV2 } });
    expect(typo.status).toBe(422);
    expect(typo.body.errors).toEqual(["$.webhok: unknown property"]);
    const two = await call(`${echo.url}/run`, { key: t.key, body: { input: {}, webhook: "http://127.0.0.1:1/a", webhookV2: "http://127.0.0.1:1/b" } });
    expect(two.status).toBe(422);
    expect(two.body.errors).toEqual(["$.webhookV2: names another URL than webhook; send one of them"]);
    expect((await call(`${echo.url}/run`, { key: t.key, body: { input: {}, webhookV2: "ftp://x" } })).body.errors).toEqual([
      "$.webhookV2: must be an http(s) URL",
    ]);
  } finally {
    await hook.close();
  }
});

it("/health has workers.ready and workers.throttled beside idle, running and initializing", async () => {
  for (let i = 0; i < 3; i++) await call(`${echo.url}/run`, { key: t.key, body: { input: { i } } });
  const [job] = await worker.take(1);
  const { body } = await call(`${echo.url}/health`, { key: t.key });
  // One worker (workersMax 1) runs one job, two wait: the queue calls for 3 workers, 2 beyond the maximum.
  expect(body.workers).toMatchObject({ running: 1, idle: 0, ready: 1, throttled: 2 });
  expect(body.jobs).toMatchObject({ inQueue: 2, inProgress: 1 });
  await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: 1 }]);
  await call(`${echo.url}/purge-queue`, { key: t.key, method: "POST" });
});

it("GET /v1/endpoints lists the endpoints svc deploy made, with app, environment and type", async () => {
  const { status, body } = await call(`${t.service.url}/v1/endpoints`, { key: t.key });
  expect(status).toBe(200);
  expect(body).toContainEqual(
    expect.objectContaining({
      id: echo.id,
      name: "echo",
      source: "deploy",
      app: "clients",
      environment: "test",
      type: "queue",
      url: echo.url,
      workersMax: 1,
      status: "READY",
    }),
  );
});
