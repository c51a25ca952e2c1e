// The deploy module without HTTP: a real SQLite store in a temporary directory, the real job engine, endpoint
// registry, release manager, scaler, secrets and management records; only the driver is a fake, whose workers
// come up (or crash) and stop when told, as a worker process would.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch } from "../../drivers/types.js";
import type { Manifest, ManifestResource } from "svc/internal";
import { EndpointRegistry } from "../endpoints/registry.js";
import { engineEndpoint } from "../endpoints/rows.js";
import { JobEngine } from "../engine/index.js";
import { Management } from "../management/index.js";
import { openSqliteManagementStore } from "../management/store.js";
import { ReleaseManager } from "../releases/manager.js";
import { Scaler } from "../workers/scaler.js";
import { SecretBox, loadSecretKeys } from "../secrets/box.js";
import { Secrets } from "../secrets/index.js";
import { openSqliteSecretStore } from "../secrets/store.js";
import { openSqliteStore } from "../store/sqlite.js";
import { SQLITE_MIGRATIONS } from "../schema/sqlite.js";
import { DeployError, Deployments, ReleaseFailedError, keepArtifactFile, type EnvironmentRef } from "./deployments.js";

function resource(overrides: Partial<ManifestResource> = {}): ManifestResource {
  return {
    is_load_balanced: false,
    imageName: "svc-worker:cpu",
    workersMin: 0,
    workersMax: 2,
    gpuIds: "",
    env: {},
    functions: [{ name: "echo", module: "src/index.ts", export: "echo", kind: "function" }],
    computeType: "CPU",
    gpuTypeIds: [],
    instanceIds: ["cpu3c-1-2"],
    dependencies: [],
    idleTimeout: 60,
    executionTimeoutMs: 600_000,
    maxConcurrency: 1,
    retries: 1,
    volume: null,
    handler: "endpoints/echo/handler.mjs",
    ...overrides,
  };
}

function manifest(resources: Record<string, ManifestResource>, fingerprint: string): Manifest {
  return { version: 1, app: "shop", fingerprint, svcVersion: "0.1.0", resources, routes: {}, excluded: [] };
}

/** Workers that register as soon as they start (their handler loaded), or exit at once with code 1. */
class FakeDriver implements WorkerDriver {
  readonly name = "process" as const;
  readonly started: WorkerLaunch[] = [];
  readonly exited: string[] = [];
  crash = false;
  /** How long a worker takes to exit once asked to stop; Infinity: it never does. */
  stopMs = 0;
  onStarted: (launch: WorkerLaunch) => void = () => undefined;
  private readonly ends: Array<() => void> = [];

  async start(launch: WorkerLaunch): Promise<WorkerHandle> {
    this.started.push(launch);
    let exit!: (e: WorkerExit) => void;
    const exited = new Promise<WorkerExit>((resolve) => (exit = resolve));
    const end = (e: WorkerExit) => {
      if (!this.exited.includes(launch.workerId)) this.exited.push(launch.workerId);
      exit(e);
    };
    this.ends.push(() => end({ code: null, signal: "SIGKILL" }));
    setImmediate(() => (this.crash ? end({ code: 1, signal: null }) : this.onStarted(launch)));
    return {
      workerId: launch.workerId,
      exited,
      stop: async () => {
        if (this.stopMs !== Infinity) setTimeout(() => end({ code: 0, signal: null }), this.stopMs);
        return exited;
      },
      kill: () => end({ code: null, signal: "SIGKILL" }),
    };
  }

  /** Every worker ends now, those that would not stop included. */
  async close(): Promise<void> {
    for (const end of this.ends) end();
  }
}

const dirs: string[] = [];
const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const ref: EnvironmentRef = { userId: "alice", app: "shop", env: "prod" };

