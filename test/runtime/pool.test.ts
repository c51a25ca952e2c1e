// Pre-booted worker runtimes (the process driver's pool): a cold start is served by a runtime that was already
// running (Node and the svc runtime loaded) and that sees its endpoint's environment; the pool refills; a claimed
// runtime serves one endpoint only; the pool is gone when the service closes, and when it is killed (-9).
import { afterAll, beforeAll, expect, it } from "vitest";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject, type BuildResult } from "../../src/build/index.js";
import { createProcessDriver, type ProcessDriver } from "../../src/drivers/process.js";
import { processAlive } from "svc/internal";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";
import { startServerProcess } from "../server-process.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "pool-admin-key";
let dir: string;
let driver: ProcessDriver;
let service: Service;
let build: BuildResult;
let first: DeployedEndpoint;
let second: DeployedEndpoint;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-pool-test-"));
  cpSync(join(repo, "fixtures", "pool-app"), join(dir, "app"), { recursive: true });
  mkdirSync(join(dir, "app", "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(dir, "app", "node_modules", "svc"), "dir");
  build = await buildProject(join(dir, "app"));
  driver = createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache"), pool: 2 });
  service = await startService({ dataDir: join(dir, "data"), apiKeys: [KEY], driver });
  [first, second] = (await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath })).sort((a, b) =>
    a.name.localeCompare(b.name),
  );
}, 120_000);
afterAll(async () => {
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const health = async (e: DeployedEndpoint) => (await call(`${e.url}/health`, { key: KEY })).body;
const atZero = async (e: DeployedEndpoint) => {
  const h = await health(e);
  return h.workers.idle + h.workers.running + h.workers.initializing === 0 ? true : undefined;
};

it("serves a cold start from a pre-booted runtime that sees its endpoint's environment, and refills the pool", async () => {
  await until(() => atZero(first), 30_000);
  const pooled = await until(async () => (driver.pooledPids().length === 2 ? driver.pooledPids() : undefined), 30_000);
  const r = await call(`${first.url}/runsync`, { key: KEY, body: { input: {} } });
  expect(r.body.status).toBe("COMPLETED");
  // The worker is one of the runtimes that were waiting before the job came.
  expect(pooled).toContain(r.body.output.pid);
  expect(r.body.output.flag).toBe("first");
  // Nothing of the pool's own environment reaches the user's code.
  expect(r.body.output.pooled).toBeNull();
  // The pool refills: two waiting runtimes again, none of them the one claimed.
  const refilled = await until(async () => (driver.pooledPids().length === 2 ? driver.pooledPids() : undefined), 30_000);
  expect(refilled).not.toContain(r.body.output.pid);

  // Another endpoint's cold start gets another runtime: a claimed one never serves a second endpoint.
  await until(() => atZero(second), 30_000);
  const other = await call(`${second.url}/runsync`, { key: KEY, body: { input: {} } });
  expect(other.body.output.flag).toBe("second");
  expect(other.body.output.pid).not.toBe(r.body.output.pid);
  expect(refilled).toContain(other.body.output.pid);
}, 120_000);

it("ends the pool when the service closes", async () => {
  const pids = driver.pooledPids();
  expect(pids.length).toBeGreaterThan(0);
  await service.close();
  for (const pid of pids) expect(processAlive(pid)).toBe(false);
}, 60_000);

it("ends the pool when the service is killed with SIGKILL", async () => {
  const server = await startServerProcess({ dataDir: join(dir, "killed"), env: { SVC_API_KEY: KEY, SVC_WORKER_POOL: "2" } });
  const serverPid = server.child.pid!;
  // The pooled runtimes waiting for a claim: children of the server, or sandboxed (SVC_SANDBOX=auto where bubblewrap
  // works) children of its bwrap children.
  const { readdirSync, readFileSync } = await import("node:fs");
  const parentOf = (pid: number | string) => {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  };
  const pooledOf = () =>
    readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .filter((pid) => {
        try {
          const ppid = parentOf(pid);
          return (ppid === serverPid || parentOf(ppid) === serverPid) && readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes("SVC_POOLED=1");
        } catch {
          return false;
        }
      })
      .map(Number);
  const pids = await until(async () => (pooledOf().length === 2 ? pooledOf() : undefined), 30_000);
  server.child.kill("SIGKILL");
  await until(async () => (pids.every((pid) => !processAlive(pid)) ? true : undefined), 10_000);
}, 60_000);
