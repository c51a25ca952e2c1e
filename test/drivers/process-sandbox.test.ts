// The process driver's sandbox (bubblewrap) with real workers: what a worker's code can reach from inside, its
// limits, its stop. A stand-in worker (fixtures/runtime-sandbox-probe) tries what a hostile tenant's handler would
// and reports each result; the same probe run without the sandbox shows every attempt succeeding, so each check
// here fails with the isolation taken out. Skipped, naming why, where bubblewrap cannot sandbox.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { createHash } from "node:crypto";
import tarStream from "tar-stream";
import type { WorkerLaunch, WorkerLogLine } from "../../src/drivers/types.js";
import { createProcessDriver, type ProcessDriver } from "../../src/drivers/process.js";
import { resolveSandbox, type Sandbox } from "../../src/drivers/sandbox/index.js";
import { errorMessage } from "../../src/errors.js";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const PROBE = join(REPO, "fixtures/runtime-sandbox-probe/probe.mjs");
const RUNTIME_ENTRY = join(REPO, "dist/runtime/worker.js");

const HANDLER = `export default { endpoint: "fns", kind: "queue", functionNames: ["f"], routes: [],
  async init() {}, invoke() { return { kind: "value", value: Promise.resolve(1) }; } };`;

const probe = (() => {
  try {
    const s = resolveSandbox({ setting: "bwrap" });
    return s.kind === "bwrap" ? { sandbox: s as Sandbox } : { skip: "no sandbox" };
  } catch (err) {
    return { skip: errorMessage(err) };
  }
})();
const usable = "sandbox" in probe;
/** Names this run's files in the host's /tmp (the unsandboxed probe writes there). */
const RUN = `svc-sandbox-probe-${process.pid}`;
if (!usable) console.warn(`process sandbox tests skipped: ${probe.skip}`);

async function tarGz(files: Record<string, string>): Promise<Buffer> {
  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const chunk of pack) chunks.push(chunk as Buffer);
  })();
  for (const [name, body] of Object.entries(files)) pack.entry({ name, mode: 0o644 }, body);
  pack.finalize();
  await collected;
  return gzipSync(Buffer.concat(chunks));
}

let work: string;
let dataDir: string;
let artifact: string;
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-sandbox-"));
  dataDir = join(work, "data");
  await mkdir(join(dataDir, "artifacts"), { recursive: true });
  await writeFile(join(dataDir, "admin-key"), "svc_admin_secret\n", { mode: 0o600 });
  const body = await tarGz({ "endpoints/fns/handler.mjs": HANDLER });
  // Named by its sha256, as the service keeps artifacts: the driver verifies it.
  artifact = join(dataDir, "artifacts", `${createHash("sha256").update(body).digest("hex")}.tar.gz`);
  await writeFile(artifact, body);
});
afterAll(async () => {
  if (usable) probe.sandbox.dispose();
  await rm(work, { recursive: true, force: true });
});

function launch(workerId: string, lines: WorkerLogLine[], extra: Partial<WorkerLaunch> = {}): WorkerLaunch {
  return {
    workerId,
    endpointId: "ep1",
    endpointName: "fns",
    app: "app",
    env: "dev",
    artifactPath: artifact,
    apiUrl: "http://127.0.0.1:9",
    workerToken: `token-of-${workerId}`,
    apiKey: "owner-key",
    environment: {},
    maxConcurrency: 1,
    computeType: "CPU",
    gpuTypeIds: [],
    onLog: (line) => lines.push(line),
    ...extra,
  };
}

