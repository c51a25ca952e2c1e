// Workers as local child processes: `node dist/runtime/worker.js` per worker. The embedded default for
// `svc dev` and `svc server` on one machine. Each artifact is extracted once per driver (and per content, in a
// cache only the service can write, verified against the sha256 it was deployed with) and handed to workers as
// SVC_ARTIFACT_DIR.
//
// With a sandbox (sandbox/index.ts: bubblewrap) each worker runs in namespaces of its own, sees its code
// read-only, its volume, a private /tmp and nothing of the service or of other workers, under a seccomp filter
// and cgroup limits. Without one, workers share the service's uid and view of the machine: one tenant only.
// docs/security.md, "Process workers".

import { errorMessage } from "../errors.js";
import { loopbackPort, stopPasta, type AttachedNetwork } from "./sandbox/pasta.js";
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { prepareVolumeDir } from "./volume-dir.js";
import { copyFile, link, mkdir, readdir } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { extractArtifactCached } from "../artifact/extract.js";
import { applyProtocolEnv, type WorkerPlacement } from "./env.js";
import { allowedHostEnv } from "./host-env.js";
import { readMarkedLine } from "../runtime/output-marks.js";
import type { AdoptedWorker, WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch } from "./types.js";
import { processAlive } from "svc/internal";
import { createSnapshotStore } from "./snapshot.js";
import { removeCgroupDirs } from "./sandbox/cgroups.js";
import { ownedTempPrefix } from "./owned-temp.js";
import {
  resolveSandbox,
  runDirSocket,
  SANDBOX_CODE_DIR,
  SANDBOX_VOLUME_DIR,
  SANDBOX_MODELS_DIR,
  checkSandboxReach,
  type CgroupLimits,
  type NoSandbox,
  type Sandbox,
  type SandboxDefaults,
  type SandboxedProcess,
  type SandboxSetting,
} from "./sandbox/index.js";

export interface ProcessDriverOptions {
  /** The runtime entry to run (default: dist/runtime/worker.js of this package). */
  runtimeEntry?: string;
  /**
   * Where extracted artifacts are kept (default: a directory of this driver's own under the system's tmp). `svc
   * server` and `svc dev` keep it in their data directory. Made 0700; one found with looser modes (an earlier
   * version's, that workers could write) is emptied first.
   */
  cacheDir?: string;
  /**
   * Whether load-balanced workers also listen on a Unix socket that the service's proxy uses (default true;
   * false: TCP only, as Docker workers are reached — the bench compares the two).
   */
  localSockets?: boolean;
  /** Node binary (default: the one running this process). */
  nodePath?: string;
  /**
   * Pre-booted runtimes kept ready (default 0: none). A cold start claims one (Node and the runtime already
   * loaded) instead of starting a process; the pool refills in the background. docs/cold-start.md.
   */
  pool?: number;
  /** How long close() lets workers drain before killing them (default 3000 ms). */
  closeGraceMs?: number;
  /** The environment the host variables workers get are picked from (default: this process's). */
  baseEnv?: NodeJS.ProcessEnv;
  /** Host variables workers get beyond the default allow-list (host-env.ts): names, or prefixes ending in `*`. */
  envAllow?: string[];
  /**
   * Ports of the host's loopback that sandboxed workers in a network of their own may reach besides the job API's
   * (and the S3 API's, for a worker with a BUCKET_* key): what the operator runs there for them (a local OTLP
   * collector). Every other port of the host's loopback is out of their reach.
   */
  hostPorts?: number[];
  /**
   * Where a record of each running worker is kept (pid, endpoint, revision), so that a service restarted after a
   * crash on the same data finds the workers its predecessor left running (adopt). Default: none kept.
   */
  stateDir?: string;
  /**
   * Where snapshots of initialised workers are kept (endpoints with `snapshot: true`; default
   * <tmp>/svc-snapshots). docs/cold-start.md, "Snapshots".
   */
  snapshotDir?: string;
  /** The CRIU binary snapshots use (default: `criu` on PATH). */
  criuPath?: string;
  /**
   * Decide at once, in the background, whether this host can checkpoint (a dry run of a few seconds at most), so the
   * first `snapshot: true` worker never waits for it (`svc server` and `svc dev`; default: on that first worker).
   */
  probeSnapshots?: boolean;
  /**
   * Whether workers run sandboxed (default "none" for embedders; `svc server` and `svc dev` pass their setting,
   * "auto" unless the operator says otherwise): "auto" sandboxes where bubblewrap works here, "bwrap" insists,
   * "none" never. A sandbox already resolved may be passed (tests).
   */
  sandbox?: SandboxSetting | Sandbox | NoSandbox;
  /** Limits of workers whose endpoint names none, and /tmp's size (sandboxed workers). */
  sandboxDefaults?: Partial<SandboxDefaults>;
}

