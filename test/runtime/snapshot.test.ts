// Snapshots of initialised workers (process driver, real CRIU, a real service, real builds and runtimes): an
// endpoint whose constructor takes ~2 s answers from workers restored from a checkpoint taken after it ran once;
// two restored workers are different workers (identity, tokens, random numbers); a deploy of new code takes a new
// snapshot and removes the old one; where CRIU cannot run, workers start as usual and a notice says why.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver, type ProcessDriver } from "../../src/drivers/process.js";
import { checkpointProblem } from "../../src/drivers/criu.js";
import { createSnapshotStore, snapshotKey, templateEnvironment } from "../../src/drivers/snapshot.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "snapshot-admin-key";

// Whether real checkpoints can be taken here: the service's own dry run (a tiny process dumped and restored), not
// `criu check` alone, which passes on hosts where a dump then never ends.
const unavailable = await checkpointProblem();
if (unavailable) console.warn(`test/runtime/snapshot.test.ts: checkpoint tests skipped: ${unavailable}`);

describe.skipIf(unavailable !== undefined)("snapshots with CRIU", () => {
  let dir: string;
  let counter: string;
  let driver: ProcessDriver;
  let service: Service;
  let endpoint: DeployedEndpoint;
  const previousCounter = process.env.SNAPSHOT_COUNTER;

  let lastBuild: Awaited<ReturnType<typeof buildProject>>;
  const build = async () => {
    const b = (lastBuild = await buildProject(join(dir, "app")));
    return (await service.deploy({ app: b.manifest.app, env: "test", manifest: b.manifest, artifactPath: b.artifactPath }))[0]!;
  };
  const constructions = () => (existsSync(counter) ? readFileSync(counter, "utf8").split("\n").filter(Boolean).length : 0);
  const atZero = async () => {
    const h = (await call(`${endpoint.url}/health`, { key: KEY })).body;
    return h.workers.idle + h.workers.running + h.workers.initializing === 0 ? true : undefined;
  };
  const run = async (input: unknown = {}) => {
    const r = await call(`${endpoint.url}/runsync`, { key: KEY, body: { input } });
    expect(r.body.status).toBe("COMPLETED");
    return r.body.output;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-snapshot-test-"));
    counter = join(dir, "constructions.txt");
    // The fixture's constructor writes here; workers get this variable of the service's because the driver's
    // allow-list names it (the environment is otherwise the allow-list's only).
    process.env.SNAPSHOT_COUNTER = counter;
    cpSync(join(repo, "fixtures", "snapshot-app"), join(dir, "app"), { recursive: true });
    mkdirSync(join(dir, "app", "node_modules"));
    symlinkSync(join(repo, "packages", "svc"), join(dir, "app", "node_modules", "svc"), "dir");
    driver = createProcessDriver({
      runtimeEntry: join(repo, "dist", "runtime", "worker.js"),
      cacheDir: join(dir, "cache"),
      snapshotDir: join(dir, "snapshots"),
      envAllow: ["SNAPSHOT_COUNTER"],
    });
    service = await startService({ dataDir: join(dir, "data"), apiKeys: [KEY], driver });
    endpoint = await build();
  }, 120_000);
  afterAll(async () => {
    await service?.close();
    if (previousCounter === undefined) delete process.env.SNAPSHOT_COUNTER;
    else process.env.SNAPSHOT_COUNTER = previousCounter;
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("answers from restored workers without running the constructor again", async () => {
    const first = await run();
    // The constructor ran once, in the template the snapshot was taken of; the worker that answered was restored
    // from it (PID 1 of its own PID namespace) and has the table.
    expect(first.rows).toBe(300_000);
    expect(first.constructions).toBe(1);
    expect(first.pid).toBe(1);
    expect(driver.snapshotImages(endpoint.id)).toHaveLength(1);
    // Scaled to zero and started again: restored again, still no construction.
    await until(atZero, 30_000);
    const again = await run();
    expect(again.workerId).not.toBe(first.workerId);
    expect(again.constructions).toBe(1);
    expect(constructions()).toBe(1);
  }, 120_000);

  it("gives two workers restored at once their own identity and random numbers", async () => {
    await until(atZero, 30_000);
    // Two jobs that each hold a worker for a while: the scaler starts two workers, both restored from the image.
    const [a, b] = await Promise.all([run({ waitMs: 2500 }), run({ waitMs: 2500 })]);
    expect([a.pid, b.pid]).toEqual([1, 1]);
    expect(a.workerId).toBeTruthy();
    expect(b.workerId).toBeTruthy();
    expect(a.workerId).not.toBe(b.workerId);
    expect(a.uuid).not.toBe(b.uuid);
    expect(a.web).not.toBe(b.web);
    expect(a.bytes).not.toBe(b.bytes);
    expect(a.random).not.toBe(b.random);
    expect([a.constructions, b.constructions]).toEqual([1, 1]);
    // Both really ran as separate workers (each registered with its own token): the service counts two.
    const workers = (await call(`${endpoint.url}/health`, { key: KEY })).body.workers;
    expect(workers.idle + workers.running).toBe(2);
  }, 120_000);

  it("takes a new snapshot when a deploy changes the code, and removes the old one", async () => {
    const [before] = driver.snapshotImages(endpoint.id);
    await until(atZero, 30_000);
    const source = join(dir, "app", "src", "model.ts");
    writeFileSync(source, readFileSync(source, "utf8").replace("const VERSION = 1;", "const VERSION = 2;"));
    endpoint = await build();
    const output = await run();
    // The new revision's worker never comes from the old image: the constructor ran again (for its template).
    expect(output.version).toBe(2);
    expect(output.constructions).toBe(2);
    const images = driver.snapshotImages(endpoint.id);
    expect(images).toHaveLength(1);
    expect(images[0]).not.toBe(before);
    expect(existsSync(before!)).toBe(false);
  }, 120_000);

  it("starts a worker without the snapshot when its image cannot be restored, and drops that image", async () => {
    const [image] = driver.snapshotImages(endpoint.id);
    await until(atZero, 30_000);
    // A damaged image (as one taken under another kernel would be): the restore fails.
    writeFileSync(join(image!, "pstree.img"), "damaged");
    const before = constructions();
    const output = await run();
    // Answered all the same, by a fresh worker that ran the constructor itself.
    expect(output.pid).not.toBe(1);
    expect(output.constructions).toBe(before + 1);
    expect(existsSync(image!)).toBe(false);
  }, 120_000);

  it("starts workers without a snapshot when the template does not initialise, or not in time", async () => {
    const notices: string[] = [];
    const logs: string[] = [];
    const launch = {
      workerId: "w1",
      endpointId: "e-broken",
      endpointName: "broken",
      computeType: "CPU",
      revision: "r1",
      onLog: (l: { text: string }) => logs.push(l.text),
    } as never;
    const failing = join(dir, "failing-runtime.mjs");
    writeFileSync(failing, 'console.error("model file missing"); process.exit(3);\n');
    const broken = createSnapshotStore({
      dir: join(dir, "broken-snapshots"),
      runtimeEntry: failing,
      nodePath: process.execPath,
      notice: (t) => notices.push(t),
    });
    expect(await broken.restore(launch, {}, dir)).toBeUndefined();
    expect(notices.join("\n")).toMatch(/snapshot of endpoint broken not used \(the template did not finish its initialisation \(exited with code 3\)\)/);
    // What the template said is in the worker's log.
    expect(logs).toContain("model file missing");
    // Not tried again for the same key: no second template.
    expect(await broken.restore(launch, {}, dir)).toBeUndefined();
    expect(logs.filter((l) => l === "model file missing")).toHaveLength(1);

    const hanging = join(dir, "hanging-runtime.mjs");
    writeFileSync(hanging, "setInterval(() => undefined, 1000);\n");
    const slow = createSnapshotStore({
      dir: join(dir, "slow-snapshots"),
      runtimeEntry: hanging,
      nodePath: process.execPath,
      templateTimeoutMs: 500,
      notice: (t) => notices.push(t),
    });
    const started = Date.now();
    try {
      expect(await slow.restore({ ...(launch as object), endpointName: "slow" } as never, {}, dir)).toBeUndefined();
    } finally {
      slow.killTemplates();
    }
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(notices.join("\n")).toMatch(/snapshot of endpoint slow not used \(the template did not finish its initialisation \(timed out\)\)/);
  }, 60_000);

  it("lets a restarted service adopt a restored worker (found by pid and start time, not its image's environment)", async () => {
    const stateDir = join(dir, "adopt-state");
    const options = {
      runtimeEntry: join(repo, "dist", "runtime", "worker.js"),
      cacheDir: join(dir, "cache"),
      snapshotDir: join(dir, "adopt-snapshots"),
      stateDir,
    };
    const first = createProcessDriver(options);
    const launch = {
      workerId: "adopted-worker",
      endpointId: "adopt-endpoint",
      endpointName: "model",
      app: "a",
      env: "test",
      artifactPath: lastBuild.artifactPath,
      // Nobody answers there: the worker keeps retrying, alive, as one whose service crashed.
      apiUrl: "http://127.0.0.1:9",
      workerToken: "token",
      environment: {},
      maxConcurrency: 1,
      revision: "r1",
      computeType: "CPU" as const,
      gpuTypeIds: [],
      snapshot: true,
      onLog: () => undefined,
    };
    const handle = await first.start(launch);
    const second = createProcessDriver(options);
    try {
      const record = JSON.parse(readFileSync(join(stateDir, "adopted-worker.json"), "utf8"));
      expect(readFileSync(`/proc/${record.pid}/environ`, "utf8")).not.toContain("SVC_WORKER_ID=adopted-worker");
      const adopted = await second.adopt!();
      expect(adopted.map((a) => [a.handle.workerId, a.ended ?? false])).toEqual([["adopted-worker", false]]);
      // The adopted handle reaches the restored process itself: killing it ends the worker.
      adopted[0]!.handle.kill();
      await adopted[0]!.handle.exited;
      await handle.exited;
    } finally {
      handle.kill();
      await second.close();
      await first.close();
    }
  }, 120_000);
});

describe("where snapshots cannot be taken", () => {
  // Each test's snapshot directory, removed after it.
  const scratchDirs: string[] = [];
  const scratch = (prefix: string) => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    scratchDirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of scratchDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it("starts workers without one and says why, once", async () => {
    const notices: string[] = [];
    const store = createSnapshotStore({
      dir: scratch("svc-snapshot-none-"),
      runtimeEntry: "unused",
      nodePath: process.execPath,
      criu: "/nonexistent/criu",
      notice: (t) => notices.push(t),
    });
    const launch = { workerId: "w1", endpointId: "e1", endpointName: "model", computeType: "CPU", onLog: () => undefined } as never;
    expect(await store.restore(launch, {}, tmpdir())).toBeUndefined();
    expect(await store.restore({ ...(launch as object), workerId: "w2" } as never, {}, tmpdir())).toBeUndefined();
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/snapshots are off for endpoint model: .*criu is not installed/);
  });

  it("never checkpoints a GPU endpoint's worker", async () => {
    const notices: string[] = [];
    const store = createSnapshotStore({
      dir: scratch("svc-snapshot-gpu-"),
      runtimeEntry: "unused",
      nodePath: process.execPath,
      notice: (t) => notices.push(t),
    });
    const launch = { workerId: "w1", endpointId: "e1", endpointName: "llm", computeType: "GPU", onLog: () => undefined } as never;
    expect(await store.restore(launch, {}, tmpdir())).toBeUndefined();
    expect(notices.join("\n")).toMatch(/snapshots are off for endpoint llm: GPU memory cannot be checkpointed by CRIU/);
  });
});

