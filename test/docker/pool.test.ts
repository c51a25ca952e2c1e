// Pre-booted worker containers (the Docker driver's pool), against the real service and a real engine: a cold
// start is served by a container that was running before the job came, and its code sees its endpoint's
// environment and none of the pool's; the pool refills; a claimed container never serves another endpoint and is
// gone when its worker ends; an endpoint with a network volume gets a fresh container with the volume; close()
// removes the pool; `svc server --workers docker` killed with SIGKILL leaves no pool container, and a container
// it had claimed is removed (its worker reported gone) by the next start.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { buildProject } from "../../src/build/index.js";
import { createDockerDriver, type DockerDriver } from "../../src/drivers/docker.js";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { startServerProcess, type ServerProcess } from "../server-process.js";
import { describeDocker, docker, engineUp } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "docker-pool-admin-key";
let dir: string;
let service: Service | undefined;
let driver: DockerDriver;
let endpoints: Record<string, DeployedEndpoint> = {};
let server: ServerProcess | undefined;
const serverApp = `docker-pool-${Date.now().toString(36)}`;
/** The session `svc server` labels its containers with (one per data directory). */
let serverSession: string | undefined;

async function call(url: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(url, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

async function until<T>(probe: () => Promise<T | false | undefined>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

const runsync = (name: string, input: unknown = {}) => call(`${endpoints[name]!.url}/runsync?wait=60000`, { input });
const atZero = async (name: string) => {
  const h = (await call(`${endpoints[name]!.url}/health`)).body;
  return h.workers.idle + h.workers.running + h.workers.initializing === 0;
};
/** The short ids (a container's hostname) of the pool's ready containers, once there are `n`. */
const pooledIds = (n: number) =>
  until(async () => {
    const names = driver.pooledContainers();
    if (names.length !== n) return undefined;
    return Promise.all(names.map(async (name) => (await docker.getContainer(name).inspect()).Id.slice(0, 12)));
  }, 60_000);
const poolContainers = async (session: string) =>
  docker.listContainers({ all: true, filters: { label: [`${LABELS.session}=${session}`, `${LABELS.pool}=true`] } });

beforeAll(async () => {
  if (!engineUp) return;
  dir = mkdtempSync(join(tmpdir(), "svc-docker-pool-test-"));
  cpSync(join(repo, "fixtures", "docker-pool-app"), join(dir, "app"), { recursive: true });
  mkdirSync(join(dir, "app", "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(dir, "app", "node_modules", "svc"), "dir");
  const build = await buildProject(join(dir, "app"));
  driver = createDockerDriver({ networkScope: "session", volumeLifetime: "session", pool: 2 });
  await driver.prepare(["cpu"]);
  service = await startService({ dataDir: join(dir, "data"), apiKeys: [KEY], driver, leaseMs: 3000, heartbeatMs: 500 });
  const deployed = await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath });
  endpoints = Object.fromEntries(deployed.map((e) => [e.name, e]));
}, 180_000);

afterAll(async () => {
  await service?.close();
  server?.child.kill("SIGKILL");
  if (engineUp) {
    if (driver) await cleanupStale({ [LABELS.session]: driver.session }, { docker }).catch(() => undefined);
    // The server's session first: its containers hold the app's network, which must go before its volume.
    if (serverSession) await cleanupStale({ [LABELS.session]: serverSession }, { docker }).catch(() => undefined);
    await cleanupStale({ [LABELS.app]: serverApp }, { docker }).catch(() => undefined);
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
  // A killed server's node artifact cache (its close() removes it; a failed test may not get there).
  const cache = join(tmpdir(), `svc-pool-artifacts-${serverSession}`);
  if (serverSession && existsSync(cache)) {
    chmodSync(cache, 0o700);
    rmSync(cache, { recursive: true, force: true });
  }
});

describeDocker("pre-booted worker containers", () => {
  it("serves a cold start from a pool container that sees its endpoint's environment, and refills the pool", async () => {
    await until(() => atZero("pool-first"), 30_000);
    const pooled = await pooledIds(2);
    const r = await runsync("pool-first");
    expect(r.body.status).toBe("COMPLETED");
    // The worker is one of the containers that were waiting before the job came.
    expect(pooled).toContain(r.body.output.host);
    expect(r.body.output).toMatchObject({ flag: "first", endpoint: "pool-first", pooled: null, channel: null });
    // It is labelled as a pool container and named after the worker that claimed it.
    const claimed = await docker.getContainer(r.body.output.host).inspect();
    expect(claimed.Config.Labels).toMatchObject({ [LABELS.managed]: "true", [LABELS.session]: driver.session, [LABELS.pool]: "true" });
    expect(claimed.Name).toMatch(new RegExp(`^/svc-claimed\\.${endpoints["pool-first"]!.id}\\.w[a-z0-9]+$`));
    // The pool refills: two waiting containers again, none of them the one claimed.
    const refilled = await pooledIds(2);
    expect(refilled).not.toContain(r.body.output.host);
  }, 120_000);

  it("a claimed container never serves another endpoint, and is gone when its worker ends", async () => {
    const firstRun = await runsync("pool-first");
    expect(firstRun.body.output.flag).toBe("first");
    const firstHost = firstRun.body.output.host as string;
    const pooled = await pooledIds(2);
    const other = await runsync("pool-second");
    expect(other.body.output).toMatchObject({ flag: "second", endpoint: "pool-second", pooled: null });
    expect(other.body.output.host).not.toBe(firstHost);
    expect(pooled).toContain(other.body.output.host);
    // Idle out: the containers are removed, not given back to the pool.
    await until(async () => (await atZero("pool-first")) && (await atZero("pool-second")), 30_000);
    await until(async () => {
      const ids = (await docker.listContainers({ all: true })).map((c) => c.Id.slice(0, 12));
      return !ids.includes(firstHost) && !ids.includes(other.body.output.host);
    }, 15_000);
    const again = await pooledIds(2);
    expect(again).not.toContain(firstHost);
    expect(again).not.toContain(other.body.output.host);
  }, 120_000);

  it("an endpoint with a network volume gets a fresh container with the volume mounted, the pool untouched", async () => {
    const pooled = await pooledIds(2);
    const text = `note ${Math.random().toString(36).slice(2)}`;
    const r = await runsync("pool-volume", { text });
    expect(r.body).toMatchObject({ status: "COMPLETED", output: { flag: "volume", path: "/svc-volume/note.txt", read: text } });
    expect(pooled).not.toContain(r.body.output.host);
    const inspected = await docker.getContainer(r.body.output.host).inspect();
    expect(inspected.Mounts.find((m) => m.Destination === "/svc-volume")).toMatchObject({ Type: "bind", RW: true });
    expect(inspected.Config.Labels[LABELS.pool]).toBeUndefined();
    expect(await pooledIds(2)).toEqual(pooled);
  }, 120_000);

  it("close() removes the pool's containers", async () => {
    expect((await poolContainers(driver.session)).length).toBeGreaterThan(0);
    await service!.close();
    service = undefined;
    expect(await poolContainers(driver.session)).toEqual([]);
  }, 60_000);

  it("svc server killed with SIGKILL: its pool containers go; one it claimed is removed by the next start", async () => {
    const dataDir = join(dir, "server-data");
    // The session svc server labels its containers with: one per data directory (src/cli/commands/server.ts).
    const session = `srv${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`;
    serverSession = session;
    const env = { SVC_API_KEY: KEY, SVC_WORKER_POOL: "1" };
    server = await startServerProcess({ dataDir, env, workers: "docker" });
    const project = join(dir, "server-app");
    cpSync(join(repo, "fixtures", "docker-pool-app"), project, { recursive: true });
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: serverApp, private: true, type: "module" }));
    mkdirSync(join(project, "node_modules"));
    symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
    const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
    for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
    const deployed = spawnSync(process.execPath, [join(repo, "bin", "svc.js"), "deploy", "--env", "prod", "--json"], {
      cwd: project,
      env: { ...base, SVC_API_URL: server.url, SVC_API_KEY: KEY },
      encoding: "utf8",
      timeout: 180_000,
    });
    expect(deployed.status, deployed.stderr).toBe(0);
    const first = (JSON.parse(deployed.stdout) as { endpoints: Array<{ id: string; name: string }> }).endpoints.find((e) => e.name === "pool-first")!;
    const serverPool = () => poolContainers(session);
    await until(
      async () =>
        (await call(`${server!.url}/v2/${first.id}/health`)).body.workers.idle === 0 &&
        (await serverPool()).length === 1 &&
        (await serverPool())[0]!.State === "running",
      60_000,
    );
    const waiting = (await serverPool())[0]!;
    // A cold start on svc server (its endpoints have their own network: the pool container moves to it).
    const r = await call(`${server.url}/v2/${first.id}/runsync?wait=60000`, { input: {} });
    expect(r.body).toMatchObject({ status: "COMPLETED", output: { flag: "first", host: waiting.Id.slice(0, 12) } });
    const claimed = await docker.getContainer(waiting.Id).inspect();
    expect(Object.keys(claimed.NetworkSettings.Networks)).toEqual([`svc-${serverApp}-prod`]);
    expect(claimed.Config.Labels[LABELS.session]).toBe(session);
    const refill = await until(async () => (await poolContainers(session)).find((c) => c.Id !== waiting.Id && c.State === "running"), 60_000);

    server.child.kill("SIGKILL");
    await new Promise((resolve) => server!.child.once("exit", resolve));
    // The unclaimed one sees its stdin close and exits; the engine removes it.
    await until(async () => !(await poolContainers(session)).some((c) => c.Id === refill.Id), 15_000);
    // The claimed one (a worker by then) is removed by the next start, which reports its worker gone; unless it
    // ended on its own first (its stdin closed with the killed server too), which leaves nothing to remove.
    const claimedLeft = (await poolContainers(session)).some((c) => c.Id === waiting.Id);
    server = await startServerProcess({ dataDir, env, workers: "docker" });
    await until(async () => !(await poolContainers(session)).some((c) => c.Id === waiting.Id), 30_000);
    if (claimedLeft) expect(server.log()).toMatch(/removed worker container \/svc-claimed\.\S+ left by an earlier run of the service/);
    // And the new run's pool is up again.
    await until(async () => (await poolContainers(session)).some((c) => c.State === "running"), 60_000);
    await server.stop();
    expect(await poolContainers(session)).toEqual([]);
  }, 300_000);
});
