// Workers as local child processes: `node dist/runtime/worker.js` per worker. The embedded default for
// `svc dev` and `svc server` on one machine. Each artifact is extracted once per driver (and per content, in a
// shared cache) and handed to workers as SVC_ARTIFACT_DIR.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { extractArtifactCached } from "../artifact/extract.js";
import { applyProtocolEnv } from "./env.js";
import { readMarkedLine } from "../runtime/output-marks.js";
import type { AdoptedWorker, WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch } from "./types.js";
import { processAlive } from "../process-alive.js";
import { createSnapshotStore } from "./snapshot.js";

export interface ProcessDriverOptions {
  /** The runtime entry to run (default: dist/runtime/worker.js of this package). */
  runtimeEntry?: string;
  /** Where extracted artifacts are kept (default: <tmp>/svc-artifact-cache). */
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
  /** Environment the children inherit before the launch's own (default: this process's, minus SVC_*). */
  baseEnv?: NodeJS.ProcessEnv;
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
   * A worker restored from a snapshot: its environment is its image's (no SVC_WORKER_ID in /proc/<pid>/environ), so
   * it is recognised by its start time (/proc/<pid>/stat) instead.
   */
  startTime?: string;
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
 * The child's environment: the parent's minus its own SVC_* settings (its API key, data dirs...), then the
 * endpoint's configured variables, then the protocol variables (which user env cannot override).
 */
export function workerEnvironment(launch: WorkerLaunch, artifactDir: string, baseEnv: NodeJS.ProcessEnv, parentPid: number, lbSocket?: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(baseEnv)) {
    if (!key.startsWith("SVC_") && value !== undefined) env[key] = value;
  }
  Object.assign(env, launch.environment);
  applyProtocolEnv(env, launch, {
    apiUrl: launch.apiUrl,
    artifact: launch.artifactPath,
    artifactDir,
    volumePath: launch.volumePath,
    parentPid,
    lbSocket,
  });
  return env;
}

export interface ProcessDriver extends WorkerDriver {
  /** The pids of the pre-booted runtimes waiting for a claim. */
  pooledPids(): number[];
  /** The snapshot images kept for an endpoint (one at most: its current revision's). */
  snapshotImages(endpointId: string): string[];
}