describe.skipIf(process.platform !== "linux" || process.getuid?.() !== 0)("where a checkpoint makes no progress", () => {
  // A fake CRIU (named so) whose `check` passes and whose dump and restore write a line and then hang, as CRIU does
  // on a host without CAP_SYS_RESOURCE.
  const hangingCriu = join(repo, "test", "fakes", "criu", "hanging-criu");
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "svc-snapshot-hang-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const launch = (logs: string[], endpointName: string) =>
    ({
      workerId: "w1",
      endpointId: `e-${endpointName}`,
      endpointName,
      computeType: "CPU",
      revision: "r1",
      onLog: (l: { text: string }) => logs.push(l.text),
    }) as never;
  const pgrep = (pattern: string) => spawnSync("pgrep", ["-f", pattern], { encoding: "utf8" }).stdout.trim();

  it("answers the first job promptly from a fresh worker and says why in the endpoint's logs", async () => {
    const app = join(dir, "app");
    cpSync(join(repo, "fixtures", "snapshot-app"), app, { recursive: true });
    mkdirSync(join(app, "node_modules"));
    symlinkSync(join(repo, "packages", "svc"), join(app, "node_modules", "svc"), "dir");
    const driver = createProcessDriver({
      runtimeEntry: join(repo, "dist", "runtime", "worker.js"),
      cacheDir: join(dir, "cache"),
      snapshotDir: join(dir, "snapshots"),
      criuPath: hangingCriu,
      probeSnapshots: true,
    });
    const service = await startService({ dataDir: join(dir, "data"), apiKeys: [KEY], driver });
    try {
      const b = await buildProject(app);
      const [endpoint] = await service.deploy({ app: b.manifest.app, env: "test", manifest: b.manifest, artifactPath: b.artifactPath });
      const started = Date.now();
      const r = await call(`${endpoint!.url}/runsync`, { key: KEY, body: { input: {} } });
      const tookMs = Date.now() - started;
      expect(r.body.status).toBe("COMPLETED");
      // A fresh worker (not PID 1 of a restored namespace) that ran the ~2 s constructor itself, within seconds of
      // the dry run's bound rather than the dump's old five minutes.
      expect(r.body.output.pid).not.toBe(1);
      expect(tookMs).toBeLessThan(20_000);
      expect(await driver.snapshotProblem()).toMatch(/dry-run `criu dump` made no progress for 3 s/);
      const logs = (await call(`${service.url}/v1/endpoints/${endpoint!.id}/logs`, { key: KEY })).body.lines.map((l: { text: string }) => l.text);
      expect(logs.filter((t: string) => t.includes("[svc] snapshots are off: a dry-run `criu dump` made no progress"))).toHaveLength(1);
    } finally {
      await service.close();
    }
  }, 120_000);

  it("abandons a dump that makes no progress within its bound and stops the template", async () => {
    const logs: string[] = [];
    const notices: string[] = [];
    const runtime = join(dir, "ready-runtime.mjs");
    // A template that initialises at once and waits to be checkpointed, as the runtime does.
    writeFileSync(
      runtime,
      'import { writeSync } from "node:fs";\nwriteSync(Number(process.env.SVC_SNAPSHOT_READY_FD), "ready\\n");\nsetInterval(() => undefined, 1000);\n',
    );
    const store = createSnapshotStore({
      dir: join(dir, "dump-snapshots"),
      runtimeEntry: runtime,
      nodePath: process.execPath,
      criu: hangingCriu,
      stallMs: 1_000,
      // The fake host passes its dry run, so the dump itself is what hangs.
      hostProbe: async () => undefined,
      notice: (t) => notices.push(t),
    });
    const started = Date.now();
    expect(await store.restore(launch(logs, "dumped"), {}, dir)).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(6_000);
    expect(notices.join("\n")).toMatch(/snapshot of endpoint dumped not used \(criu dump made no progress for 1 s \(.*RLIMIT_NOFILE.*\); abandoned\)/);
    expect(logs.join("\n")).toMatch(/\[svc\] snapshot not used: criu dump made no progress/);
    await until(async () => (pgrep(runtime) === "" && pgrep("hanging-criu") === "" ? true : undefined), 5_000);
  }, 60_000);

  it("abandons a restore that makes no progress within its bound, drops the image and starts fresh", async () => {
    const logs: string[] = [];
    const notices: string[] = [];
    const runtime = join(dir, "restore-runtime.mjs");
    writeFileSync(runtime, "setInterval(() => undefined, 1000);\n");
    const snapshots = join(dir, "restore-snapshots");
    // An image that exists (as one a working dump left), restored by a CRIU that hangs.
    const options = {
      dir: snapshots,
      runtimeEntry: runtime,
      nodePath: process.execPath,
      criu: hangingCriu,
      stallMs: 1_000,
      hostProbe: async () => undefined,
      notice: (t: string) => notices.push(t),
    };
    const imageDir = join(
      snapshots,
      "e-restored",
      snapshotKey({ endpointId: "e-restored", revision: "r1" }, templateEnvironment({}), {
        entry: runtime,
        node: process.execPath,
        nodeVersion: process.version,
        entryModified: statSync(runtime).mtimeMs,
      }),
    );
    mkdirSync(imageDir, { recursive: true });
    writeFileSync(join(imageDir, "ready"), "{}");
    const store = createSnapshotStore(options);
    expect(store.imageDirs("e-restored")).toEqual([imageDir]);
    const started = Date.now();
    expect(await store.restore(launch(logs, "restored"), {}, dir)).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(6_000);
    expect(notices.join("\n")).toMatch(/snapshot of endpoint restored not used \(criu restore made no progress for 1 s .*; abandoned\)/);
    expect(existsSync(imageDir)).toBe(false);
    await until(async () => (pgrep("hanging-criu") === "" ? true : undefined), 5_000);
  }, 60_000);
});