async function setup(options: { driver?: boolean } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "svc-deployments-"));
  dirs.push(dir);
  const file = join(dir, "svc.sqlite");
  const store = openSqliteStore(file, SQLITE_MIGRATIONS);
  const managementStore = openSqliteManagementStore(file);
  const secretStore = openSqliteSecretStore(file);
  const engine = new JobEngine(store, { leaseMs: 30_000, heartbeatMs: 5_000 });
  await engine.load([]);
  const endpoints = new EndpointRegistry(engine);
  const logs: string[] = [];
  const log = (m: string) => logs.push(m);
  const driver = new FakeDriver();
  let scaler: Scaler | undefined;
  const releases = new ReleaseManager({ write: (ops) => engine.write(ops), runner: () => scaler, log, attempts: 2, startTimeoutMs: 10_000 });
  if (options.driver !== false) {
    scaler = new Scaler({
      engine,
      driver,
      apiUrl: "http://127.0.0.1:9",
      endpoints: () => endpoints.values(),
      mintWorkerKeys: async () => ({ workerToken: "token", apiKey: "key" }),
      revokeWorkerKeys: async () => undefined,
      onLog: () => undefined,
      probeReady: (workerId) => releases.proven(workerId),
      onProbeExit: (workerId, exit) => releases.exited(workerId, exit),
    });
  }
  // As the service wires them: a release hears its probe is up from the worker registry.
  engine.workerEvents.on("ready", ({ worker }) => releases.ready(worker.id));
  // What the worker routes do when a queue worker registers.
  driver.onStarted = (launch) => void engine.register(launch.workerId, launch.endpointId, 1);
  const management = new Management({ dataDir: dir, store: managementStore, operatorUser: "alice", engineEndpoint });
  const appChanged = vi.spyOn(management, "appChanged");
  const secrets = new Secrets(secretStore, new SecretBox(loadSecretKeys(dir)), log);
  const published: string[] = [];
  const deployments = new Deployments({
    store,
    write: (ops) => engine.write(ops),
    dropEndpoint: (id) => engine.dropEndpoint(id),
    endpoints,
    dataDir: dir,
    artifacts: { publish: async (path) => void published.push(path) },
    releases,
    scaler: () => scaler,
    management,
    secrets,
    gpus: () => undefined,
    log,
    workersGoneTimeoutMs: 1_000,
  });
  closers.push(async () => {
    releases.close();
    await driver.close();
    await scaler?.close();
    await engine.close();
    secretStore.close();
    managementStore.close();
  });

  let builds = 0;
  /** Upload a build of these endpoints (its own bytes, so its own sha256). */
  const upload = async (resources: Record<string, ManifestResource>, fingerprint = `fp${++builds}`) => {
    const source = join(dir, `source-${builds}-${fingerprint}.tar.gz`);
    writeFileSync(source, `artifact ${fingerprint} ${JSON.stringify(resources)}`);
    return deployments.upload(ref.userId, ref.app, { ...(await keepArtifactFile(dir, source)), manifest: manifest(resources, fingerprint) });
  };
  /** A live environment running endpoints of these names. */
  const deployed = async (resources: Record<string, ManifestResource>) => {
    await deployments.createEnvironment(ref);
    const build = await upload(resources);
    const activation = await deployments.activate(ref, { build: build.id, confirmRemove: [] });
    await activation.done;
    return build;
  };
  const environment = () => deployments.environment(ref);
  const names = () => deployments.endpointsOf(ref.userId, ref.app, ref.env).map((e) => e.name);
  return { dir, store, engine, endpoints, driver, deployments, management, appChanged, secrets, published, logs, upload, deployed, environment, names };
}

/** The error an operation fails with. */
async function failure(promise: Promise<unknown>): Promise<DeployError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DeployError);
  return err as DeployError;
}

describe("Deployments.upload", () => {
  it("records the build and its app, after making the artifact reachable from every replica", async () => {
    const t = await setup();
    const build = await t.upload({ api: resource() });
    expect(t.published).toEqual([build.path]);
    expect(await t.store.build("alice", build.id)).toMatchObject({ id: build.id, app: "shop", fingerprint: "fp1", manifest: { resources: { api: {} } } });
    expect((await t.store.apps("alice")).map((a) => a.name)).toEqual(["shop"]);
  });
});

describe("Deployments.plan", () => {
  it("says what activating a build would do and changes nothing", async () => {
    const t = await setup();
    await t.deployed({ api: resource(), old: resource() });
    const next = await t.upload({ api: resource({ workersMax: 5 }), web: resource() });
    const { build, plan } = await t.deployments.plan(ref, { build: next.id });
    expect(build.id).toBe(next.id);
    expect(plan.endpoints.map((e) => [e.name, e.action])).toEqual([
      ["api", "update"],
      ["web", "create"],
    ]);
    expect(plan.remove.map((r) => r.name)).toEqual(["old"]);
    expect(t.names()).toEqual(["api", "old"]);
    expect((await t.environment())!.buildId).not.toBe(next.id);
  });

  it("plans a build not uploaded yet from its manifest (a dry run)", async () => {
    const t = await setup();
    await t.deployments.createEnvironment(ref);
    const { plan } = await t.deployments.plan(ref, { build: "a".repeat(64), manifest: manifest({ api: resource() }, "fp") });
    expect(plan.endpoints.map((e) => [e.name, e.action])).toEqual([["api", "create"]]);
  });

  it("refuses an unknown environment, saying how to create it, and an unknown build", async () => {
    const t = await setup();
    const build = await t.upload({ api: resource() });
    const noEnv = await failure(t.deployments.plan(ref, { build: build.id }));
    expect(noEnv).toMatchObject({
      failure: "not-found",
      message: 'No app "shop" with environment "prod"',
      problems: ["create it with `svc env create prod --app shop` or `svc deploy --env prod`"],
    });
    await t.deployments.createEnvironment(ref);
    const noBuild = await failure(t.deployments.plan(ref, { build: "b".repeat(64) }));
    expect(noBuild).toMatchObject({ failure: "not-found", message: `No build ${"b".repeat(64)} of app "shop"` });
    const otherApp = await failure(t.deployments.plan({ ...ref, app: "other" }, { build: build.id }));
    expect(otherApp.failure).toBe("not-found");
  });
});

