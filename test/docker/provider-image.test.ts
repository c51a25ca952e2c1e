// Queue endpoints from a worker image built for the provider, with a REAL Docker engine and the real service:
// the standard-library provider worker (fixtures/provider-worker) packed into an image built here from this
// machine's Python (python-image.ts), made an endpoint through the REST API (a template naming the image, an
// endpoint of it). The Docker driver starts it with the provider's variables and its own token; it takes jobs,
// streams, fails, reports progress, asks for refresh_worker, runs three jobs at once with concurrency_modifier 3,
// is cancelled, and is killed mid-job; its output reaches the endpoint's logs. `svc server --workers docker` killed
// with SIGKILL under load and started again on its data directory loses none of the jobs it acknowledged. The
// process driver cannot run an image and says so in the endpoint's status.

import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProcessDriver } from "../../src/drivers/process.js";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { createDockerDriver, type DockerDriver } from "../../src/drivers/docker.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { startService, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";
import { until } from "../lb/harness.js";
import { errorMessage } from "../../src/errors.js";
import { describeDocker, docker } from "./engine.js";
import { buildProviderWorkerImage } from "./python-image.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "provider-image-admin-key";
let dir: string;
let driver: DockerDriver;
let service: Service;
let imageTag: string;

interface Endpoint {
  id: string;
  url: string;
  status: string;
  statusReason: string | null;
}

async function imageEndpoint(
  s: { url: string },
  name: string,
  image: string,
  settings: Record<string, unknown> = {},
  allowances: Record<string, unknown> = {},
): Promise<Endpoint> {
  const template = await call(`${s.url}/v1/templates`, { key: KEY, body: { name, imageName: image, ...allowances } });
  expect(template.status).toBe(201);
  const created = await call(`${s.url}/v1/endpoints`, { key: KEY, body: { name, templateId: template.body.id, workersMax: 1, idleTimeout: 60, ...settings } });
  expect(created.status).toBe(201);
  return created.body as Endpoint;
}

async function run(e: Endpoint, input: unknown): Promise<string> {
  const r = await call(`${e.url}/run`, { key: KEY, body: { input } });
  expect(r.status).toBe(200);
  return r.body.id as string;
}

async function status(e: Endpoint, id: string) {
  return (await call(`${e.url}/status/${id}`, { key: KEY })).body;
}

async function final(e: Endpoint, id: string, timeoutMs = 60_000) {
  let record: Record<string, any> = {};
  await until(
    `job ${id} to end`,
    async () => {
      record = await status(e, id);
      return ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(record.status) ? record : undefined;
    },
    timeoutMs,
  );
  return record;
}

async function logLines(s: Service, e: Endpoint): Promise<string[]> {
  return ((await call(`${s.url}/v1/endpoints/${e.id}/logs`, { key: KEY })).body.lines as Array<{ text: string }>).map((l) => l.text);
}

/** The first line of the endpoint's logs starting with `prefix` (the worker prints one per event). */
async function logLine(e: Endpoint, prefix: string, timeoutMs = 90_000): Promise<string> {
  let lines: string[] = [];
  try {
    return await until(`a log line "${prefix}"`, async () => (lines = await logLines(service, e)).find((l) => l.startsWith(prefix)), timeoutMs);
  } catch (err) {
    // What the worker did print says where it stopped.
    throw new Error(`${errorMessage(err)}; the endpoint's last lines:\n${lines.slice(-30).join("\n")}`);
  }
}

async function containersOf(e: Endpoint) {
  return docker.listContainers({ filters: { label: [`${LABELS.session}=${driver.session}`, `${LABELS.endpoint}=${e.id}`] } });
}

