// The Docker driver against the REAL service: a real build (esbuild) of fixtures/docker-app, startService with
// createDockerDriver, the worker runtime from dist/ inside locally built images (compile first). Jobs complete
// through the job API; a worker container killed mid-job hands its job to another; two endpoints share a
// network volume; GPU endpoints fall back to CPU only when allowed; close() leaves nothing of the session.

import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { buildProject, type BuildResult } from "../../src/build/index.js";
import { createDockerDriver, type DockerDriver } from "../../src/drivers/docker.js";
import { cleanupStale, detectGpuSupport } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { UserError, errorMessage } from "../../src/errors.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { describeDocker, docker, engineUp, leftovers } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "docker-admin-key";
let dir: string;
let service: Service | undefined;
let driver: DockerDriver;
let build: BuildResult;
let endpoints: Record<string, DeployedEndpoint> = {};
let closed = false;
const operatorLog: string[] = [];

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

const runsync = (name: string, input: unknown) => call(`${endpoints[name]!.url}/runsync?wait=60000`, { input });

beforeAll(async () => {
  if (!engineUp) return;
  dir = mkdtempSync(join(tmpdir(), "svc-docker-test-"));
  cpSync(join(repo, "fixtures", "docker-app"), join(dir, "app"), { recursive: true });
  build = await buildProject(join(dir, "app"));
  driver = createDockerDriver({ networkScope: "session", volumeLifetime: "session", allowCpuFallback: true, log: (m) => operatorLog.push(m) });
  await driver.prepare(["cpu", "gpu"]);
  service = await startService({ dataDir: join(dir, "data"), apiKeys: [KEY], driver, leaseMs: 3000, heartbeatMs: 500 });
  const deployed = await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath });
  endpoints = Object.fromEntries(deployed.map((e) => [e.name, e]));
}, 180_000);