describe("Deployments.activate", () => {
  it("starts the new endpoints' workers through the driver, then switches: rows, environment, release, management told", async () => {
    const t = await setup();
    await t.deployments.createEnvironment(ref);
    const build = await t.upload({ api: resource(), web: resource() });
    const activation = await t.deployments.activate(ref, { build: build.id, confirmRemove: [] });
    expect(activation.release.state).toBe("starting");
    const live = await activation.done;
    expect(live).toMatchObject({ state: "live", buildId: build.id, kind: "deploy" });
    expect(t.driver.started.map((l) => l.endpointName).sort()).toEqual(["api", "web"]);
    expect(t.names()).toEqual(["api", "web"]);
    expect(await t.environment()).toMatchObject({ buildId: build.id });
    expect((await t.store.endpoints()).map((e) => e.name).sort()).toEqual(["api", "web"]);
    expect((await t.store.releases("alice", "shop", "prod", 10))[0]).toMatchObject({ id: live.id, state: "live" });
    expect(t.appChanged).toHaveBeenCalledTimes(1);
  });

  it("a build whose workers cannot start fails to activate: nothing switched, the previous build keeps serving, management not told", async () => {
    const t = await setup();
    const first = await t.deployed({ api: resource() });
    t.appChanged.mockClear();
    t.driver.crash = true;
    const broken = await t.upload({ api: resource({ workersMax: 3 }) });
    const activation = await t.deployments.activate(ref, { build: broken.id, confirmRemove: [] });
    const err = await activation.done.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ReleaseFailedError);
    expect((err as ReleaseFailedError).release).toMatchObject({ state: "failed", previousBuildId: first.id, error: { endpoint: "api" } });
    expect(await t.environment()).toMatchObject({ buildId: first.id });
    expect(t.endpoints.get(t.deployments.endpointsOf("alice", "shop", "prod")[0]!.id)!.resource.workersMax).toBe(2);
    expect(t.appChanged).not.toHaveBeenCalled();
  });

  it("refuses, before any worker starts, a build removing endpoints not confirmed, setting reserved variables, naming unset secrets or volumes it cannot use", async () => {
    const t = await setup();
    const first = await t.deployed({ api: resource(), old: resource() });
    const started = t.driver.started.length;

    const dropsOld = await t.upload({ api: resource() });
    const unconfirmed = await failure(t.deployments.activate(ref, { build: dropsOld.id, confirmRemove: [] }));
    expect(unconfirmed).toMatchObject({ failure: "conflict", message: "Activating this build removes endpoints that were not confirmed" });
    expect(unconfirmed.problems).toEqual([expect.stringMatching(/^would remove endpoint "old" \([0-9a-f]{16}\)$/)]);

    const reserved = await t.upload({ api: resource({ env: { NODE_OPTIONS: "-r x" } }), old: resource() });
    expect(await failure(t.deployments.activate(ref, { build: reserved.id, confirmRemove: [] }))).toMatchObject({ failure: "invalid", check: "reserved-env" });

    const secret = await t.upload({ api: resource({ secrets: ["DB_PASSWORD"] }), old: resource() });
    const unset = await failure(t.deployments.activate(ref, { build: secret.id, confirmRemove: [] }));
    expect(unset).toMatchObject({ failure: "invalid", check: "secrets", message: "The release names secrets that are not set; nothing was activated" });
    expect(unset.problems).toEqual([expect.stringContaining('endpoint "api" needs secret DB_PASSWORD')]);

    const volume = await t.upload({ api: resource({ volume: "vol999999999999" }), old: resource() });
    expect(await failure(t.deployments.activate(ref, { build: volume.id, confirmRemove: [] }))).toMatchObject({ failure: "invalid", check: "volumes" });

    expect(t.driver.started.length).toBe(started);
    expect(await t.environment()).toMatchObject({ buildId: first.id });
    expect(t.names()).toEqual(["api", "old"]);
  });

  it("a release that removes endpoints settles only once their workers have exited", async () => {
    const t = await setup();
    await t.deployed({ api: resource(), old: resource({ workersMin: 1 }) });
    const oldWorker = t.driver.started.find((l) => l.endpointName === "old")!.workerId;
    t.driver.stopMs = 300;
    const next = await t.upload({ api: resource() });
    const activation = await t.deployments.activate(ref, { build: next.id, confirmRemove: ["old"] });
    await activation.done;
    expect(t.driver.exited).toContain(oldWorker);
    expect(t.names()).toEqual(["api"]);
  });
});

