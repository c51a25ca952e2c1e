// A worker the service will not have (bad or revoked token) stops with exit code 1 instead of polling forever.
import { afterAll, beforeAll, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerLogLine } from "../../src/drivers/types.js";
import { startService, type Service } from "../../src/service/index.js";
import { buildTestArtifact } from "./artifact.js";

let work: string;
let service: Service;
let driver: ReturnType<typeof createProcessDriver>;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-refused-"));
  driver = createProcessDriver({ closeGraceMs: 500, cacheDir: join(work, "cache") });
  service = await startService({ dataDir: join(work, "data"), apiKeys: ["svc_test_refused_key_0123456789"] });
});
afterAll(async () => {
  await driver?.close();
  await service.close();
  await rm(work, { recursive: true, force: true });
});

it("exits 1 when the service refuses its token", async () => {
  const artifact = await buildTestArtifact(join(work, "a.tar.gz"), { single: { workersMin: 0, workersMax: 0 } });
  const [single] = (await service.deploy({ app: "rf", env: "test", manifest: artifact.manifest, artifactPath: artifact.path })).filter(
    (e) => e.name === "single",
  );
  const lines: WorkerLogLine[] = [];
  const handle = await driver.start({
    workerId: "w-bogus",
    endpointId: single!.id,
    endpointName: "single",
    app: "rf",
    env: "test",
    artifactPath: artifact.path,
    apiUrl: service.url,
    workerToken: "svcw_not_a_real_token",
    environment: {},
    maxConcurrency: 1,
    computeType: "CPU",
    gpuTypeIds: [],
    onLog: (line) => lines.push(line),
  });
  expect(await handle.exited).toEqual({ code: 1, signal: null });
  expect(lines.map((l) => l.text).join("\n")).toMatch(/the service refused to register this worker: 401/);
});
