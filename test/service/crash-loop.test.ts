// A job whose handler kills its own worker every time (as one over its memory limit is killed) ends FAILED after
// its endpoint's attempts, with an error naming the deaths, instead of being run again forever; the endpoint goes on
// serving other jobs. Real builds, a real service, real process workers.
import { afterAll, beforeAll, expect, it } from "vitest";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call, until } from "./helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "crash-loop-admin-key";
let dir: string;
let service: Service;
let endpoint: DeployedEndpoint;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-crash-loop-"));
  cpSync(join(repo, "fixtures", "crash-app"), join(dir, "app"), { recursive: true });
  mkdirSync(join(dir, "app", "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(dir, "app", "node_modules", "svc"), "dir");
  const driver = createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") });
  service = await startService({ dataDir: join(dir, "data"), apiKeys: [KEY], driver });
  const b = await buildProject(join(dir, "app"));
  endpoint = (await service.deploy({ app: b.manifest.app, env: "test", manifest: b.manifest, artifactPath: b.artifactPath }))[0]!;
}, 120_000);
afterAll(async () => {
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const runs = (mark: string) => (existsSync(mark) ? readFileSync(mark, "utf8").split("\n").filter(Boolean) : []);

it("fails a job that kills its worker on every attempt, naming the deaths, and keeps serving", async () => {
  const mark = join(dir, "deadly.txt");
  const submitted = await call(`${endpoint.url}/run`, { key: KEY, body: { input: { mark, die: true } } });
  expect(submitted.status).toBe(200);
  const id = submitted.body.id as string;
  const record = await until(async () => {
    const r = await call(`${endpoint.url}/status/${id}`, { key: KEY });
    return ["FAILED", "COMPLETED"].includes(r.body?.status) ? r.body : undefined;
  }, 60_000);
  expect(record.status).toBe("FAILED");
  expect(record.error).toMatch(/worker died while running it, on attempt 3 of 3 \(killed \(SIGKILL: out of memory, or killed from outside\)\)/);
  // Three attempts (retries: 2), each in a worker of its own, and no more after the job failed.
  expect(new Set(runs(mark)).size).toBe(3);
  await new Promise((r) => setTimeout(r, 1500));
  expect(runs(mark)).toHaveLength(3);
  // Each death was said in the job's log.
  const logs = (await call(`${service.url}/v1/endpoints/${endpoint.id}/logs?job=${id}`, { key: KEY })).body.lines
    .map((l: { text: string }) => l.text)
    .join("\n");
  expect(logs).toMatch(/attempt 1 lost: its worker died/);

  const fine = await call(`${endpoint.url}/runsync`, { key: KEY, body: { input: { mark: join(dir, "fine.txt") } } });
  expect(fine.body).toMatchObject({ status: "COMPLETED", output: { ok: true } });
}, 90_000);