/** Containers, running or not, with the label `label`. */
async function labelled(label: string) {
  return docker.listContainers({ all: true, filters: { label: [label] } });
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

interface ChildServer {
  url: string;
  child: ChildProcess;
  /** What it wrote on stderr (its log). */
  log(): string;
}

/** `svc server --workers docker` as a child process, answered once it printed its URL. */
async function startServer(port: number, dataDir: string): Promise<ChildServer> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: KEY };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") && k !== "SVC_API_KEY") delete env[k];
  const child = spawn(process.execPath, [join(repo, "bin", "svc.js"), "server", "--port", String(port), "--data-dir", dataDir, "--workers", "docker"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${stderr}`)), 120_000);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`svc server exited (${code ?? signal}):\n${stderr}`));
    });
    createInterface({ input: child.stdout! }).once("line", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return { url: `http://127.0.0.1:${port}`, child, log: () => stderr };
}

describeDocker("queue endpoints from a worker image built for the provider", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-provider-image-"));
    driver = createDockerDriver({ networkScope: "session", volumeLifetime: "session" });
    imageTag = `svc-test-provider-worker:${driver.session.slice(0, 12)}`;
    await buildProviderWorkerImage(docker, imageTag, driver.session);
    service = await startService({ dataDir: join(dir, "data"), driver, apiKeys: [KEY], leaseMs: 3000, heartbeatMs: 1000 });
  }, 240_000);

  afterAll(async () => {
    await service?.close();
    await driver?.close();
    if (driver) await cleanupStale({ [LABELS.session]: driver.session }, { docker }).catch(() => undefined);
    if (imageTag)
      await docker
        .getImage(imageTag)
        .remove({ force: true })
        .catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("a template naming the image and an endpoint of it: READY, /runsync and /run complete on a container of the image, its output in the endpoint's logs", async () => {
    const volume = await call(`${service.url}/v2/network-volumes`, { key: KEY, body: { name: "models", size: 10, dataCenter: "local" } });
    expect(volume.status).toBe(201);
    // Its template allows a bigger /dev/shm than the engine's default.
    const e = await imageEndpoint(service, "echo", imageTag, { networkVolumeId: volume.body.id, env: { GREETING: "hi" } }, { shmSizeMb: 256 });
    expect([e.status, e.statusReason]).toEqual(["READY", null]);
    const sync = await call(`${e.url}/runsync`, { key: KEY, body: { input: { mode: "echo", value: "hello" } } });
    expect(sync.body).toMatchObject({ status: "COMPLETED", output: { value: "hello" } });
    const workerId = sync.body.output.worker as string;
    expect(workerId).toMatch(/^w/);
    const id = await run(e, 42);
    expect(await final(e, id)).toMatchObject({ status: "COMPLETED", output: { value: 42, worker: workerId } });

    // One container, of the image, as its own user, with the provider's variables (no svc ones), the endpoint's
    // own, and the volume where the provider mounts it as well as at svc's path; confined as svc's workers are.
    const [container] = await containersOf(e);
    expect(container!.Image).toBe(imageTag);
    const inspected = await docker.getContainer(container!.Id).inspect();
    const env = Object.fromEntries(inspected.Config.Env.map((v) => [v.slice(0, v.indexOf("=")), v.slice(v.indexOf("=") + 1)]));
    expect(env).toMatchObject({ RUNPOD_POD_ID: workerId, RUNPOD_ENDPOINT_ID: e.id, RUNPOD_PING_INTERVAL: "1000", GREETING: "hi" });
    expect(env.RUNPOD_WEBHOOK_GET_JOB).toMatch(new RegExp(`^http://svc-api:\\d+/_worker/provider/v2/${e.id}/job-take/\\$ID\\?protocol=provider$`));
    expect(Object.keys(env).filter((k) => k.startsWith("SVC_"))).toEqual([]);
    expect(inspected.Config.User).toBe("1000:1000");
    expect(inspected.Mounts.map((m) => m.Destination).sort()).toEqual(["/runpod-volume", "/svc-volume"]);
    expect(inspected.HostConfig.CapDrop).toEqual(["ALL"]);
    expect(inspected.HostConfig.SecurityOpt).toEqual(["no-new-privileges"]);
    expect(inspected.HostConfig.ShmSize).toBe(256 * 1024 * 1024);
    // Its template's container disk (the default, 10 GB) is a writable root: it writes beside its code.
    expect(inspected.HostConfig.ReadonlyRootfs).toBe(false);
    const written = await call(`${e.url}/runsync`, { key: KEY, body: { input: { mode: "write", path: "/home/worker/cache.bin" } } });
    expect(written.body.output).toEqual({ written: true });

    // The worker registered through its takes: /health counts it.
    const health = await call(`${e.url}/health`, { key: KEY });
    expect(health.body.workers.idle + health.body.workers.running).toBe(1);
    // What the worker printed is in the endpoint's logs, as svc's own workers' output is.
    expect(await logLine(e, `taken ${id}`)).toBe(`taken ${id}`);
    expect(await logLine(e, `posted ${id}`)).toMatch(/^posted /);
  }, 120_000);

  it("a template allowing no container disk (containerDiskInGb 0): the image runs with a read-only root, /tmp still writable", async () => {
    const e = await imageEndpoint(service, "sealed", imageTag, {}, { containerDiskInGb: 0 });
    const root = await call(`${e.url}/runsync`, { key: KEY, body: { input: { mode: "write", path: "/home/worker/cache.bin" } } });
    expect(root.body.output).toEqual({ written: false, reason: "Read-only file system" });
    const tmp = await call(`${e.url}/runsync`, { key: KEY, body: { input: { mode: "write", path: "/tmp/scratch.bin" } } });
    expect(tmp.body.output).toEqual({ written: true });
    const [container] = await containersOf(e);
    expect((await docker.getContainer(container!.Id).inspect()).HostConfig.ReadonlyRootfs).toBe(true);
  }, 120_000);

  it("a handler's exception fails the job with the SDK's report; a generator streams in order", async () => {
    const e = await imageEndpoint(service, "errors", imageTag);
    const failed = await final(e, await run(e, { mode: "error", message: "bad prompt" }));
    expect(failed.status).toBe("FAILED");
    expect(JSON.parse(failed.error)).toMatchObject({ error_type: "<class 'ValueError'>", error_message: "bad prompt" });
    expect(failed.errorStack).toContain("ValueError: bad prompt");

    const chunks = ["a", { n: 2 }, "c"];
    const id = await run(e, { mode: "stream", chunks, aggregate: true, pause: 0.1 });
    const seen: unknown[] = [];
    await until(
      "the stream to end",
      async () => {
        const r = await call(`${e.url}/stream/${id}`, { key: KEY });
        seen.push(...(r.body.stream as Array<{ output: unknown }>).map((c) => c.output));
        return ["COMPLETED", "FAILED"].includes(r.body.status) && seen.length >= chunks.length;
      },
      30_000,
    );
    expect(seen).toEqual(chunks);
    expect(await final(e, id)).toMatchObject({ status: "COMPLETED", output: chunks });
  }, 120_000);

  it("cancelling a running job reaches the worker in its container; it goes on to the next job", async () => {
    const e = await imageEndpoint(service, "cancel", imageTag);
    const id = await run(e, { mode: "sleep", seconds: 60 });
    await logLine(e, `taken ${id}`);
    expect((await call(`${e.url}/cancel/${id}`, { key: KEY, method: "POST" })).body).toMatchObject({ id, status: "CANCELLED" });
    await logLine(e, `stopped ${id}`, 15_000);
    expect((await status(e, id)).status).toBe("CANCELLED");
    expect(await final(e, await run(e, { mode: "echo", value: "after" }))).toMatchObject({ status: "COMPLETED", output: { value: "after" } });
  }, 120_000);

  it("a worker container killed mid-job (docker kill): the job runs again on a new worker", async () => {
    const e = await imageEndpoint(service, "killed", imageTag);
    const id = await run(e, { mode: "sleep", seconds: 3, value: "again" });
    await logLine(e, `taken ${id}`);
    const [doomed] = await containersOf(e);
    const doomedWorker = doomed!.Labels[LABELS.worker];
    await docker.getContainer(doomed!.Id).kill();
    const record = await final(e, id, 90_000);
    expect(record).toMatchObject({ status: "COMPLETED", output: { value: "again" }, attempts: 2 });
    expect(record.output.worker).not.toBe(doomedWorker);
    expect(await logLines(service, e)).toContainEqual(expect.stringMatching(/^worker exited unexpectedly \(code null, signal SIGKILL\)/));
  }, 150_000);

  it("progress_update: /status shows each update while the job runs, then the job completes", async () => {
    const e = await imageEndpoint(service, "progress", imageTag);
    const id = await run(e, { mode: "progress", steps: [{ percent: 25 }, { percent: 75 }], pause: 1 });
    const shown: unknown[] = [];
    await until(
      "both progress updates, or the job's end",
      async () => {
        const record = await status(e, id);
        const last = shown.at(-1);
        if (record.status === "IN_PROGRESS" && record.output !== undefined && JSON.stringify(record.output) !== JSON.stringify(last)) shown.push(record.output);
        return shown.length >= 2 || !["IN_QUEUE", "IN_PROGRESS"].includes(record.status);
      },
      60_000,
    );
    expect(shown).toEqual([{ percent: 25 }, { percent: 75 }]);
    expect(await final(e, id)).toMatchObject({ status: "COMPLETED", output: "finished" });
    expect(await logLine(e, `progress ${id}`)).toBe(`progress ${id} 200`);
  }, 120_000);

  it("refresh_worker: the job completes, its container is stopped and removed, and a new worker's container takes the next job", async () => {
    const e = await imageEndpoint(service, "refresh", imageTag);
    const id = await run(e, { mode: "refresh", value: 1 });
    const done = await final(e, id);
    expect(done).toMatchObject({ status: "COMPLETED", output: { value: 1 } });
    expect(done.output).not.toHaveProperty("refresh_worker");
    const first = done.output.worker as string;
    const [old] = await labelled(`${LABELS.worker}=${first}`);
    expect(old?.Image).toBe(imageTag);

    const next = await final(e, await run(e, { mode: "echo", value: 2 }), 90_000);
    expect(next).toMatchObject({ status: "COMPLETED", output: { value: 2 } });
    expect(next.output.worker).toMatch(/^w/);
    expect(next.output.worker).not.toBe(first);
    expect(await logLine(e, `worker ${first} asked to be replaced`)).toBe(
      `worker ${first} asked to be replaced after job ${id} (refresh_worker); a new worker takes its place`,
    );
    // The old container is gone; the endpoint's one container is the new worker's.
    await until(
      "the replaced worker's container to be removed",
      async () => (await docker.listContainers({ all: true, filters: { id: [old!.Id] } })).length === 0,
      60_000,
    );
    const now = await containersOf(e);
    expect(now.map((c) => c.Labels[LABELS.worker])).toEqual([next.output.worker]);
    expect(now[0]!.Id).not.toBe(old!.Id);
  }, 180_000);

  it("concurrency_modifier 3 (PROVIDER_WORKER_CONCURRENCY in the endpoint's env): one container runs three jobs at once", async () => {
    const e = await imageEndpoint(service, "concurrent", imageTag, { env: { PROVIDER_WORKER_CONCURRENCY: "3" } });
    const ids = [
      await run(e, { mode: "sleep", seconds: 4, value: 1 }),
      await run(e, { mode: "sleep", seconds: 4, value: 2 }),
      await run(e, { mode: "sleep", seconds: 4, value: 3 }),
    ];
    const seen = await until(
      "the three jobs running at once, or one of them ending first",
      async () => {
        const records = await Promise.all(ids.map((id) => status(e, id)));
        if (records.every((r) => r.status === "IN_PROGRESS")) return "all three running";
        return records.some((r) => !["IN_QUEUE", "IN_PROGRESS"].includes(r.status)) ? "one ended first" : undefined;
      },
      60_000,
    );
    expect(seen).toBe("all three running");
    const records = await Promise.all(ids.map((id) => final(e, id)));
    expect(records.map((r) => [r.status, r.output.value])).toEqual([
      ["COMPLETED", 1],
      ["COMPLETED", 2],
      ["COMPLETED", 3],
    ]);
    // One worker, one container.
    expect(new Set(records.map((r) => r.output.worker)).size).toBe(1);
    const containers = await containersOf(e);
    expect(containers.map((c) => c.Labels[LABELS.worker])).toEqual([records[0]!.output.worker]);
    // In the worker's own lines: it took all three before it posted any result.
    await logLine(e, `posted ${ids[2]}`);
    const lines = await logLines(service, e);
    const firstPost = lines.findIndex((l) => l.startsWith("posted "));
    for (const id of ids) {
      const taken = lines.findIndex((l) => l.startsWith("taken ") && l.slice("taken ".length).split(",").includes(id));
      expect(taken).toBeGreaterThanOrEqual(0);
      expect(taken).toBeLessThan(firstPost);
    }
  }, 180_000);

  it("svc server killed with SIGKILL mid-load and started again on its data directory: every acknowledged job completes, no container of the killed run is left", async () => {
    const work = mkdtempSync(join(tmpdir(), "svc-provider-image-restart-"));
    const dataDir = join(work, "data");
    // svc server's Docker session comes from its data directory, so that a restart finds what the killed run left.
    const serverSession = `srv${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`;
    const port = await freePort();
    let server = await startServer(port, dataDir);
    try {
      const created = await imageEndpoint(server, "restart", imageTag, { env: { PROVIDER_WORKER_CONCURRENCY: "4" } });
      expect(created.status).toBe("READY");
      const e = { ...created, url: `${server.url}/v2/${created.id}` };
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push(await run(e, { mode: "sleep", seconds: 1.5, value: i }));
      // Mid-way: some done, the others running or queued.
      const atKill = await until(
        "some of the jobs to complete",
        async () => {
          const records = await Promise.all(ids.map((id) => status(e, id)));
          return records.filter((r) => r.status === "COMPLETED").length >= 4 ? records : undefined;
        },
        90_000,
      );
      const before = await labelled(`${LABELS.session}=${serverSession}`);
      server.child.kill("SIGKILL");
      await new Promise((r) => server.child.once("exit", r));
      expect(atKill.filter((r) => r.status !== "COMPLETED").length).toBeGreaterThan(0);
      expect(before.length).toBeGreaterThan(0);

      server = await startServer(port, dataDir);
      expect(server.log()).toMatch(/removed worker container \S+ left by an earlier run of the service/);
      const left = (await labelled(`${LABELS.session}=${serverSession}`)).map((c) => c.Id);
      for (const c of before) expect(left).not.toContain(c.Id);

      const records: Array<Record<string, any>> = [];
      for (const id of ids) records.push(await final(e, id, 120_000));
      expect(records.map((r) => [r.status, r.output?.value])).toEqual(ids.map((_, i) => ["COMPLETED", i]));
      // What runs now is the new run's: one container at most (workersMax 1), none of the killed run's.
      const running = await docker.listContainers({ filters: { label: [`${LABELS.session}=${serverSession}`] } });
      expect(running.length).toBeLessThanOrEqual(1);
      for (const c of running) expect(before.map((b) => b.Id)).not.toContain(c.Id);
    } finally {
      // Stopped as an operator would (it removes its containers), then anything of its session left removed.
      const child = server.child;
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
        await exited;
        clearTimeout(timer);
      }
      await cleanupStale({ [LABELS.session]: serverSession }, { docker }).catch(() => undefined);
      rmSync(join(tmpdir(), `svc-worker-artifacts-${serverSession}`), { recursive: true, force: true });
      rmSync(work, { recursive: true, force: true });
    }
  }, 300_000);
});

describe("the process driver and a worker image", () => {
  it("says in the endpoint's status that it runs no images, and starts no worker", async () => {
    const processDir = mkdtempSync(join(tmpdir(), "svc-provider-image-process-"));
    const s = await startService({
      dataDir: join(processDir, "data"),
      apiKeys: [KEY],
      driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(processDir, "cache") }),
    });
    try {
      const e = await imageEndpoint(s, "elsewhere", "example/provider-worker:1");
      expect(e.status).toBe("WAITING");
      expect(e.statusReason).toContain(
        `image "example/provider-worker:1" is a worker image, and the process driver runs no images: only the Docker, Swarm and Kubernetes drivers run them`,
      );
      expect((await call(`${s.url}/v1/endpoints/${e.id}`, { key: KEY })).body.statusReason).toBe(e.statusReason);
      const id = await run(e, { mode: "echo", value: 1 });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect((await status(e, id)).status).toBe("IN_QUEUE");
      expect((await call(`${e.url}/health`, { key: KEY })).body.workers).toMatchObject({ idle: 0, running: 0, initializing: 0 });
    } finally {
      await s.close();
      rmSync(processDir, { recursive: true, force: true });
    }
  }, 60_000);
});
