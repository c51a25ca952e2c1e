// A job's execution timeout is exact: a result that comes after it, even by a few milliseconds and before the
// service's periodic check has run, ends the job TIMED_OUT (`svc run --timeout 1ms` on a 7 ms job).

import { afterAll, beforeAll, expect, it } from "vitest";
import { call, manifest, ProtocolWorker, resource, startTestService, type TestService } from "./helpers.js";

let t: TestService;
let url: string;
let worker: ProtocolWorker;

beforeAll(async () => {
  // A long lease: the service's periodic check runs every 250 ms, long after the result below comes.
  t = await startTestService({ leaseMs: 60_000, heartbeatMs: 10_000 });
  const [echo] = await t.service.deploy({ app: "demo", env: "test", manifest: manifest({ echo: resource() }), artifactPath: t.artifact });
  url = echo!.url;
  worker = await ProtocolWorker.mint(t, echo!.id);
  await worker.register();
});
afterAll(async () => {
  await t?.close();
});

it("a result that comes 10 ms into a 1 ms execution timeout ends the job TIMED_OUT, not COMPLETED", async () => {
  const { body } = await call(`${url}/run`, { key: t.key, body: { input: {}, policy: { executionTimeout: 1 } } });
  const [job] = await worker.take(1);
  expect(job!.id).toBe(body.id);
  await new Promise((r) => setTimeout(r, 10));
  const [answer] = await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "too late" }]);
  expect(answer).toMatchObject({ accepted: false, code: "job-final", status: "TIMED_OUT" });
  const record = (await call(`${url}/status/${body.id}`, { key: t.key })).body;
  expect(record.status).toBe("TIMED_OUT");
  expect(record.output).toBeUndefined();
});

it("a result within the timeout is the job's", async () => {
  const { body } = await call(`${url}/run`, { key: t.key, body: { input: {}, policy: { executionTimeout: 60_000 } } });
  const [job] = await worker.take(1);
  expect((await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "ok" }]))[0]).toMatchObject({ accepted: true });
  expect((await call(`${url}/status/${body.id}`, { key: t.key })).body).toMatchObject({ status: "COMPLETED", output: "ok" });
});