describe("Deployments.undeploy", () => {
  it("removes the endpoints named once their workers exited; all of them leaves the environment without a build", async () => {
    const t = await setup();
    await t.deployed({ api: resource({ workersMin: 1 }), web: resource() });
    const apiWorker = t.driver.started.find((l) => l.endpointName === "api")!.workerId;
    t.driver.stopMs = 300;
    const removed = await t.deployments.undeploy(ref, { endpoints: ["api"], all: false });
    expect(removed.map((r) => r.name)).toEqual(["api"]);
    expect(t.driver.exited).toContain(apiWorker);
    expect(t.names()).toEqual(["web"]);
    expect((await t.environment())!.buildId).not.toBeNull();

    await t.deployments.undeploy(ref, { endpoints: [], all: true });
    expect(t.names()).toEqual([]);
    expect(await t.environment()).toMatchObject({ buildId: null });
  });

  it("refuses what is not deployed, an environment that does not exist, and a request naming nothing", async () => {
    const t = await setup();
    await t.deployed({ api: resource() });
    expect(await failure(t.deployments.undeploy(ref, { endpoints: ["nope"], all: false }))).toMatchObject({
      failure: "not-found",
      message: 'No endpoint "nope" in app "shop", environment "prod"',
      problems: ["deployed: api"],
    });
    expect(await failure(t.deployments.undeploy({ ...ref, env: "staging" }, { endpoints: ["api"], all: false }))).toMatchObject({ failure: "not-found" });
    expect(await failure(t.deployments.undeploy(ref, { endpoints: [], all: false }))).toMatchObject({
      failure: "invalid",
      message: "Say which endpoints to remove",
    });
    expect(t.names()).toEqual(["api"]);
  });

  it("says so when removed endpoints' workers do not exit in time", async () => {
    const t = await setup();
    await t.deployed({ api: resource({ workersMin: 1 }) });
    t.driver.stopMs = Infinity;
    const err = await failure(t.deployments.undeploy(ref, { endpoints: ["api"], all: false }));
    expect(err).toMatchObject({ failure: "workers-running", problems: ["check again with `svc env get`"] });
    // Removed all the same: the workers are the scaler's to stop.
    expect(t.names()).toEqual([]);
  });
});

describe("Deployments.configure", () => {
  it("applies configuration from code to the deployed endpoints; a dry run only says what would change", async () => {
    const t = await setup();
    await t.deployed({ api: resource() });
    const dry = await t.deployments.configure(ref, { resources: { api: resource({ workersMax: 4 }) }, dryRun: true });
    expect(dry).toEqual([{ name: "api", id: expect.any(String), changed: ["workersMax"], restart: true }]);
    expect(t.deployments.endpointsOf("alice", "shop", "prod")[0]!.resource.workersMax).toBe(2);
    await t.deployments.configure(ref, { resources: { api: resource({ workersMax: 4 }) }, dryRun: false });
    expect(t.deployments.endpointsOf("alice", "shop", "prod")[0]!.resource.workersMax).toBe(4);
    expect((await t.store.endpoints())[0]!.resource.workersMax).toBe(4);
  });

  it("refuses a bad value, a reserved variable, a scaling policy it cannot follow and a change that needs a build", async () => {
    const t = await setup();
    await t.deployed({ api: resource() });
    expect(await failure(t.deployments.configure(ref, { resources: ["api"], dryRun: false }))).toMatchObject({
      failure: "invalid",
      message: "Send {resources} with each endpoint's configuration",
    });
    expect(await failure(t.deployments.configure(ref, { resources: { api: resource({ env: { SVC_API_KEY: "x" } }) }, dryRun: false }))).toMatchObject({
      failure: "invalid",
      check: "reserved-env",
    });
    expect(
      await failure(t.deployments.configure(ref, { resources: { api: resource({ scaler: { type: "nonsense", value: 1 } as never }) }, dryRun: false })),
    ).toMatchObject({ failure: "invalid", check: "scaler" });
    const needsBuild = await failure(t.deployments.configure(ref, { resources: { api: resource(), web: resource() }, dryRun: false }));
    expect(needsBuild).toMatchObject({ failure: "conflict", problems: ['endpoint "web" is in the code but not deployed'] });
    expect(t.deployments.endpointsOf("alice", "shop", "prod")[0]!.resource).toEqual(resource());
  });
});