/** What the driver keeps about a running worker, for a later process of the service to adopt. */
interface WorkerRecord {
  pid: number;
  workerId: string;
  endpointId: string;
  revision?: string;
  /** The GPUs it was given: a restarted service holds them for it again. */
  gpus?: string[];
  /**
   * When the process started (/proc/<pid>/stat): with the pid it names one process. Restored and sandboxed
   * workers are recognised by it (their /proc/<pid>/environ is their image's, or another namespace's).
   */
  startTime?: string;
  /** Where a load-balanced worker is served (adopted handles report them as started ones do). */
  address?: string;
  localSocket?: string;
  /** A sandboxed worker's cgroup directories and host directories of its own: removed once it is gone. */
  cgroups?: string[];
  dirs?: string[];
  /** The pid of the pasta that connects a sandboxed worker's network: stopped once the worker is gone. */
  pasta?: number;
}

/** How often an adopted worker (not a child of this process: no exit event) is checked for life. */
const ADOPTED_POLL_MS = 250;

/** When process `pid` started (clock ticks since boot, /proc/<pid>/stat): with the pid, it names one process. */
function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** Whether `pid` is still the worker `workerId` (not another process that got its pid since). Linux /proc. */
function isWorkerProcess(pid: number, workerId: string, startTime?: string): boolean {
  if (!processAlive(pid)) return false;
  if (startTime !== undefined) return processStartTime(pid) === startTime;
  try {
    const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    return environ.includes(`SVC_WORKER_ID=${workerId}`);
  } catch {
    // /proc unreadable (another OS, another user's process): a pid alone is not proof
    return false;
  }
}

/** What a worker leaves on the host once it is gone: its cgroups, its run and code directories. */
function tidy(record: Pick<WorkerRecord, "cgroups" | "dirs" | "pasta">): void {
  // Its pasta holds its network namespace open: started by an earlier run of the service, nobody else stops it.
  if (record.pasta !== undefined) stopPasta(record.pasta);
  if (record.cgroups?.length) void removeCgroupDirs(record.cgroups);
  for (const dir of record.dirs ?? []) rmSync(dir, { recursive: true, force: true });
}

/** A handle on a worker another process started: signals by pid, its exit seen by polling. */
function adoptedHandle(record: WorkerRecord, onGone: () => void): WorkerHandle {
  const alive = () => isWorkerProcess(record.pid, record.workerId, record.startTime);
  const exited = new Promise<WorkerExit>((resolve) => {
    const timer = setInterval(() => {
      if (alive()) return;
      clearInterval(timer);
      onGone();
      // Not our child: its exit status is its parent's to read; what is known is that it is gone.
      resolve({ code: null, signal: null });
    }, ADOPTED_POLL_MS);
    timer.unref();
  });
  const signal = (name: NodeJS.Signals) => {
    try {
      if (alive()) process.kill(record.pid, name);
    } catch {
      // gone between the check and the signal: the poll sees it
    }
  };
  return {
    workerId: record.workerId,
    exited,
    ...(record.address ? { address: record.address } : {}),
    ...(record.localSocket ? { localSocket: record.localSocket } : {}),
    stop(graceMs) {
      signal("SIGTERM");
      const timer = setTimeout(() => signal("SIGKILL"), graceMs);
      void exited.then(() => clearTimeout(timer));
      return exited;
    },
    kill() {
      signal("SIGKILL");
    },
  };
}

/** dist/runtime/worker.js beside this module once compiled; from the sources (tests), the compiled one. */
function defaultRuntimeEntry(): string {
  const candidates = [new URL("../runtime/worker.js", import.meta.url), new URL("../../dist/runtime/worker.js", import.meta.url)];
  const found = candidates.map((u) => fileURLToPath(u)).find((file) => existsSync(file));
  return found ?? fileURLToPath(candidates[0]!);
}

/**
 * The child's environment: the host variables the allow-list lets through (`hostEnv`, from allowedHostEnv: never
 * the service's whole environment), then the endpoint's configured variables, then the protocol variables (which
 * user env cannot override). Pure.
 */
export function workerEnvironment(
  launch: WorkerLaunch,
  hostEnv: Readonly<Record<string, string>>,
  placement: Omit<WorkerPlacement, "apiUrl" | "artifact"> & { artifact?: string },
): Record<string, string> {
  const env: Record<string, string | undefined> = { ...hostEnv };
  Object.assign(env, launch.environment);
  applyProtocolEnv(env, launch, { apiUrl: launch.apiUrl, artifact: launch.artifactPath, ...placement });
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  return out;
}

/**
 * A sandboxed worker's exit as the service reads exits: bwrap exits with its child's status, 128 + n for a child
 * killed by signal n. Pure.
 */
export function sandboxExit(code: number | null, signal: NodeJS.Signals | null): WorkerExit {
  if (code !== null && code > 128 && code < 128 + 65) {
    const name = Object.entries(SIGNAL_NUMBERS).find(([, n]) => n === code - 128)?.[0];
    if (name) return { code: null, signal: name };
  }
  return { code, signal };
}
const SIGNAL_NUMBERS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGILL: 4,
  SIGTRAP: 5,
  SIGABRT: 6,
  SIGBUS: 7,
  SIGFPE: 8,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
  SIGXCPU: 24,
  SIGXFSZ: 25,
};

