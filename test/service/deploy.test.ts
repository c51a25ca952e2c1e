// Deploy: stable endpoint ids across redeploys and restarts, endpoints dropped from the manifest deleted with
// their jobs and logs, queued jobs and counters kept over a clean restart.

import { afterAll, expect, it } from "vitest";
import { join } from "node:path";
import { startService } from "../../src/service/index.js";
import { call, manifest, ProtocolWorker, resource, startTestService, type TestService } from "./helpers.js";

let t: TestService | undefined;
afterAll(async () => {
  await t?.close();
});

it("keeps ids stable, deletes dropped endpoints with their jobs and logs, and keeps queued jobs over a restart", async () => {
  t = await startTestService();
  const deploy = (service: TestService["service"], names: string[]) =>
    service.deploy({ app: "shop", env: "prod", artifactPath: t!.artifact, manifest: manifest(Object.fromEntries(names.map((n) => [n, resource()])), "shop") });
  const [a, b] = await deploy(t.service, ["a", "b"]);
  expect(a!.url).toBe(`${t.service.url}/v2/${a!.id}`);
  const queuedOnA = (await call(`${a!.url}/run`, { key: t.key, body: { input: "kept" } })).body.id;
  const jobOnB = (await call(`${b!.url}/run`, { key: t.key, body: { input: "gone" } })).body.id;
  const wb = await ProtocolWorker.mint(t, b!.id);
  await wb.post("log", { lines: [{ ts: Date.now(), stream: "stdout", text: "b was here" }] });
  expect((await call(`${t.service.url}/v1/endpoints/${b!.id}/logs`, { key: t.key })).body.lines).toHaveLength(1);

  const [again] = await deploy(t.service, ["a"]);
  expect(again!.id).toBe(a!.id);
  expect((await call(`${b!.url}/health`, { key: t.key })).status).toBe(404);
  expect((await call(`${b!.url}/status/${jobOnB}`, { key: t.key })).status).toBe(404);
  expect((await call(`${t.service.url}/v1/endpoints/${b!.id}/logs`, { key: t.key })).status).toBe(404);
  expect((await call(`${t.service.url}/v1/apps/shop/environments/prod`, { key: t.key })).body.endpoints.map((e: { name: string }) => e.name)).toEqual(["a"]);
  expect((await wb.post("take", {})).status).toBe(404);

  // A clean restart on the same data dir: same endpoint, the queued job still queued.
  await t.service.close();
  const restarted = await startService({ dataDir: join(t.dir, "data"), storeUrl: t.storeUrl, apiKeys: [t.key], leaseMs: 600 });
  t.service = restarted;
  const state = await call(`${restarted.url}/v1/apps/shop/environments/prod`, { key: t.key });
  expect(state.body.endpoints[0].id).toBe(a!.id);
  const url = state.body.endpoints[0].url;
  expect((await call(`${url}/status/${queuedOnA}`, { key: t.key })).body.status).toBe("IN_QUEUE");
  expect((await call(`${url}/health`, { key: t.key })).body.jobs.inQueue).toBe(1);
  const w = await ProtocolWorker.mint({ service: restarted }, a!.id);
  const [job] = await w.take(1);
  expect(job).toMatchObject({ id: queuedOnA, input: "kept" });
  const [redeployed] = await deploy(restarted, ["a"]);
  expect(redeployed!.id).toBe(a!.id);
});