describe("Deployments.deployFile (svc dev)", () => {
  it("creates the environment, records the build, removes what the code no longer has without asking, tells management and waits for removed workers", async () => {
    const t = await setup();
    const source = join(t.dir, "dev.tar.gz");
    writeFileSync(source, "first");
    const { endpoints: rows, changed } = await t.deployments.deployFile(ref, {
      manifest: manifest({ api: resource(), old: resource({ workersMin: 1 }) }, "dev1"),
      artifactPath: source,
    });
    expect(rows.map((r) => r.name)).toEqual(["api", "old"]);
    expect(changed).toEqual([]);
    const first = await t.environment();
    expect(first!.buildId).toMatch(/^[0-9a-f]{64}$/);
    expect(await t.store.build("alice", first!.buildId!)).toMatchObject({ app: "shop", fingerprint: "dev1" });
    expect(t.appChanged).toHaveBeenCalledTimes(1);

    const oldWorker = t.driver.started.find((l) => l.endpointName === "old")!.workerId;
    t.driver.stopMs = 300;
    writeFileSync(source, "second");
    const second = await t.deployments.deployFile(ref, { manifest: manifest({ api: resource({ workersMax: 2 }) }, "dev2"), artifactPath: source });
    // Its settings changed: the one endpoint left gets new workers, and says so.
    expect(second.changed).toEqual([second.endpoints[0]!.id]);
    expect(t.driver.exited).toContain(oldWorker);
    expect(t.names()).toEqual(["api"]);
    expect((await t.environment())!.buildId).not.toBe(first!.buildId);
    expect(t.appChanged).toHaveBeenCalledTimes(2);
  });

  it("is refused by the same checks as an activation, naming which", async () => {
    const t = await setup();
    const source = join(t.dir, "dev.tar.gz");
    writeFileSync(source, "bytes");
    const err = await failure(t.deployments.deployFile(ref, { manifest: manifest({ api: resource({ secrets: ["TOKEN"] }) }, "dev"), artifactPath: source }));
    expect(err).toMatchObject({ check: "secrets" });
    expect(await t.environment()).toBeUndefined();
    expect(t.driver.started).toEqual([]);
  });
});

describe("Deployments without a driver", () => {
  it("switches at once: no worker has to prove it starts, none to wait for", async () => {
    const t = await setup({ driver: false });
    await t.deployments.createEnvironment(ref);
    const build = await t.upload({ api: resource() });
    const activation = await t.deployments.activate(ref, { build: build.id, confirmRemove: [] });
    expect(activation.release.state).toBe("live");
    await activation.done;
    expect(t.names()).toEqual(["api"]);
  });
});

describe("Deployments: environments and apps", () => {
  it("creates an environment once, and deletes environments and apps with their endpoints; unknown ones are not found", async () => {
    const t = await setup();
    expect((await t.deployments.createEnvironment(ref)).created).toBe(true);
    expect((await t.deployments.createEnvironment(ref)).created).toBe(false);
    expect(await failure(t.deployments.deleteEnvironment({ ...ref, env: "nope" }))).toMatchObject({
      failure: "not-found",
      message: 'No app "shop" with environment "nope"',
    });
    expect(await failure(t.deployments.deleteApp("alice", "nope"))).toMatchObject({ failure: "not-found", message: 'No app "nope"' });
    const build = await t.upload({ api: resource() });
    await (await t.deployments.activate(ref, { build: build.id, confirmRemove: [] })).done;
    expect((await t.deployments.deleteEnvironment(ref)).map((r) => r.name)).toEqual(["api"]);
    expect(await t.environment()).toBeUndefined();
    const { environments } = await t.deployments.deleteApp("alice", "shop");
    expect(environments).toEqual([]);
    expect(await t.store.apps("alice")).toEqual([]);
  });
});
