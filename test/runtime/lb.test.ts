// A load-balanced endpoint's worker: registers with the real service, serves the endpoint's routes and /ping
// over HTTP itself, and drains on SIGTERM.
import { afterAll, beforeAll, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerLogLine } from "../../src/drivers/types.js";
import { startService, type Service } from "../../src/service/index.js";
import { buildTestArtifact } from "./artifact.js";
import { lbCredentialOfToken } from "../../src/lb-credential.js";

let work: string;
let service: Service;
let driver: ReturnType<typeof createProcessDriver>;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-lb-"));
  driver = createProcessDriver({ closeGraceMs: 500, cacheDir: join(work, "cache") });
  service = await startService({ dataDir: join(work, "data"), apiKeys: ["svc_test_lb_key_0123456789"] });
});
afterAll(async () => {
  await driver?.close();
  await service?.close();
  await rm(work, { recursive: true, force: true });
});

it("serves the endpoint's routes and /ping, then drains on SIGTERM", async () => {
  const artifact = await buildTestArtifact(join(work, "a.tar.gz"), { api: { workersMin: 0, workersMax: 0 } });
  const deployed = await service.deploy({ app: "lb", env: "test", manifest: artifact.manifest, artifactPath: artifact.path });
  const api = deployed.find((e) => e.name === "api")!;
  expect(api.type).toBe("lb");
  const worker = await service.mintKey({ scopes: [`worker:${api.id}`] });
  const lines: WorkerLogLine[] = [];
  const handle = await driver.start({
    workerId: worker.id,
    endpointId: api.id,
    endpointName: "api",
    app: "lb",
    env: "test",
    artifactPath: artifact.path,
    apiUrl: service.url,
    workerToken: worker.key,
    environment: {},
    maxConcurrency: 1,
    computeType: "CPU",
    gpuTypeIds: [],
    onLog: (line) => lines.push(line),
  });
  let address: string | undefined;
  for (let i = 0; i < 200 && !address; i++) {
    address = lines.map((l) => /serving 3 route\(s\) and \/ping at (http:\/\/\S+)/.exec(l.text)?.[1]).find(Boolean);
    if (!address) await new Promise((r) => setTimeout(r, 50));
  }
  expect(address).toBeDefined();

  // Straight to its port, as only the service's proxy may: with the credential derived from its token.
  const credential = { "x-svc-lb-credential": lbCredentialOfToken(worker.key) };
  expect((await fetch(`${address}/ping`)).status).toBe(401);
  expect(await (await fetch(`${address}/ping`, { headers: credential })).json()).toEqual({ status: "healthy" });
  const posted = await fetch(`${address}/process`, { method: "POST", headers: { "content-type": "application/json", ...credential }, body: '{"n":7}' });
  expect(await posted.json()).toEqual({ ok: true, got: { n: 7 } });
  expect(await (await fetch(`${address}/items/abc?q=1`, { headers: credential })).json()).toMatchObject({ id: "abc", q: "1" });
  const boom = await fetch(`${address}/boom`, { headers: credential });
  expect([boom.status, ((await boom.json()) as { detail: string }).detail]).toEqual([500, "kaput"]);

  expect(await handle.stop(5000)).toEqual({ code: 0, signal: null });
  await expect(fetch(`${address}/ping`, { headers: credential })).rejects.toThrow();
});
