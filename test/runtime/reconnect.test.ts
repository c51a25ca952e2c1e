// A worker outlives a crash of its service: while the service is gone it retries with backoff (it does not
// crash or exit), and when the service comes back on the same address and data it serves jobs again. The
// service runs in its own process so it can be SIGKILLed; the worker is started through the process driver.
import { afterAll, beforeAll, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerLogLine } from "../../src/drivers/types.js";
import { JobsClient } from "svc/internal";
import { buildTestArtifact, REPO } from "./artifact.js";

const KEY = "svc_test_reconnect_key_0123456789";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let work: string;
const services: ChildProcess[] = [];
let driver: ReturnType<typeof createProcessDriver>;

interface Started {
  url: string;
  port: number;
  endpointId?: string;
  workerId?: string;
  workerToken?: string;
}
async function startServiceProcess(args: string[]): Promise<Started> {
  const child = spawn(process.execPath, [join(REPO, "fixtures/runtime-stubborn/service.mjs"), ...args], { stdio: ["ignore", "pipe", "inherit"] });
  services.push(child);
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`service exited with ${code}`)));
  });
  return JSON.parse(line) as Started;
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-reconnect-"));
  driver = createProcessDriver({ closeGraceMs: 500, cacheDir: join(work, "cache") });
});
afterAll(async () => {
  await driver?.close();
  for (const s of services) if (s.exitCode === null && s.signalCode === null) s.kill("SIGKILL");
  await rm(work, { recursive: true, force: true });
});

it("keeps retrying while the service is gone and serves again once it is back", async () => {
  const artifact = await buildTestArtifact(join(work, "a.tar.gz"), { single: { workersMin: 0, workersMax: 0 } });
  const manifestPath = join(work, "manifest.json");
  await writeFile(manifestPath, JSON.stringify(artifact.manifest));
  const dataDir = join(work, "data");
  const first = await startServiceProcess([dataDir, "0", KEY, artifact.path, manifestPath]);

  const lines: WorkerLogLine[] = [];
  const handle = await driver.start({
    workerId: first.workerId!,
    endpointId: first.endpointId!,
    endpointName: "single",
    app: "rc",
    env: "test",
    artifactPath: artifact.path,
    apiUrl: first.url,
    workerToken: first.workerToken!,
    environment: {},
    maxConcurrency: 1,
    computeType: "CPU",
    gpuTypeIds: [],
    onLog: (line) => lines.push(line),
  });
  let exited = false;
  void handle.exited.then(() => (exited = true));
  const jobs = new JobsClient(`${first.url}/v2/${first.endpointId}`, KEY);
  expect(await jobs.runsync({ n: 1 }, { wait: 20_000 })).toMatchObject({ status: "COMPLETED", output: { echo: { n: 1 } } });

  services[0]!.kill("SIGKILL");
  await sleep(2500);
  expect(exited).toBe(false);

  await startServiceProcess([dataDir, String(first.port), KEY]);
  const record = await jobs.runsync({ n: 2 }, { wait: 30_000 });
  if (record.status !== "COMPLETED") console.error(lines.map((l) => l.text).join("\n"));
  expect(record).toMatchObject({ status: "COMPLETED", output: { echo: { n: 2 } } });
  expect(exited).toBe(false);
});
