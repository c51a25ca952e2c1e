// How a worker container is confined, asked from inside it, against the real service and a real engine
// (fixtures/docker-isolation): the worker's handler reports its uid, capabilities, no-new-privileges, where it may
// write and how much, how many processes it may start, its memory limit, and what of the host it sees; the engine's
// inspect confirms the rest. Both ways a container becomes a worker are checked: a pre-booted container claimed by
// a cold start (its memory and CPU set by the claim) and a fresh one (an endpoint with a network volume); and a
// load-balanced worker, still reached through the service. Under gVisor (runsc) when the engine has that runtime.

import { mkdirSync, mkdtempSync, cpSync, rmSync, symlinkSync } from "node:fs";
import { release, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProject, type BuildResult } from "../../src/build/index.js";
import { createDockerDriver, type DockerDriver } from "../../src/drivers/docker.js";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { UserError } from "../../src/errors.js";
import { lbEndpointUrl } from "../../src/service/lb/address.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { startServerProcess } from "../server-process.js";
import { describeDocker, docker, engineUp, leftovers } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "docker-isolation-admin-key";
/** Set in the service's own environment: a worker must not see it. */
const HOST_MARKER = "SVC_TEST_HOST_ONLY_SECRET";
const PIDS = 64;
const GVISOR_PIDS = 256;
const TMP_MB = 64;
const NO_CAPS = "0000000000000000";

let dir: string;
let build: BuildResult;

interface Probe {
  host: string;
  uid: number;
  gid: number;
  capEff: string | null;
  capBnd: string | null;
  capPrm: string | null;
  noNewPrivs: string | null;
  home: string | null;
  writeHome: string | null;
  writeRuntime: string | null;
  writeTmp: string | null;
  tmpBytes: number;
  tmpMount: string | null;
  overfillTmp: string | null;
  pidsMax: string | null;
  memoryMax: string | null;
  spawned: { started: number; refusal: string | null } | null;
  kernel: string;
  dockerSocket: boolean;
  envNames: string[];
}

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

/** A service with this driver and the fixture deployed; its endpoints by name. */
async function serve(driver: DockerDriver, name: string): Promise<{ service: Service; endpoints: Record<string, DeployedEndpoint> }> {
  const service = await startService({ dataDir: join(dir, name), apiKeys: [KEY], driver, leaseMs: 3000, heartbeatMs: 500 });
  try {
    const deployed = await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath });
    return { service, endpoints: Object.fromEntries(deployed.map((e) => [e.name, e])) };
  } catch (err) {
    // Its scaler would go on starting workers after the suite's clean-up.
    await service.close();
    throw err;
  }
}

async function probeJob(endpoint: DeployedEndpoint, input: Record<string, unknown> = {}): Promise<Probe> {
  const r = await call(`${endpoint.url}/runsync?wait=90000`, { input });
  expect(r.body).toMatchObject({ status: "COMPLETED" });
  return r.body.output as Probe;
}

/** The worker's container, by the hostname its handler reported (a container's hostname is its id). */
async function containerOf(probe: Probe) {
  return docker.getContainer(probe.host).inspect();
}

/** What is confined the same whichever way the container became a worker. */
function expectConfined(probe: Probe) {
  expect({ uid: probe.uid, gid: probe.gid }).toEqual({ uid: 1000, gid: 1000 });
  // Non-root already has no effective capabilities; the bounding set is what dropping them all empties.
  expect({ capEff: probe.capEff, capPrm: probe.capPrm, capBnd: probe.capBnd }).toEqual({ capEff: NO_CAPS, capPrm: NO_CAPS, capBnd: NO_CAPS });
  // The root filesystem is read-only: even the worker's own home refuses a write. /tmp takes them, HOME points there.
  expect({ writeHome: probe.writeHome, writeTmp: probe.writeTmp, home: probe.home }).toEqual({ writeHome: "EROFS", writeTmp: null, home: "/tmp" });
  // svc's runtime files are root's: refused either way (gVisor checks the permission first).
  expect(["EROFS", "EACCES"]).toContain(probe.writeRuntime);
  expect(probe.dockerSocket).toBe(false);
  expect(probe.envNames).not.toContain(HOST_MARKER);
  // Only what the image and the protocol give (a CPU worker's empty GPU assignment included, and the S3 key of its
  // endpoint's volume where it has one), and the endpoint's own (none here).
  const given = [
    "PATH",
    "HOME",
    "HOSTNAME",
    "NODE_ENV",
    "NODE_EXTRA_CA_CERTS",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "BUCKET_ENDPOINT_URL",
    "BUCKET_ACCESS_KEY_ID",
    "BUCKET_SECRET_ACCESS_KEY",
  ];
  expect(probe.envNames.filter((name) => !/^SVC_/.test(name) && !given.includes(name))).toEqual([]);
}

