// Scaling policies with real workers: a real build of fixtures/scaling-app, the process driver, the worker runtime
// from dist/ (compile first). Each endpoint gets a controlled load (jobs that sleep a given time) while the test
// samples its /health; the worker counts over time must match its policy (docs/service.md, "Scaling policies").

import { afterAll, beforeAll, expect, it } from "vitest";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject, type BuildResult } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call, until } from "./helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "scaling-admin-key";
let dir: string;
let service: Service;
let build: BuildResult;
const endpoints = new Map<string, DeployedEndpoint>();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-scaling-policies-"));
  cpSync(join(repo, "fixtures", "scaling-app"), join(dir, "app"), { recursive: true });
  build = await buildProject(join(dir, "app"));
  service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [KEY],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
  });
  const deployed = await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath });
  for (const e of deployed) endpoints.set(e.name, e);
}, 120_000);
afterAll(async () => {
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Health {
  workers: { idle: number; running: number; initializing: number; throttled: number };
  jobs: { inQueue: number; inProgress: number; completed: number };
}
const health = async (name: string): Promise<Health> => (await call(`${endpoints.get(name)!.url}/health`, { key: KEY })).body;
const live = (h: Health) => h.workers.idle + h.workers.running + h.workers.initializing;
const submit = async (name: string, body: Record<string, unknown>): Promise<string> => {
  const r = await call(`${endpoints.get(name)!.url}/run`, { key: KEY, body });
  expect(r.status).toBe(200);
  return r.body.id;
};
const finished = async (name: string, id: string) => (await call(`${endpoints.get(name)!.url}/status-sync/${id}?wait=30000`, { key: KEY })).body;

/** Live worker counts of an endpoint sampled every 100 ms for `ms`, with the time of each since `from`. */
async function sample(name: string, ms: number, from: number): Promise<Array<{ at: number; workers: number }>> {
  const seen: Array<{ at: number; workers: number }> = [];
  const end = Date.now() + ms;
  while (Date.now() < end) {
    seen.push({ at: Date.now() - from, workers: live(await health(name)) });
    await new Promise((r) => setTimeout(r, 100));
  }
  return seen;
}

it("QUEUE_DELAY: no worker is added while the waiting job is younger than the delay, one is after", async () => {
  // workersMin 1: one worker, idle, before the load.
  await until(
    async () => {
      const h = await health("delayed");
      return live(h) === 1 && h.workers.idle === 1;
    },
    30_000,
    100,
  );
  const busy = await submit("delayed", { input: { ms: 12_000 } });
  await until(async () => (await health("delayed")).workers.running === 1, 10_000, 50);
  const queuedAt = Date.now();
  const waiting = await submit("delayed", { input: { ms: 0 } });
  // The delay is 3 s: up to 2.5 s after the job was queued the endpoint keeps its one (busy) worker.
  const before = await sample("delayed", 2500, queuedAt);
  expect(
    before.filter((s) => s.workers !== 1),
    JSON.stringify(before),
  ).toEqual([]);
  // Past the delay a second worker starts, and runs the waiting job long before the busy one is done.
  await until(async () => live(await health("delayed")) >= 2, 6000, 100);
  const done = await finished("delayed", waiting);
  expect(done.status).toBe("COMPLETED");
  expect(Date.now() - queuedAt).toBeLessThan(10_000);
  expect(live(await health("delayed"))).toBe(2);
  expect((await finished("delayed", busy)).status).toBe("COMPLETED");
}, 60_000);

it("REQUEST_COUNT: the workers are ceil((queued + in progress) / value), never more", async () => {
  // The deploy's worker may still be there (idleTimeout 30 s): it counts among the three.
  const start = live(await health("counted"));
  const from = Date.now();
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push(await submit("counted", { input: { ms: 2500 } }));
  // 5 jobs, value 2: 3 workers (one per job up to workersMax 4 would start 4).
  const seen = await sample("counted", 4000, from);
  const most = Math.max(...seen.map((s) => s.workers));
  expect(most, JSON.stringify({ start, seen })).toBe(3);
  for (const id of ids) expect((await finished("counted", id)).status).toBe("COMPLETED");
  // 7 more at once: ceil(7 / 2) = 4 = workersMax.
  const more: string[] = [];
  for (let i = 0; i < 7; i++) more.push(await submit("counted", { input: { ms: 1500 } }));
  // The policy calls for no worker beyond workersMax, so /health says none is held back.
  expect((await health("counted")).workers.throttled).toBe(0);
  await until(async () => live(await health("counted")) === 4, 10_000, 100);
  for (const id of more) expect((await finished("counted", id)).status).toBe("COMPLETED");
}, 90_000);

it("low-priority jobs start no worker; they run on the workers a normal job starts", async () => {
  // idleTimeout 1 s: the deploy's worker is gone first.
  await until(async () => live(await health("background")) === 0, 30_000, 100);
  const from = Date.now();
  const low: string[] = [];
  for (let i = 0; i < 3; i++) low.push(await submit("background", { input: { ms: 0 }, policy: { lowPriority: true } }));
  const seen = await sample("background", 3000, from);
  expect(
    seen.filter((s) => s.workers !== 0),
    JSON.stringify(seen),
  ).toEqual([]);
  const waiting = await health("background");
  expect(waiting.jobs.inQueue).toBe(3);
  expect(waiting.workers.throttled).toBe(0);
  // A normal-priority job starts a worker; the low-priority ones then run on it too.
  const normal = await submit("background", { input: { ms: 0 } });
  expect((await finished("background", normal)).status).toBe("COMPLETED");
  for (const id of low) expect((await finished("background", id)).status).toBe("COMPLETED");
}, 60_000);

it("svc update's configuration route changes a policy without restarting workers, and refuses one it cannot follow", async () => {
  const envUrl = `${service.url}/v1/apps/scaling-app/environments/test`;
  const resources = structuredClone(build.manifest.resources);
  resources.delayed!.scaler = { type: "REQUEST_COUNT", value: 1 };
  const applied = await call(`${envUrl}/config`, { key: KEY, body: { resources } });
  expect(applied.status).toBe(200);
  expect(applied.body.changes).toEqual([{ name: "delayed", id: endpoints.get("delayed")!.id, changed: ["scaler"], restart: false }]);
  const shown = (await call(envUrl, { key: KEY })).body.endpoints as Array<{ name: string; scaler: unknown }>;
  expect(Object.fromEntries(shown.map((e) => [e.name, e.scaler]))).toEqual({
    background: { type: "REQUEST_COUNT", value: 1 },
    counted: { type: "REQUEST_COUNT", value: 2 },
    delayed: { type: "REQUEST_COUNT", value: 1 },
  });
  resources.counted!.scaler = { type: "SOON", value: 0 } as never;
  const refused = await call(`${envUrl}/config`, { key: KEY, body: { resources } });
  expect(refused.status).toBe(422);
  expect(refused.body.errors).toEqual([
    'endpoint "counted": "scaler.type" must be one of QUEUE_DELAY, REQUEST_COUNT',
    'endpoint "counted": "scaler.value" must be an integer from 1 to 3600 (QUEUE_DELAY: seconds a job waits; REQUEST_COUNT: jobs per worker)',
  ]);
});