/** A worker's limits: its endpoint's instance (CPU endpoints name vCPUs and memory), else the sandbox's defaults. */
export function workerLimits(launch: Pick<WorkerLaunch, "placement">, defaults: SandboxDefaults): { limits: CgroupLimits; tmpBytes: number; shmBytes: number } {
  const memoryMb = launch.placement?.memoryMb ?? defaults.memoryMb;
  const limits: CgroupLimits = { pids: defaults.pids };
  if (memoryMb !== undefined) limits.memoryBytes = memoryMb * 1024 * 1024;
  if (launch.placement?.cpus !== undefined) limits.cpus = launch.placement.cpus;
  // /tmp is memory (tmpfs pages count against the worker's cgroup): never larger than the worker's memory.
  const tmpMb = memoryMb === undefined ? defaults.tmpMb : Math.min(defaults.tmpMb, memoryMb);
  const shmMb = memoryMb === undefined ? defaults.shmMb : Math.min(defaults.shmMb, memoryMb);
  return { limits, tmpBytes: tmpMb * 1024 * 1024, shmBytes: shmMb * 1024 * 1024 };
}

/** A free TCP port on 127.0.0.1 for a load-balanced worker to listen on (the driver names its address). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Fill `dest` with `source`'s tree: hard links (the cache's verified files, no copy), copies where the two are on
 * different file systems.
 */
async function linkTree(source: string, dest: string): Promise<void> {
  for (const entry of await readdir(source, { withFileTypes: true })) {
    const from = join(source, entry.name);
    const to = join(dest, entry.name);
    if (entry.isDirectory()) {
      await mkdir(to, { mode: 0o755 });
      await linkTree(from, to);
    } else if (entry.isFile()) {
      try {
        await link(from, to);
      } catch (err) {
        if (!["EXDEV", "EPERM", "EMLINK"].includes((err as NodeJS.ErrnoException).code ?? "")) throw err;
        await copyFile(from, to);
      }
    }
  }
}

/**
 * Make `dir` a directory only the service can open. One that exists with looser modes (an earlier version's
 * cache, which workers could write) is emptied first: what is in it may not be what its owners deployed.
 */
