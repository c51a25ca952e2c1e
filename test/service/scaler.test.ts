// Scaling with real workers: a real build (esbuild) of fixtures/service-app, the process driver, the worker
// runtime from dist/ (compile first). From zero on the first job (a cold start), back to zero when idle,
// a crashed worker replaced and its job run again, a redeploy replacing workers without losing queued jobs.

import { afterAll, beforeAll, expect, it } from "vitest";
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject, type BuildResult } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call, until } from "./helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "scaler-admin-key";
let dir: string;
let service: Service;
let build: BuildResult;
let greeter: DeployedEndpoint;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-scaler-test-"));
  cpSync(join(repo, "fixtures", "service-app"), join(dir, "app"), { recursive: true });
  build = await buildProject(join(dir, "app"));
  service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [KEY],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
  });
  [greeter] = await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath });
});
afterAll(async () => {
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const health = async () => (await call(`${greeter.url}/health`, { key: KEY })).body;
const liveWorkers = (h: { workers: Record<string, number> }) => h.workers.idle! + h.workers.running! + h.workers.initializing!;

it("scales from zero on the first job (a cold start), runs it, keeps its logs, and scales back to zero", async () => {
  // The deploy proved the code starts with one worker (docs/deploy.md, Releases); it idles out after 1 s.
  await until(async () => liveWorkers(await health()) === 0, 15_000, 100);
  const r = await call(`${greeter.url}/runsync`, { key: KEY, body: { input: { who: "ada" } } });
  expect(r.body).toMatchObject({ status: "COMPLETED", output: { message: "hello ada" } });
  const h = await health();
  expect(h.coldStarts.count).toBe(1);
  expect(h.coldStarts.lastMs).toBeGreaterThan(0);
  expect(liveWorkers(h)).toBeGreaterThanOrEqual(1);
  const logs = await until(async () => {
    const body = (await call(`${service.url}/v1/endpoints/${greeter.id}/logs?job=${r.body.id}`, { key: KEY })).body;
    return body.lines.length > 0 && body.lines;
  });
  expect(logs.map((l: { text: string }) => l.text)).toContain("greeting ada");
  // The driver's capture and the runtime's job attribution are one channel: each line is stored once.
  const all = (await call(`${service.url}/v1/endpoints/${greeter.id}/logs`, { key: KEY })).body.lines as Array<{ text: string; jobId: string | null }>;
  expect(all.filter((l) => l.text === "greeting ada").map((l) => l.jobId)).toEqual([r.body.id]);
  expect(all.every((l) => !l.text.includes("\x1b]svc;"))).toBe(true);
  // idleTimeout is 1 s: the worker is drained and stopped
  await until(async () => liveWorkers(await health()) === 0, 15_000, 100);
}, 60_000);

it("replaces a worker that dies mid-job and runs the job again", async () => {
  const marker = join(dir, "crashed-once");
  const r = await call(`${greeter.url}/runsync`, { key: KEY, body: { input: { who: "bob", crashOnce: marker } } });
  expect(existsSync(marker)).toBe(true);
  expect(r.body).toMatchObject({ status: "COMPLETED", output: { message: "hello bob" } });
  const lines = (await call(`${service.url}/v1/endpoints/${greeter.id}/logs`, { key: KEY })).body.lines as Array<{ text: string }>;
  expect(lines.some((l) => /exited unexpectedly/.test(l.text))).toBe(true);
}, 60_000);

it("a redeploy with a changed artifact replaces the workers and keeps the queued jobs", async () => {
  const first = await call(`${greeter.url}/runsync`, { key: KEY, body: { input: { who: "old" } } });
  const oldPid = first.body.output.pid as number;
  writeFileSync(
    join(dir, "app", "src", "app.mjs"),
    (await import("node:fs")).readFileSync(join(dir, "app", "src", "app.mjs"), "utf8").replace("hello ${input.who}", "hi ${input.who}"),
  );
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await call(`${greeter.url}/run`, { key: KEY, body: { input: { who: `q${i}` } } })).body.id);
  const rebuilt = await buildProject(join(dir, "app"));
  const [again] = await service.deploy({ app: rebuilt.manifest.app, env: "test", manifest: rebuilt.manifest, artifactPath: rebuilt.artifactPath });
  expect(again!.id).toBe(greeter.id);
  const outputs = [];
  for (const id of ids) {
    const done = (await call(`${greeter.url}/status-sync/${id}?wait=30000`, { key: KEY })).body;
    expect(done.status).toBe("COMPLETED");
    outputs.push(done.output);
  }
  const after = await call(`${greeter.url}/runsync`, { key: KEY, body: { input: { who: "new" } } });
  expect(after.body.output.message).toBe("hi new");
  expect(after.body.output.pid).not.toBe(oldPid);
  expect(outputs.every((o) => /^h(ello|i) q\d$/.test(o.message))).toBe(true);
}, 90_000);