async function until<T>(what: () => T | undefined, ms = 40_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = what();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

type Attempt = { ok: boolean; value?: unknown; error?: string };
type Report = Record<string, Attempt> & { pid: number; uid: number; env: string[] };
const report = (lines: WorkerLogLine[]) =>
  until(() => lines.find((l) => l.stream === "stdout" && l.text.startsWith("{"))).then(
    (l) => JSON.parse(l.text) as Report,
    (err: Error) => {
      throw new Error(`${err.message}; the worker said: ${lines.map((l) => l.text).join("\n")}`);
    },
  );

/** Two probe workers on one driver: B is started first, A aims at B and at the service. */
async function probePair(driver: ProcessDriver, cacheDir: string, volume: string) {
  const b: WorkerLogLine[] = [];
  const hb = await driver.start(launch("wb", b, { environment: { PROBE_TMP_NAME: `b-${RUN}` } }));
  const rb = await report(b);
  const record = JSON.parse(readFileSync(join(dataDir, "workers", "wb.json"), "utf8")) as { pid: number };
  const a: WorkerLogLine[] = [];
  const environment = {
    PROBE_DATA_DIR: dataDir,
    PROBE_CACHE_DIR: cacheDir,
    PROBE_SERVICE_PID: String(process.pid),
    PROBE_OTHER_PID: String(record.pid),
    PROBE_TMP_NAME: `a-${RUN}`,
    PROBE_FORKS: "100",
    PROBE_MOUNTS: "1",
  };
  const ha = await driver.start(launch("wa", a, { environment, volumePath: volume, placement: { cpus: 1, memoryMb: 1024, gpus: 0 } }));
  const ra = await report(a);
  return { ra, rb, ha, hb, a };
}

const SERVICE_ENV = {
  PATH: "/usr/local/bin:/usr/bin:/bin",
  LANG: "C.UTF-8",
  OPERATOR_CLOUD_SECRET: "aws-secret",
  SVC_API_KEY: "svc_admin_secret",
  NODE_OPTIONS: "--no-warnings",
};

describe.skipIf(!usable)("a sandboxed process worker", () => {
  let driver: ProcessDriver;
  let result: Awaited<ReturnType<typeof probePair>>;
  const cacheDir = () => join(dataDir, "artifact-cache");
  const volume = () => join(work, "volumes", "va");

  beforeAll(async () => {
    driver = createProcessDriver({
      runtimeEntry: PROBE,
      cacheDir: cacheDir(),
      stateDir: join(dataDir, "workers"),
      sandbox: "bwrap",
      baseEnv: SERVICE_ENV,
      sandboxDefaults: { pids: 64 },
      closeGraceMs: 300,
    });
    result = await probePair(driver, cacheDir(), volume());
  }, 60_000);
  afterAll(async () => {
    await driver?.close();
  });

  it("says which isolation is in force", () => {
    expect(driver.sandboxing.sandboxed).toBe(true);
    expect(driver.sandboxing.description).toMatch(/^sandbox bwrap \(user\/mount\/pid(\/network)? namespaces, seccomp, /);
    expect(driver.restoresSnapshots).toBe(false);
  });

  it("cannot read the service's data directory or the artifact cache", () => {
    expect(result.ra.readDataDir).toEqual({ ok: false, error: "ENOENT" });
    expect(result.ra.readCache).toEqual({ ok: false, error: "ENOENT" });
  });

  it("sees only its own processes, runs as an unprivileged user, and cannot signal the service or read another worker", () => {
    expect(result.ra.pids.value).toEqual([1]);
    expect(result.ra.pid).toBe(1);
    expect(result.ra.uid).toBe(1000);
    expect(result.ra.signalService).toEqual({ ok: false, error: "ESRCH" });
    expect(result.ra.otherEnviron.ok).toBe(false);
  });

  it("has an environment of the allow-list, its endpoint's and the protocol's: none of the service's", () => {
    expect(result.ra.env).toContain("PATH");
    expect(result.ra.env).toContain("LANG");
    expect(result.ra.env).toContain("SVC_WORKER_TOKEN");
    for (const name of ["OPERATOR_CLOUD_SECRET", "NODE_OPTIONS", "SVC_PARENT_PID"]) expect(result.ra.env).not.toContain(name);
  });

  it("has a private /tmp, its code read-only, its volume read-write", () => {
    expect(result.ra.writeTmp.ok).toBe(true);
    expect(existsSync(join(tmpdir(), `a-${RUN}`))).toBe(false);
    expect(result.ra.writeCode).toEqual({ ok: false, error: "EROFS" });
    expect(readdirSync(join(cacheDir())).filter((f) => !f.startsWith("."))).toHaveLength(1);
    expect(result.ra.writeVolume.ok).toBe(true);
    expect(readFileSync(join(volume(), "from-worker.txt"), "utf8")).toBe("wa");
  });

  it("can write in memory only to a bounded /tmp and /dev/shm: its root and /dev are read-only", () => {
    expect(result.ra.writeRoot).toEqual({ ok: false, error: "EROFS" });
    expect(result.ra.writeDev).toEqual({ ok: false, error: "EROFS" });
    expect(result.ra.writeShm.ok).toBe(true);
    // The defaults (64 MiB, 1 GiB), never more than the worker's memory (1024 MiB here).
    expect(result.ra.shmSize).toEqual({ ok: true, value: 64 * 2 ** 20 });
    expect(result.ra.tmpSize).toEqual({ ok: true, value: 1024 * 2 ** 20 });
  });

  it("is told where its code is inside the sandbox, never the data directory's artifact path", () => {
    expect(result.ra.artifact).toBe("/svc/code");
    expect(JSON.stringify(result.ra)).not.toContain(dataDir);
  });

  it("is denied ptrace and new user namespaces (seccomp), and stopped at its pids limit", () => {
    expect(result.ra.ptrace.ok && result.ra.ptrace.value).toBe("Operation not permitted");
    expect(result.ra.newUserNamespace.ok).toBe(false);
    const forks = result.ra.forks!;
    expect(forks.ok === false || Number(forks.value) < 64).toBe(true);
  });

  it("is stopped with SIGTERM then SIGKILL after the grace (the probe ignores SIGTERM as PID 1), and kill() is immediate", async () => {
    const at = Date.now();
    expect(await result.ha.stop(300)).toEqual({ code: null, signal: "SIGKILL" });
    expect(Date.now() - at).toBeGreaterThanOrEqual(250);
    result.hb.kill();
    expect(await result.hb.exited).toEqual({ code: null, signal: "SIGKILL" });
    expect(readdirSync(join(dataDir, "workers"))).toEqual([]);
  });
});

describe.skipIf(!usable)("the same probe without the sandbox (each check above would fail)", () => {
  it("reads the data dir and the cache, sees and signals other processes, writes its code, keeps no limits", async () => {
    const cacheDir = join(work, "cache-plain");
    const driver = createProcessDriver({
      runtimeEntry: PROBE,
      cacheDir,
      stateDir: join(dataDir, "workers"),
      sandbox: "none",
      baseEnv: SERVICE_ENV,
      closeGraceMs: 300,
    });
    expect(driver.sandboxing.sandboxed).toBe(false);
    const { ra } = await probePair(driver, cacheDir, join(work, "volumes", "vplain"));
    expect(ra.readDataDir.ok).toBe(true);
    expect(ra.readCache.ok).toBe(true);
    expect((ra.pids.value as number[]).length).toBeGreaterThan(2);
    expect(ra.signalService.ok).toBe(true);
    expect(ra.otherEnviron.ok).toBe(true);
    expect(ra.writeCode.ok).toBe(true);
    expect(ra.ptrace.value).toBe("0");
    expect(ra.forks).toEqual({ ok: true, value: "100" });
    // The allow-list holds with or without a sandbox.
    expect(ra.env).not.toContain("OPERATOR_CLOUD_SECRET");
    expect(existsSync(join(tmpdir(), `a-${RUN}`))).toBe(true);
    await driver.close();
    await rm(join(tmpdir(), `a-${RUN}`), { force: true });
    await rm(join(tmpdir(), `b-${RUN}`), { force: true });
  }, 60_000);
});

describe.skipIf(!usable)("a sandboxed worker's memory limit", () => {
  it("ends a worker that allocates past it (the kernel's OOM killer, SIGKILL)", async () => {
    const driver = createProcessDriver({ runtimeEntry: PROBE, cacheDir: join(work, "cache-mem"), sandbox: "bwrap", sandboxDefaults: { memoryMb: 96 } });
    const lines: WorkerLogLine[] = [];
    // A GPU endpoint names no memory: the default applies.
    const handle = await driver.start(launch("wmem", lines, { computeType: "GPU", environment: { PROBE_ALLOCATE_MB: "400" } }));
    expect(await handle.exited).toEqual({ code: null, signal: "SIGKILL" });
    expect(lines.some((l) => l.text.startsWith("allocated"))).toBe(false);
    await driver.close();
  }, 60_000);
});

describe.skipIf(!usable)("the real runtime in the sandbox", () => {
  let sockets: Socket[] = [];
  let silent: ReturnType<typeof createServer>;
  let port: number;
  let called: Array<() => void> = [];
  let received = "";
  beforeAll(async () => {
    // A service that accepts connections and never answers: once a worker calls it, its runtime is up.
    silent = createServer((socket) => {
      sockets.push(socket);
      socket.on("data", (d: Buffer) => (received += d.toString()));
      for (const c of called.splice(0)) c();
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    port = (silent.address() as AddressInfo).port;
  });
  afterAll(() => {
    for (const socket of sockets) socket.destroy();
    sockets = [];
    silent.close();
  });
  const calledBack = () => new Promise<void>((r) => called.push(r));

  it("drains on SIGTERM (exit 0): the signal reaches the runtime, PID 1 of its namespace", async () => {
    const driver = createProcessDriver({ runtimeEntry: RUNTIME_ENTRY, cacheDir: join(work, "cache-rt"), sandbox: "bwrap" });
    const waiting = calledBack();
    const handle = await driver.start(launch("w-drain", [], { apiUrl: `http://127.0.0.1:${port}` }));
    await waiting;
    const at = Date.now();
    expect(await handle.stop(5000)).toEqual({ code: 0, signal: null });
    expect(Date.now() - at).toBeLessThan(3000);
    await driver.close();
  }, 60_000);

  it("claims a pre-booted sandboxed runtime: it loads the worker's code from its slot and calls the service", async () => {
    const driver = createProcessDriver({ runtimeEntry: RUNTIME_ENTRY, cacheDir: join(work, "cache-pool"), sandbox: "bwrap", pool: 1 });
    const [pooledPid] = await until(() => (driver.pooledPids().length > 0 ? driver.pooledPids() : undefined));
    // Its own pid namespace: two pids in NSpid (the host's, and 1 inside).
    const nspid = await until(() => /^NSpid:\s+(.*)$/m.exec(readFileSync(`/proc/${pooledPid}/status`, "utf8"))?.[1]);
    expect(nspid.split(/\s+/)).toEqual([String(pooledPid), "1"]);
    const waiting = calledBack();
    const lines: WorkerLogLine[] = [];
    const handle = await driver.start(launch("w-pooled", lines, { apiUrl: `http://127.0.0.1:${port}` }));
    await waiting;
    // The claimed runtime is that worker: it calls with the worker's token, and the pool's runtime is gone from it.
    await until(() => (received.includes("Bearer token-of-w-pooled") ? true : undefined));
    expect(driver.pooledPids()).not.toContain(pooledPid);
    expect(await handle.stop(5000)).toEqual({ code: 0, signal: null });
    await driver.close();
  }, 60_000);

  it("names a load-balanced worker's address and socket itself (a port it chose, a socket in the worker's own directory)", async () => {
    const driver = createProcessDriver({ runtimeEntry: RUNTIME_ENTRY, cacheDir: join(work, "cache-lb"), sandbox: "bwrap" });
    const handle = await driver.start(launch("w-lb", [], { loadBalanced: true, apiUrl: `http://127.0.0.1:${port}` }));
    expect(handle.address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(handle.localSocket).toMatch(/\/svc-lb-[^/]+\/w-lb-[^/]+\/lb\.sock$/);
    handle.kill();
    expect(await handle.exited).toEqual({ code: null, signal: "SIGKILL" });
    await driver.close();
  }, 60_000);
});