export function createProcessDriver(options: ProcessDriverOptions = {}): ProcessDriver {
  const entry = options.runtimeEntry ?? defaultRuntimeEntry();
  const cacheDir = options.cacheDir ?? join(tmpdir(), "svc-artifact-cache");
  const children = new Map<string, { child: ChildProcess; handle: WorkerHandle }>();
  const snapshots = createSnapshotStore({
    dir: options.snapshotDir ?? join(tmpdir(), "svc-snapshots"),
    runtimeEntry: entry,
    nodePath: options.nodePath ?? process.execPath,
    criu: options.criuPath,
  });
  /** Restored workers: their process is not our child (`criu restore` is), so they are signalled by pid. */
  const restoredPids = new Map<ChildProcess, number>();
  const signalChild = (child: ChildProcess, name: NodeJS.Signals) => {
    const pid = restoredPids.get(child);
    if (pid === undefined) return child.kill(name);
    try {
      process.kill(pid, name);
    } catch {
      // gone already: `criu restore` exits with it
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
  // issue 7: load-balanced workers also listen on a Unix socket in a directory of this driver's (0700): the
  // service's proxy reaches them there without TCP (measured: ~0.1x of a proxied request's latency). Made when
  // first needed; gone with the driver.
  let socketDir: string | undefined;
  const lbSocketFor = (launch: WorkerLaunch): string | undefined => {
    if (options.localSockets === false || !launch.loadBalanced || launch.image || process.platform === "win32") return undefined;
    socketDir ??= mkdtempSync(join(tmpdir(), "svc-lb-"));
    const path = join(socketDir, `${launch.workerId}.sock`);
    // (A socket path has a small limit, ~107 bytes on Linux: past it, TCP only.)
    return Buffer.byteLength(path) <= 100 ? path : undefined;
  };

  // Children must not outlive the service: kill what is left when this process exits, however it exits
  // normally. (A SIGKILLed parent is covered by the runtime's own orphan check.)
  const killAll = () => {
    for (const { child } of [...children.values(), ...pool]) if (child.exitCode === null && child.signalCode === null) signalChild(child, "SIGKILL");
    snapshots.killTemplates();
  };
  process.on("exit", killAll);

  const artifactDir = (artifactPath: string): Promise<string> => {
    let pending = extracted.get(artifactPath);
    if (!pending) {
      pending = extractArtifactCached(artifactPath, cacheDir);
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
  const pool: Array<{ child: ChildProcess; ready: Promise<boolean>; sink: { onLog?: WorkerLaunch["onLog"] } }> = [];
  let closed = false;
  /** Pooled runtimes that died before any claim, in a row: past a few, the pool stops refilling (said once). */
  let poolFailures = 0;
  const boot = () => {
    // The pool's environment holds nothing of a user's: the base minus svc's settings, and that it is pooled.
    const env: NodeJS.ProcessEnv = {};
    for (const [key, value] of Object.entries(options.baseEnv ?? process.env)) if (!key.startsWith("SVC_") && value !== undefined) env[key] = value;
    env.SVC_POOLED = "1";
    const child = spawn(options.nodePath ?? process.execPath, [entry], { cwd: tmpdir(), env, stdio: ["ignore", "pipe", "pipe", "ipc"] });
    const sink: { onLog?: WorkerLaunch["onLog"] } = {};
    readLines(child, sink);
    const ready = new Promise<boolean>((resolve) => {
      child.once("message", (m: { ready?: boolean }) => resolve(m?.ready === true));
      child.once("exit", () => resolve(false));
      child.once("error", () => resolve(false));
    });
    const booted = { child, ready, sink };
    child.once("exit", () => {
      const i = pool.indexOf(booted);
      if (i < 0) return;
      // Died while waiting for a claim: replace it, unless that keeps happening.
      pool.splice(i, 1);
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
      taken.child.kill("SIGKILL");
    }
    return undefined;
  };

  return {
    name: "process",
    restoresSnapshots: true,
    async start(launch) {
      const dir = await artifactDir(launch.artifactPath);
      const localSocket = lbSocketFor(launch);
      const env = workerEnvironment(launch, dir, options.baseEnv ?? process.env, process.pid, localSocket);
      const restored = launch.snapshot ? await snapshots.restore(launch, env, dir) : undefined;
      const pooled = launch.image || restored ? undefined : await takePooled();
      let child: ChildProcess;
      if (restored) {
        child = restored.child;
        restoredPids.set(child, restored.pid);
        readLines(child, { onLog: launch.onLog });
      } else if (pooled) {
        // It becomes this worker: the worker's environment and directory, its output to the worker's log.
        child = pooled.child;
        pooled.sink.onLog = launch.onLog;
        const claim: Record<string, string> = {};
        for (const [key, value] of Object.entries(env)) if (value !== undefined) claim[key] = value;
        child.send({ env: claim, cwd: dir });
      } else {
        child = spawn(options.nodePath ?? process.execPath, [entry], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
        readLines(child, { onLog: launch.onLog });
      }
      if (stateDir && child.pid !== undefined) {
        if (!stateDirMade) mkdirSync(stateDir, { recursive: true, mode: 0o700 });
        stateDirMade = true;
        const record: WorkerRecord = restored
          ? { pid: restored.pid, workerId: launch.workerId, endpointId: launch.endpointId, revision: launch.revision, startTime: processStartTime(restored.pid) }
          : { pid: child.pid, workerId: launch.workerId, endpointId: launch.endpointId, revision: launch.revision };
        if (launch.gpus?.length) record.gpus = launch.gpus;
        writeFileSync(recordFile(launch.workerId), JSON.stringify(record), { mode: 0o600 });
      }
      const exited = new Promise<WorkerExit>((resolve) => {
        child.once("exit", (code, signal) => {
          children.delete(launch.workerId);
          forget(launch.workerId);
          if (localSocket) rmSync(localSocket, { force: true });
          resolve({ code, signal });
        });
        child.once("error", (err) => {
          children.delete(launch.workerId);
          forget(launch.workerId);
          launch.onLog({ ts: Date.now(), stream: "stderr", text: `[svc] could not start the worker: ${err.message}` });
          resolve({ code: null, signal: null });
        });
      });
      const alive = () => child.exitCode === null && child.signalCode === null;
      const handle: WorkerHandle = {
        workerId: launch.workerId,
        exited,
        localSocket,
        stop(graceMs) {
          if (alive()) {
            signalChild(child, "SIGTERM");
            const timer = setTimeout(() => alive() && signalChild(child, "SIGKILL"), graceMs);
            void exited.then(() => clearTimeout(timer));
          }
          return exited;
        },
        kill() {
          if (alive()) signalChild(child, "SIGKILL");
        },
      };
      children.set(launch.workerId, { child, handle });
      return handle;
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
          const exited = Promise.resolve<WorkerExit>({ code: null, signal: null });
          found.push({ handle: { workerId, exited, stop: () => exited, kill: () => undefined }, endpointId: record.endpointId, revision: record.revision, ended: true });
          continue;
        }
        const handle = adoptedHandle(record, () => {
          adopted.delete(workerId);
          forget(workerId);
        });
        adopted.set(workerId, handle);
        found.push({ handle, endpointId: record.endpointId, revision: record.revision, ...(record.gpus ? { gpus: record.gpus } : {}) });
      }
      return found;
    },
    snapshotImages(endpointId) {
      return snapshots.imageDirs(endpointId);
    },
    pooledPids() {
      return pool.map((p) => p.child.pid).filter((pid): pid is number => pid !== undefined);
    },
    async close() {
      closed = true;
      snapshots.killTemplates();
      const booted = pool.splice(0);
      for (const { child } of booted) child.kill("SIGTERM");
      await Promise.all(booted.map(({ child }) => (child.exitCode === null && child.signalCode === null ? new Promise((r) => child.once("exit", r)) : undefined)));
      const grace = options.closeGraceMs ?? 3000;
      await Promise.all([...children.values(), ...[...adopted.values()].map((handle) => ({ handle }))].map(({ handle }) => handle.stop(grace)));
      process.off("exit", killAll);
      if (socketDir) rmSync(socketDir, { recursive: true, force: true });
    },
  };
}