afterAll(async () => {
  if (!closed) await service?.close();
  if (driver) await cleanupStale({ [LABELS.session]: driver.session }, { docker }).catch(() => undefined);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describeDocker("Docker driver with the real service", () => {
  it("scales from zero: a worker container runs the job, labelled, on the session network, as the non-root user", async () => {
    const r = await runsync("docker-echo", { who: "ada" });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: "COMPLETED", output: { message: "hello ada", uid: 1000, node: process.version, app: "docker-app" } });

    const [container] = await docker.listContainers({
      filters: { label: [`${LABELS.session}=${driver.session}`, `${LABELS.endpoint}=${endpoints["docker-echo"]!.id}`] },
    });
    expect(container).toBeDefined();
    expect(r.body.output.host).toBe(container!.Id.slice(0, 12));
    expect(container!.Labels).toMatchObject({
      [LABELS.managed]: "true",
      [LABELS.app]: "docker-app",
      [LABELS.env]: "test",
      [LABELS.endpoint]: endpoints["docker-echo"]!.id,
    });
    expect(container!.Labels[LABELS.worker]).toMatch(/^w/);
    const inspected = await docker.getContainer(container!.Id).inspect();
    expect(inspected.HostConfig.NetworkMode).toBe(`svc-session-${driver.session}`);
    expect(inspected.HostConfig.ExtraHosts?.[0]).toMatch(/^svc-api:\d+\.\d+\.\d+\.\d+$/);
    expect(inspected.Config.Env).toEqual(
      expect.arrayContaining([expect.stringMatching(/^SVC_API_URL=http:\/\/svc-api:\d+$/), "SVC_ARTIFACT=/svc/artifact.tar.gz", "GREETING=hello"]),
    );
    expect(inspected.Mounts.find((m) => m.Destination === "/svc/artifact.tar.gz")).toMatchObject({ RW: false });
    // Nothing published: the workers pull from the service.
    expect(Object.keys(inspected.HostConfig.PortBindings ?? {})).toEqual([]);
    // The container's raw stdout and stderr, demultiplexed line by line, kept under its worker id; the lines the
    // job wrote carry its id (read from the runtime's output marks), each stored once.
    const raw = await until(async () => {
      const lines = (await call(`${service!.url}/v1/endpoints/${endpoints["docker-echo"]!.id}/logs`)).body.lines as Array<{
        stream: string;
        text: string;
        jobId?: string | null;
        workerId: string;
      }>;
      const mine = lines.filter((l) => l.workerId === container!.Labels[LABELS.worker]);
      return (
        mine.some((l) => l.stream === "stdout" && l.text === "whoami ada") && mine.some((l) => l.stream === "stderr" && l.text === "whoami-stderr ada") && mine
      );
    }, 10_000);
    expect(raw.filter((l) => l.text === "whoami ada").map((l) => [l.stream, l.jobId])).toEqual([["stdout", r.body.id]]);
    expect(raw.filter((l) => l.text === "whoami-stderr ada").map((l) => [l.stream, l.jobId])).toEqual([["stderr", r.body.id]]);
    const networks = await docker.listNetworks({ filters: { label: [`${LABELS.session}=${driver.session}`] } });
    expect(networks.map((n) => n.Name)).toEqual([`svc-session-${driver.session}`]);
  }, 90_000);

  it("a worker container killed mid-job: the job completes on another worker", async () => {
    const echo = endpoints["docker-echo"]!;
    const submitted = await call(`${echo.url}/run`, { input: { who: "survivor", sleepMs: 4000 } });
    expect(submitted.body.status).toBe("IN_QUEUE");
    await until(async () => (await call(`${echo.url}/status/${submitted.body.id}`)).body.status === "IN_PROGRESS");
    const running = await docker.listContainers({ filters: { label: [`${LABELS.endpoint}=${echo.id}`, `${LABELS.session}=${driver.session}`] } });
    expect(running.length).toBeGreaterThan(0);
    const killed = running.map((c) => c.Id.slice(0, 12));
    await Promise.all(running.map((c) => docker.getContainer(c.Id).kill()));
    const done = await until(
      async () => {
        const status = (await call(`${echo.url}/status/${submitted.body.id}`)).body;
        return ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(status.status) && status;
      },
      60_000,
      200,
    );
    expect(done).toMatchObject({ status: "COMPLETED", output: { message: "hello survivor" } });
    expect(killed).not.toContain(done.output.host);
    // The killed containers are gone (removed after they exited), not left stopped.
    await until(async () => {
      const all = await docker.listContainers({ all: true, filters: { label: [`${LABELS.session}=${driver.session}`] } });
      return all.every((c) => !killed.includes(c.Id.slice(0, 12)));
    }, 15_000);
  }, 120_000);

  it("two endpoints share a network volume: what one writes, the other reads", async () => {
    const text = `note ${Math.random().toString(36).slice(2)}`;
    const written = await runsync("volume-writer", { name: "note.txt", text });
    expect(written.body).toMatchObject({ status: "COMPLETED", output: { path: "/svc-volume/note.txt" } });
    const read = await runsync("volume-reader", { name: "note.txt" });
    expect(read.body).toMatchObject({ status: "COMPLETED", output: { text } });
    expect(read.body.output.host).not.toBe(written.body.output.host);
    // The setting "shared-notes" names no volume of the owner's: the deploy made one for them, whose directory in
    // the data directory is the volume's one home (bind-mounted, as the process driver's workers get it).
    const volumes = readdirSync(join(dir, "data", "volumes"));
    expect(volumes).toEqual([expect.stringMatching(/^vol[0-9a-f]{12}$/)]);
    expect(readFileSync(join(dir, "data", "volumes", volumes[0]!, "note.txt"), "utf8")).toBe(text);
    expect((await docker.listVolumes({ filters: { label: [`${LABELS.session}=${driver.session}`] } })).Volumes ?? []).toHaveLength(0);
  }, 120_000);

  it("runs a GPU endpoint on CPU when the driver allows it (no GPU here), with a logged warning", async () => {
    const support = await detectGpuSupport(docker);
    const r = await runsync("gpu-echo", {});
    // No GPU inventory where the service runs: the worker is assigned none, and the image names none either.
    expect(r.body).toMatchObject({ status: "COMPLETED", output: { visible: null, image: "gpu" } });
    if (!support.available) {
      expect(operatorLog.some((m) => /asks for a GPU but this host has no NVIDIA GPU.*; running it on CPU/.test(m))).toBe(true);
      const logs = await call(`${service!.url}/v1/endpoints/${endpoints["gpu-echo"]!.id}/logs`);
      expect(logs.body.lines.some((l: { text: string }) => /running it on CPU/.test(l.text))).toBe(true);
    }
  }, 90_000);

  it("without CPU fallback, a GPU worker on a host with no GPU is refused, naming why", async (ctx) => {
    const support = await detectGpuSupport(docker);
    if (support.available) ctx.skip();
    const strict = createDockerDriver({ networkScope: "session" });
    try {
      const err = await strict
        .start({
          workerId: "wgpu1",
          endpointId: "e1",
          endpointName: "llm",
          app: "a",
          env: "e",
          artifactPath: build.artifactPath,
          apiUrl: service!.url,
          workerToken: "t",
          environment: {},
          maxConcurrency: 1,
          computeType: "GPU",
          gpuTypeIds: ["ANY"],
          onLog: () => undefined,
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UserError);
      expect(errorMessage(err)).toMatch(/GPU endpoint "llm": this host has no NVIDIA GPU/);
    } finally {
      await strict.close();
    }
    expect(await leftovers(strict.session)).toEqual({ containers: [], networks: [], volumes: [] });
  }, 30_000);

  it("a published port already in use on 127.0.0.1 is a clear user error, and nothing is left behind", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const taken = (holder.address() as AddressInfo).port;
    const publishing = createDockerDriver({ networkScope: "session", publish: [{ containerPort: 8080, hostPort: taken }] });
    try {
      const err = await publishing
        .start({
          workerId: "wport1",
          endpointId: "e2",
          endpointName: "api",
          app: "a",
          env: "e",
          artifactPath: build.artifactPath,
          apiUrl: service!.url,
          workerToken: "t",
          environment: {},
          maxConcurrency: 1,
          computeType: "CPU",
          gpuTypeIds: [],
          onLog: () => undefined,
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UserError);
      expect(errorMessage(err)).toMatch(/published port is in use/);
    } finally {
      await publishing.close();
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    }
    expect(await leftovers(publishing.session)).toEqual({ containers: [], networks: [], volumes: [] });
  }, 60_000);

  it("close() leaves no container, network or volume of the session behind", async () => {
    expect((await leftovers(driver.session)).containers.length).toBeGreaterThan(0);
    await service!.close();
    closed = true;
    expect(await leftovers(driver.session)).toEqual({ containers: [], networks: [], volumes: [] });
  }, 60_000);
});