function privateDir(dir: string): void {
  if (existsSync(dir) && (statSync(dir).mode & 0o077) !== 0) {
    for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/** Remove the pool slots of services that are gone (named pool-<pid>-...: a service killed with SIGKILL left them). */
function sweepSlots(slotsDir: string): void {
  if (!existsSync(slotsDir)) return;
  for (const name of readdirSync(slotsDir)) {
    const pid = Number(/^pool-(\d+)-/.exec(name)?.[1]);
    if (pid && pid !== process.pid && !processAlive(pid)) rmSync(join(slotsDir, name), { recursive: true, force: true });
  }
}

/** The sha256 an artifact was deployed with, when its file is named by it (the service keeps them so). */
function deployedSha256(artifactPath: string): string | undefined {
  return /^([a-f0-9]{64})\.tar\.gz$/.exec(basename(artifactPath))?.[1];
}

export interface ProcessDriver extends WorkerDriver {
  /** The pids of the pre-booted runtimes waiting for a claim (the workers' own, inside their sandbox or not). */
  pooledPids(): number[];
  /** The snapshot images kept for an endpoint (one at most: its current revision's). */
  snapshotImages(endpointId: string): string[];
  /** Why `snapshot: true` endpoints start without a snapshot here (undefined: they restore from one). */
  snapshotProblem(): Promise<string | undefined>;
  /** The isolation workers run under, in words (`svc doctor`, the server's start line), and whether sandboxed. */
  readonly sandboxing: { sandboxed: boolean; description: string };
}

/** A running child: the process the driver spawned, and for a sandboxed one the worker's own pid inside. */
interface Running {
  child: ChildProcess;
  handle: WorkerHandle;
  /** The worker's host pid when it is not `child` (sandboxed: bwrap's child; restored: criu's). */
  innerPid?: number;
}

/**
 * The host ports a sandboxed worker reaches: the job API's, the S3 API's own where its BUCKET_* key uploads, the
 * service's trace collector's where it is on this host, and those the operator allows (`allowed`). Pure.
 */
function workerHostPorts(launch: Pick<WorkerLaunch, "apiUrl" | "bucket" | "traces">, allowed: readonly number[] = []): number[] {
  const ports = [
    loopbackPort(launch.apiUrl),
    launch.bucket ? loopbackPort(launch.bucket.endpointUrl) : undefined,
    // The service's collector on this host: the runtime sends its spans there.
    launch.traces ? loopbackPort(launch.traces.tracesUrl) : undefined,
    ...allowed,
  ];
  return [...new Set(ports.filter((p): p is number => p !== undefined))];
}

function sameSet(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

/** A pre-booted runtime: ready once it says so; sandboxed, the directories its claim fills. */
interface Pooled {
  child: ChildProcess;
  ready: Promise<boolean>;
  sink: { onLog?: WorkerLaunch["onLog"] };
  sandboxed?: SandboxedProcess & {
    innerPid?: number;
    codeDir: string;
    runDir: string;
    /**
     * Its network, connected at boot to the host ports named (the job API's, once a launch told it), and a host
     * port of its own forwarded in (where it listens if a load-balanced worker claims it).
     */
    network?: { ports: number[]; inbound: number; attached: Promise<AttachedNetwork | undefined> };
  };
}

export function createProcessDriver(options: ProcessDriverOptions = {}): ProcessDriver {
  const entry = options.runtimeEntry ?? defaultRuntimeEntry();
  const nodePath = options.nodePath ?? process.execPath;
  const resolved =
    typeof options.sandbox === "object" ? options.sandbox : resolveSandbox({ setting: options.sandbox ?? "none", defaults: options.sandboxDefaults });
  const sandbox = resolved.kind === "bwrap" ? resolved : undefined;
  // Their mounts come from the artifact cache (and beside it, the data directory's volumes and models).
  if (sandbox && options.cacheDir) checkSandboxReach(options.cacheDir);
  const hostEnv = () => allowedHostEnv(options.baseEnv ?? process.env, options.envAllow);
  // The cache is made on first use: a driver is created before the service checks its data directory.
  let cacheDir = options.cacheDir;
  let cacheReady = false;
  const cache = () => {
    cacheDir ??= mkdtempSync(join(tmpdir(), "svc-artifact-cache-"));
    if (!cacheReady) privateDir(cacheDir);
    cacheReady = true;
    return cacheDir;
  };
  const ownsCache = options.cacheDir === undefined;
  const children = new Map<string, Running>();
  const snapshots = createSnapshotStore({
    dir: options.snapshotDir ?? join(tmpdir(), "svc-snapshots"),
    runtimeEntry: entry,
    nodePath,
    criu: options.criuPath,
  });
  // Its result is kept by the store; a host that cannot checkpoint is said once, by the first snapshot worker.
  if (options.probeSnapshots && !sandbox) void snapshots.hostProblem();
  /** Send `name` to a running worker: its own pid where the driver's child is a wrapper (bwrap, criu). */
  const signalRunning = (running: Pick<Running, "child" | "innerPid">, name: NodeJS.Signals) => {
    if (running.innerPid === undefined) return running.child.kill(name);
    try {
      process.kill(running.innerPid, name);
    } catch {
      // gone already: its wrapper exits with it
    }
    return true;
  };
  const adopted = new Map<string, WorkerHandle>();
  const stateDir = options.stateDir;
  // Made on the first start: a driver is created before the service checks that its data directory is writable.
  let stateDirMade = false;
  const recordFile = (workerId: string) => join(stateDir!, `${workerId}.json`);
  const forget = (workerId: string) => {
    if (stateDir) rmSync(recordFile(workerId), { force: true });
  };
  const extracted = new Map<string, Promise<string>>();
  // Load-balanced workers also listen on a Unix socket in a directory of this driver's (0700): the
  // service's proxy reaches them there without TCP (measured: ~0.1x of a proxied request's latency). Sandboxed,
  // each worker has a directory of its own in it, the only one bound into its sandbox. Made when first needed;
  // gone with the driver.
  let socketDir: string | undefined;
  const socketRoot = () => (socketDir ??= mkdtempSync(join(tmpdir(), ownedTempPrefix("svc-lb"))));
  const socketsWanted = (launch: WorkerLaunch) =>
    options.localSockets !== false && launch.loadBalanced === true && !launch.image && process.platform !== "win32";
  /** An unsandboxed worker's socket path, in the driver's directory. */
  const lbSocketFor = (launch: WorkerLaunch): string | undefined => {
    if (!socketsWanted(launch)) return undefined;
    const path = join(socketRoot(), `${launch.workerId}.sock`);
    // (A socket path has a small limit, ~107 bytes on Linux: past it, TCP only.)
    return Buffer.byteLength(path) <= 100 ? path : undefined;
  };
  /** A sandboxed worker's own run directory (its socket is made there). */
  const runDirFor = (name: string) => mkdtempSync(join(socketRoot(), `${name}-`));

  // Children must not outlive the service: kill what is left when this process exits, however it exits
  // normally. (A SIGKILLed parent is covered by the runtime's own orphan check.)
  /** The pastas of this process's sandboxed workers that run: stopped with them, and when this process exits. */
  const networks = new Set<AttachedNetwork>();
  const killAll = () => {
    for (const running of [...children.values(), ...pool.map((p) => ({ child: p.child, innerPid: p.sandboxed?.innerPid }))]) {
      if (running.child.exitCode === null && running.child.signalCode === null) signalRunning(running, "SIGKILL");
    }
    for (const network of networks) network.stop();
    snapshots.killTemplates();
  };
  process.on("exit", killAll);

  const artifactDir = (artifactPath: string): Promise<string> => {
    let pending = extracted.get(artifactPath);
    if (!pending) {
      pending = extractArtifactCached(artifactPath, cache(), { sha256: deployedSha256(artifactPath) });
      extracted.set(artifactPath, pending);
      pending.catch(() => extracted.delete(artifactPath));
    }
    return pending;
  };

  /** Where a child's output lines go: its launch's log once it is a worker (a pooled one has none before). */
  const readLines = (child: ChildProcess, sink: { onLog?: WorkerLaunch["onLog"] }) => {
    for (const [stream, name] of [
      [child.stdout, "stdout"],
      [child.stderr, "stderr"],
    ] as const) {
      if (!stream) continue;
      createInterface({ input: stream, crlfDelay: Infinity }).on("line", (text) => {
        try {
          sink.onLog?.({ ts: Date.now(), ...readMarkedLine(name, text) });
        } catch {
          // a failing log sink must not take the worker's pipes down
        }
      });
    }
  };

  // ---- pre-booted runtimes
  const poolSize = options.pool ?? 0;
  /** A claimed runtime's replacement starts this long after the claim, once the claimed one is on its way. */
  const POOL_REFILL_DELAY_MS = 100;
  const pool: Pooled[] = [];
  /** The host ports sandboxed workers reach (the job API's), as the last launch named them: pooled ones connect at boot. */
  let poolPorts: number[] | undefined;
  let closed = false;
  /** Pooled runtimes that died before any claim, in a row: past a few, the pool stops refilling (said once). */
  let poolFailures = 0;
  let poolSlots = 0;
  const boot = (): Pooled => {
    // The pool's environment holds nothing of a user's: the allowed host variables, and that it is pooled.
    const env: Record<string, string> = { ...hostEnv(), SVC_POOLED: "1" };
    let child: ChildProcess;
    let sandboxed: Pooled["sandboxed"];
    if (sandbox) {
      // Sandboxed from its boot: an empty code directory of its own (filled at the claim, on the host) and a run
      // directory, both bound into its sandbox only. A worker that needs a mount unknown at boot (a volume)
      // does not come from the pool.
      const slotsDir = join(cache(), ".slots");
      if (poolSlots === 0) sweepSlots(slotsDir);
      mkdirSync(slotsDir, { recursive: true, mode: 0o700 });
      const name = `pool-${process.pid}-${++poolSlots}`;
      const codeDir = mkdtempSync(join(slotsDir, `${name}-`));
      chmodSync(codeDir, 0o755);
      const runDir = runDirFor(name);
      const { limits, tmpBytes, shmBytes } = workerLimits({}, sandbox.defaults);
      const spawned = sandbox.spawn({ nodePath, entry, codeDir, runDir, env, name, limits, tmpBytes, shmBytes, ipc: true });
      sandboxed = { ...spawned, codeDir, runDir };
      const slot = sandboxed;
      const ports = poolPorts;
      void spawned.pid.then(async (pid) => {
        slot.innerPid = pid;
        // Its network connected while it waits, off the claim's path (pasta takes ~0.3 s): with the ports the last
        // launch named, which a claim checks. pasta holds the inbound port on the host from then on.
        const network = sandbox.network;
        if (pid !== undefined && ports && network.kind === "pasta") {
          const inbound = await freePort();
          const attached = network.attach(pid, ports, [inbound]).then(
            (network) => {
              watchNetwork(spawned.child, network);
              return network;
            },
            () => undefined /* connected at the claim instead, where a failure is said in the worker's log */,
          );
          slot.network = { ports, inbound, attached };
        }
      });
      child = spawned.child;
    } else {
      child = spawn(nodePath, [entry], { cwd: tmpdir(), env, stdio: ["ignore", "pipe", "pipe", "ipc"] });
    }
    const sink: { onLog?: WorkerLaunch["onLog"] } = {};
    readLines(child, sink);
    const ready = new Promise<boolean>((resolve) => {
      child.once("message", (m: { ready?: boolean }) => resolve(m?.ready === true));
      child.once("exit", () => resolve(false));
      child.once("error", () => resolve(false));
    });
    const booted: Pooled = { child, ready, sink, sandboxed };
    child.once("exit", () => {
      const i = pool.indexOf(booted);
      if (i < 0) return;
      // Died while waiting for a claim: replace it, unless that keeps happening.
      pool.splice(i, 1);
      if (sandboxed) tidy({ dirs: [sandboxed.codeDir, sandboxed.runDir] });
      if (++poolFailures === 3) process.emitWarning("svc: pre-booted worker runtimes keep exiting before use; the pool stops refilling");
      refill();
    });
    void ready.then((ok) => {
      if (ok) poolFailures = 0;
    });
    return booted;
  };
  const refill = () => {
    while (!closed && poolFailures < 3 && pool.length < poolSize) pool.push(boot());
  };
  refill();
  /** A ready pooled runtime, taken out of the pool (which refills), or undefined. */
  const takePooled = async () => {
    while (pool.length > 0) {
      const taken = pool.shift()!;
      // Spawning the replacement takes ~5 ms of this thread and a core for Node's boot: not on the claim's path.
      setTimeout(refill, POOL_REFILL_DELAY_MS).unref();
      if (await taken.ready) return taken;
      signalRunning({ child: taken.child, innerPid: taken.sandboxed?.innerPid }, "SIGKILL");
    }
    return undefined;
  };

  return {
    name: "process",
    // A sandboxed tree (bwrap and its namespaces) is not restored from a checkpoint: snapshot endpoints start as usual.
    restoresSnapshots: !sandbox,
    sandboxing: sandbox
      ? { sandboxed: true, description: sandbox.description }
      : { sandboxed: false, description: `no sandbox: single tenant (${resolved.kind === "none" ? resolved.reason : ""})` },
    async start(launch) {
      const dir = await artifactDir(launch.artifactPath);
      const loadBalanced = launch.loadBalanced === true && !launch.image;
      // The driver names a load-balanced worker's address (a port it chose), so the service never has to take
      // the worker's word for where it is.
      const http = loadBalanced ? { host: "127.0.0.1", port: await freePort() } : undefined;
      const address = http ? `http://${http.host}:${http.port}` : undefined;

      if (sandbox) return startSandboxed(launch, dir, http, address);

      const localSocket = lbSocketFor(launch);
      const env = workerEnvironment(launch, hostEnv(), {
        artifactDir: dir,
        volumePath: launch.volumePath,
        modelCache: launch.modelCache,
        parentPid: process.pid,
        lbSocket: localSocket,
        http,
      });
      const restored = launch.snapshot ? await snapshots.restore(launch, env, dir) : undefined;
      const pooled = launch.image || restored ? undefined : await takePooled();
      let child: ChildProcess;
      if (restored) {
        child = restored.child;
        readLines(child, { onLog: launch.onLog });
      } else if (pooled) {
        // It becomes this worker: the worker's environment and directory, its output to the worker's log.
        child = pooled.child;
        pooled.sink.onLog = launch.onLog;
        child.send({ env, cwd: dir });
      } else {
        child = spawn(nodePath, [entry], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
        readLines(child, { onLog: launch.onLog });
      }
      const running: Running = { child, handle: undefined!, innerPid: restored?.pid };
      if (child.pid !== undefined) {
        writeRecord(
          restored
            ? {
                pid: restored.pid,
                workerId: launch.workerId,
                endpointId: launch.endpointId,
                revision: launch.revision,
                startTime: processStartTime(restored.pid),
                address,
                localSocket,
                ...(launch.gpus?.length ? { gpus: launch.gpus } : {}),
              }
            : {
                pid: child.pid,
                workerId: launch.workerId,
                endpointId: launch.endpointId,
                revision: launch.revision,
                address,
                localSocket,
                ...(launch.gpus?.length ? { gpus: launch.gpus } : {}),
              },
        );
      }
      return track(launch, running, { address, localSocket, cleanup: () => localSocket && rmSync(localSocket, { force: true }) });
    },
    async adopt() {
      if (!stateDir || !existsSync(stateDir)) return [];
      const found: AdoptedWorker[] = [];
      for (const name of readdirSync(stateDir)) {
        if (!name.endsWith(".json")) continue;
        const workerId = name.slice(0, -".json".length);
        if (children.has(workerId) || adopted.has(workerId)) continue;
        let record: WorkerRecord;
        try {
          record = JSON.parse(readFileSync(join(stateDir, name), "utf8")) as WorkerRecord;
        } catch {
          // half-written by a process killed while writing it: nothing to adopt
          forget(workerId);
          continue;
        }
        if (record.workerId !== workerId) {
          forget(workerId);
          continue;
        }
        if (!isWorkerProcess(record.pid, workerId, record.startTime)) {
          // It ended while no service watched it (the record outlived it): the jobs it held must go back to the
          // queue now, not when their leases lapse a lease period after the restart.
          forget(workerId);
          tidy(record);
          const exited = Promise.resolve<WorkerExit>({ code: null, signal: null });
          found.push({
            handle: { workerId, exited, stop: () => exited, kill: () => undefined },
            endpointId: record.endpointId,
            revision: record.revision,
            ended: true,
          });
          continue;
        }
        const handle = adoptedHandle(record, () => {
          adopted.delete(workerId);
          forget(workerId);
          tidy(record);
        });
        adopted.set(workerId, handle);
        found.push({ handle, endpointId: record.endpointId, revision: record.revision, ...(record.gpus ? { gpus: record.gpus } : {}) });
      }
      return found;
    },
    snapshotImages(endpointId) {
      return snapshots.imageDirs(endpointId);
    },
    snapshotProblem() {
      return sandbox ? Promise.resolve("its workers run sandboxed, and svc does not restore a sandboxed process tree") : snapshots.hostProblem();
    },
    pooledPids() {
      return pool.map((p) => (p.sandboxed ? p.sandboxed.innerPid : p.child.pid)).filter((pid): pid is number => pid !== undefined);
    },
    async close() {
      closed = true;
      snapshots.killTemplates();
      const booted = pool.splice(0);
      // A pooled runtime holds nothing to drain. Sandboxed, it is PID 1 of its namespace and has no SIGTERM
      // handler yet (which PID 1 ignores): SIGKILL.
      for (const p of booted) signalRunning({ child: p.child, innerPid: p.sandboxed?.innerPid }, p.sandboxed ? "SIGKILL" : "SIGTERM");
      await Promise.all(
        booted.map(({ child }) => (child.exitCode === null && child.signalCode === null ? new Promise((r) => child.once("exit", r)) : undefined)),
      );
      for (const p of booted) if (p.sandboxed) tidy({ dirs: [p.sandboxed.codeDir, p.sandboxed.runDir] });
      const grace = options.closeGraceMs ?? 3000;
      await Promise.all([...children.values(), ...[...adopted.values()].map((handle) => ({ handle }))].map(({ handle }) => handle.stop(grace)));
      process.off("exit", killAll);
      if (socketDir) rmSync(socketDir, { recursive: true, force: true });
      if (ownsCache && cacheDir) rmSync(cacheDir, { recursive: true, force: true });
      sandbox?.dispose();
    },
  };

  function writeRecord(record: WorkerRecord): void {
    if (!stateDir) return;
    if (!stateDirMade) mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    stateDirMade = true;
    writeFileSync(recordFile(record.workerId), JSON.stringify(record), { mode: 0o600 });
  }

  /** A sandboxed worker: from the pool where it can be (no volume), else a sandbox of its own. */
  async function startSandboxed(launch: WorkerLaunch, dir: string, http: WorkerPlacement["http"], address: string | undefined): Promise<WorkerHandle> {
    const s = sandbox!;
    const { limits, tmpBytes, shmBytes } = workerLimits(launch, s.defaults);
    // A pooled sandbox has no volume, no model cache and no GPU devices bound in: such workers get a sandbox of their own.
    const ownMounts = launch.volumePath !== undefined || launch.modelCache !== undefined || (launch.computeType === "GPU" && s.gpuDevices.length > 0);
    const hostPorts = workerHostPorts(launch, options.hostPorts);
    // The pool's next runtimes connect their network at boot to what this launch needs (set before the claim
    // schedules the refill).
    if (!launch.image && !ownMounts) poolPorts = hostPorts;
    const pooled = launch.image || ownMounts ? undefined : await takePooled();
    // A pooled runtime connected at boot to the ports this launch needs keeps that network; a load-balanced worker
    // then listens on the port it forwards in.
    const bootNetwork = pooled?.sandboxed?.network;
    const usesBootNetwork = bootNetwork !== undefined && sameSet(bootNetwork.ports, hostPorts);
    if (http && usesBootNetwork) {
      http = { ...http, port: bootNetwork.inbound };
      address = `http://${http.host}:${http.port}`;
    }
    const inbound = http ? [http.port] : [];
    // Its run directory (bound at /svc/run): a pooled runtime's own, or one made for it.
    const runDir = pooled?.sandboxed?.runDir ?? (socketsWanted(launch) ? runDirFor(launch.workerId) : undefined);
    const socket = runDir && socketsWanted(launch) ? runDirSocket(runDir) : undefined;
    const localSocket = socket && Buffer.byteLength(socket.host) <= 100 ? socket.host : undefined;
    const env = workerEnvironment(launch, hostEnv(), {
      // Its code as it sees it: never where the service keeps the artifact (a path in its data directory).
      artifact: SANDBOX_CODE_DIR,
      artifactDir: SANDBOX_CODE_DIR,
      volumePath: launch.volumePath ? SANDBOX_VOLUME_DIR : undefined,
      modelCache: launch.modelCache ? SANDBOX_MODELS_DIR : undefined,
      // Its parent is not visible from its pid namespace: it is orphaned when the service stays unreachable.
      orphanWhenUnreachable: true,
      lbSocket: localSocket ? socket!.inside : undefined,
      http,
    });
    let child: ChildProcess;
    let innerPid: number | undefined;
    let cgroups: string[] = [];
    let pasta: AttachedNetwork | undefined;
    const dirs: string[] = [];
    if (pooled?.sandboxed) {
      const slot = pooled.sandboxed;
      // Its code: the verified cache's files, linked into the slot directory its sandbox sees read-only.
      await linkTree(dir, slot.codeDir);
      slot.cgroup?.limit(limits);
      child = pooled.child;
      innerPid = slot.innerPid;
      cgroups = slot.cgroup?.dirs ?? [];
      dirs.push(slot.codeDir, slot.runDir);
      pooled.sink.onLog = launch.onLog;
      // Connected at boot to the ports this launch needs, or now (a pooled runtime booted before any launch named the
      // job API's port has only loopback).
      const preconnected = usesBootNetwork ? await bootNetwork.attached : undefined;
      pasta = preconnected ?? (innerPid !== undefined ? await connectNetwork(launch, child, innerPid, hostPorts, inbound) : undefined);
      child.send({ env: { ...env, HOME: "/tmp" }, cwd: SANDBOX_CODE_DIR });
    } else {
      if (launch.volumePath) prepareVolumeDir(launch.volumePath);
      if (runDir) dirs.push(runDir);
      let spawned: SandboxedProcess;
      try {
        spawned = s.spawn({
          nodePath,
          entry,
          codeDir: dir,
          volumeDir: launch.volumePath,
          modelsDir: launch.modelCache,
          runDir,
          env,
          name: launch.workerId,
          limits,
          tmpBytes,
          shmBytes,
          gpu: launch.computeType === "GPU",
          // Held before its exec while pasta connects its network namespace.
          hold: s.network.kind === "pasta",
        });
      } catch (err) {
        tidy({ dirs });
        throw err;
      }
      child = spawned.child;
      readLines(child, { onLog: launch.onLog });
      innerPid = await spawned.pid;
      cgroups = spawned.cgroup?.dirs ?? [];
      if (innerPid !== undefined) pasta = await connectNetwork(launch, child, innerPid, hostPorts, inbound);
      spawned.release();
    }
    if (innerPid !== undefined) {
      writeRecord({
        pid: innerPid,
        workerId: launch.workerId,
        endpointId: launch.endpointId,
        revision: launch.revision,
        startTime: processStartTime(innerPid),
        address,
        localSocket,
        cgroups,
        dirs,
        ...(pasta?.pid !== undefined ? { pasta: pasta.pid } : {}),
      });
    }
    return track(launch, { child, handle: undefined!, innerPid }, { address, localSocket, cleanup: () => tidy({ dirs }), sandboxed: true });
  }

  /**
   * A sandboxed worker's own network namespace connected by pasta, only the job API's port of the host's loopback
   * reachable; pasta ends with the worker. A failure ends the worker (it could not reach the service) and says why.
   */
  async function connectNetwork(
    launch: WorkerLaunch,
    child: ChildProcess,
    innerPid: number,
    hostPorts: readonly number[],
    inbound: readonly number[],
  ): Promise<AttachedNetwork | undefined> {
    const network = sandbox?.network;
    if (network?.kind !== "pasta") return undefined;
    try {
      // A load-balanced worker's port forwarded in: the service reaches it there, on the host's loopback.
      const attached = await network.attach(innerPid, hostPorts, inbound);
      watchNetwork(child, attached);
      return attached;
    } catch (err) {
      launch.onLog({ ts: Date.now(), stream: "stderr", text: `[svc] ${errorMessage(err)}` });
      child.kill("SIGKILL");
      signalRunning({ child, innerPid }, "SIGKILL");
      return undefined;
    }
  }

  /** Stop a worker's pasta when the worker exits, or when this process does (it kills its workers then). */
  function watchNetwork(child: ChildProcess, attached: AttachedNetwork): void {
    if (child.exitCode !== null || child.signalCode !== null) return attached.stop();
    networks.add(attached);
    child.once("exit", () => {
      networks.delete(attached);
      attached.stop();
    });
  }

  /** Watch a started worker: its exit (record and leftovers removed), and its handle. */
  function track(
    launch: WorkerLaunch,
    running: Running,
    extra: { address?: string; localSocket?: string; cleanup: () => unknown; sandboxed?: boolean },
  ): WorkerHandle {
    const { child } = running;
    const exited = new Promise<WorkerExit>((resolve) => {
      child.once("exit", (code, signal) => {
        children.delete(launch.workerId);
        forget(launch.workerId);
        extra.cleanup();
        resolve(extra.sandboxed ? sandboxExit(code, signal) : { code, signal });
      });
      child.once("error", (err) => {
        children.delete(launch.workerId);
        forget(launch.workerId);
        extra.cleanup();
        launch.onLog({ ts: Date.now(), stream: "stderr", text: `[svc] could not start the worker: ${err.message}` });
        resolve({ code: null, signal: null });
      });
    });
    const alive = () => child.exitCode === null && child.signalCode === null;
    const handle: WorkerHandle = {
      workerId: launch.workerId,
      exited,
      ...(extra.address ? { address: extra.address } : {}),
      ...(extra.localSocket ? { localSocket: extra.localSocket } : {}),
      stop(graceMs) {
        if (alive()) {
          signalRunning(running, "SIGTERM");
          const timer = setTimeout(() => alive() && signalRunning(running, "SIGKILL"), graceMs);
          void exited.then(() => clearTimeout(timer));
        }
        return exited;
      },
      kill() {
        if (alive()) signalRunning(running, "SIGKILL");
      },
    };
    running.handle = handle;
    children.set(launch.workerId, running);
    return handle;
  }
}