beforeAll(async () => {
  if (!engineUp) return;
  process.env[HOST_MARKER] = "the service's own";
  dir = mkdtempSync(join(tmpdir(), "svc-docker-isolation-test-"));
  cpSync(join(repo, "fixtures", "docker-isolation"), join(dir, "app"), { recursive: true });
  mkdirSync(join(dir, "app", "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(dir, "app", "node_modules", "svc"), "dir");
  build = await buildProject(join(dir, "app"));
}, 120_000);

afterAll(() => {
  delete process.env[HOST_MARKER];
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describeDocker("worker containers are confined (runc)", () => {
  let driver: DockerDriver;
  let service: Service | undefined;
  let endpoints: Record<string, DeployedEndpoint> = {};

  beforeAll(async () => {
    driver = createDockerDriver({ networkScope: "session", volumeLifetime: "session", pool: { cpu: 1 }, limits: { pidsLimit: PIDS, tmpMb: TMP_MB } });
    await driver.prepare(["cpu"]);
    ({ service, endpoints } = await serve(driver, "runc"));
    // The cold start of `probe` is to claim the pre-booted container.
    await until(async () => driver.pooledContainers().length === 1, 60_000);
  }, 180_000);

  afterAll(async () => {
    await service?.close();
    if (driver) await cleanupStale({ [LABELS.session]: driver.session }, { docker }).catch(() => undefined);
  });

  it("says how its containers are confined", async () => {
    expect(await driver.isolation()).toMatch(
      /^runtime runc \(the host's kernel, shared\); uid 1000, no capabilities, no-new-privileges, read-only root, \/tmp 64 MiB, at most 64 processes/,
    );
  });

  it.each([
    ["a claimed pre-booted container", "probe", true],
    ["a fresh container", "probe-volume", false],
  ])(
    "%s: non-root, no capabilities, no-new-privileges, read-only root, bounded /tmp, processes and memory limited, nothing of the host",
    async (_, name, pooled) => {
      const probe = await probeJob(endpoints[name]!, { tmpMb: TMP_MB, spawnUpTo: 40 });
      const inspected = await containerOf(probe);
      // A pre-booted container keeps the pool's label (labels are fixed when a container is created).
      expect(inspected.Config.Labels[LABELS.pool] === "true").toBe(pooled);
      expectConfined(probe);
      expect(probe.noNewPrivs).toBe("1");
      // /tmp: a tmpfs of the driver's size, where unpacked native code may run (exec), nothing setuid, no devices.
      expect(probe.tmpBytes).toBe(TMP_MB * 1024 * 1024);
      expect(probe.tmpMount).toMatch(/^tmpfs \/tmp tmpfs rw,nosuid,nodev,/);
      expect(probe.tmpMount).not.toMatch(/noexec/);
      expect(probe.overfillTmp).toBe("ENOSPC");
      // The process limit holds: children are refused well before 40 (each node child holds several threads).
      expect(probe.pidsMax).toBe(String(PIDS));
      expect(probe.spawned!.refusal).toBe("EAGAIN");
      expect(probe.spawned!.started).toBeLessThan(PIDS);
      // cpu3c-1-2: 1 vCPU and 2 GiB, without swap beyond it.
      expect(probe.memoryMax).toBe(String(2 * 1024 ** 3));
      expect(inspected.HostConfig).toMatchObject({
        Memory: 2 * 1024 ** 3,
        MemorySwap: 2 * 1024 ** 3,
        NanoCpus: 1e9,
        PidsLimit: PIDS,
        ReadonlyRootfs: true,
        CapDrop: ["ALL"],
        SecurityOpt: ["no-new-privileges"],
      });
      expect(inspected.HostConfig.Privileged).toBe(false);
      expect(inspected.Config.User).toBe("1000:1000");
      expect(inspected.Mounts.some((m) => /docker\.sock/.test(m.Source ?? ""))).toBe(false);
    },
    120_000,
  );

  it("a load-balanced worker under the same confinement is reached through the service", async () => {
    const endpoint = endpoints["probe-lb"]!;
    const response = await fetch(`${lbEndpointUrl(service!.url, endpoint.id)}/probe`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(response.status).toBe(200);
    const probe = (await response.json()) as Probe;
    expectConfined(probe);
    expect(probe.noNewPrivs).toBe("1");
    // cpu3c-2-4: 2 vCPUs and 4 GiB.
    expect(probe.memoryMax).toBe(String(4 * 1024 ** 3));
    expect((await containerOf(probe)).HostConfig).toMatchObject({ NanoCpus: 2e9, ReadonlyRootfs: true, CapDrop: ["ALL"] });
  }, 120_000);

  it("svc server says which isolation is in force when it starts, and warns when the runtime it was given is missing", async () => {
    const runc = await startServerProcess({
      dataDir: join(dir, "server-runc"),
      workers: "docker",
      env: { SVC_DOCKER_RUNTIME: "runc", SVC_WORKER_TMP_MB: "128" },
    });
    try {
      expect(runc.log()).toMatch(
        /worker isolation: runtime runc \(the host's kernel, shared\); uid 1000, no capabilities, no-new-privileges, read-only root, \/tmp 128 MiB, at most 1024 processes/,
      );
    } finally {
      await runc.stop();
    }
    const missing = await startServerProcess({ dataDir: join(dir, "server-missing"), workers: "docker", env: { SVC_DOCKER_RUNTIME: "svc-no-such-runtime" } });
    try {
      expect(missing.log()).toMatch(/worker isolation: could not be read \(The Docker engine has no runtime "svc-no-such-runtime"/);
    } finally {
      await missing.stop();
    }
  }, 60_000);

  it("a runtime the engine does not have: every start fails at once, naming it and how to register one", async () => {
    const missing = createDockerDriver({ networkScope: "session", runtime: "svc-no-such-runtime" });
    try {
      const started = Date.now();
      const err = await missing
        .start({
          workerId: "wrt1",
          endpointId: "e1",
          endpointName: "probe",
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
      expect((err as UserError).message).toMatch(/The Docker engine has no runtime "svc-no-such-runtime" to run workers under \(it has: .*runc/);
      expect((err as UserError).hint).toMatch(/ensure-docker\.sh/);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await missing.close();
    }
    expect(await leftovers(missing.session)).toEqual({ containers: [], networks: [], volumes: [] });
  }, 30_000);
});

// gVisor needs its runtime registered with the engine (scripts/ensure-docker.sh does, where runsc is installed).
const engineRuntimes = engineUp ? Object.keys(((await docker.info()) as { Runtimes?: Record<string, unknown> }).Runtimes ?? {}) : [];
const hasRunsc = engineRuntimes.includes("runsc");
if (engineUp && !hasRunsc)
  process.stderr.write(
    `[svc tests] skipping the gVisor isolation test: the Docker engine has no "runsc" runtime (it has ${engineRuntimes.join(", ")}); apt-get install runsc, then scripts/ensure-docker.sh registers it\n`,
  );

(hasRunsc ? describe : describe.skip)("worker containers under gVisor (runsc)", () => {
  let driver: DockerDriver;
  let service: Service | undefined;
  let endpoints: Record<string, DeployedEndpoint> = {};

  beforeAll(async () => {
    // A pool is asked for and refused: runsc cannot change a running container's limits, which a claim sets.
    const log: string[] = [];
    // gVisor's own threads (and, on its ptrace platform, a host task per thread of the worker) count against the
    // container's process limit: 64 does not start a node worker there; 128 does.
    driver = createDockerDriver({
      networkScope: "session",
      volumeLifetime: "session",
      runtime: "runsc",
      pool: 1,
      limits: { pidsLimit: GVISOR_PIDS, tmpMb: TMP_MB },
      log: (m) => log.push(m),
    });
    expect(log).toEqual([expect.stringMatching(/^no pre-booted worker containers under runtime runsc/)]);
    await driver.prepare(["cpu"]);
    ({ service, endpoints } = await serve(driver, "runsc"));
  }, 180_000);

  afterAll(async () => {
    await service?.close();
    if (driver) await cleanupStale({ [LABELS.session]: driver.session }, { docker }).catch(() => undefined);
  });

  it("runs the worker on gVisor's kernel, confined as under runc", async () => {
    expect(await driver.isolation()).toMatch(/^runtime runsc \(gVisor: a kernel of its own per container\)/);
    const probe = await probeJob(endpoints["probe"]!, { tmpMb: TMP_MB });
    // gVisor's kernel answers, not the host's.
    expect(probe.kernel).not.toBe(release());
    expectConfined(probe);
    expect(probe.tmpBytes).toBe(TMP_MB * 1024 * 1024);
    expect(probe.overfillTmp).toBe("ENOSPC");
    const inspected = await containerOf(probe);
    // gVisor's /proc/self/status has no NoNewPrivs line: the engine says it was asked.
    expect(inspected.HostConfig).toMatchObject({
      Runtime: "runsc",
      SecurityOpt: ["no-new-privileges"],
      CapDrop: ["ALL"],
      ReadonlyRootfs: true,
      PidsLimit: GVISOR_PIDS,
      Memory: 2 * 1024 ** 3,
      NanoCpus: 1e9,
    });
  }, 120_000);
});
