// Queue endpoints from a worker image built for the provider, with a REAL Docker engine and the real service:
// the standard-library provider worker (fixtures/provider-worker) packed into an image built here from this
// machine's Python (python-image.ts), made an endpoint through the REST API (a template naming the image, an
// endpoint of it). The Docker driver starts it with the provider's variables and its own token; it takes jobs,
// streams, fails, is cancelled, and is killed mid-job; its output reaches the endpoint's logs. The process driver
// cannot run an image and says so in the endpoint's status.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
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
  s: Service,
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
function logLine(e: Endpoint, prefix: string, timeoutMs = 60_000): Promise<string> {
  return until(`a log line "${prefix}"`, async () => (await logLines(service, e)).find((l) => l.startsWith(prefix)), timeoutMs);
}

async function containersOf(e: Endpoint) {
  return docker.listContainers({ filters: { label: [`${LABELS.session}=${driver.session}`, `${LABELS.endpoint}=${e.id}`] } });
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

    // The worker registered through its takes: /health counts it.
    const health = await call(`${e.url}/health`, { key: KEY });
    expect(health.body.workers.idle + health.body.workers.running).toBe(1);
    // What the worker printed is in the endpoint's logs, as svc's own workers' output is.
    expect(await logLine(e, `taken ${id}`)).toBe(`taken ${id}`);
    expect(await logLine(e, `posted ${id}`)).toMatch(/^posted /);
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
