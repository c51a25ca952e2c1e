// Workers as local child processes: `node dist/runtime/worker.js` per worker. The embedded default for
// `svc dev` and `svc server` on one machine. Each artifact is extracted once per driver (and per content, in a
// cache only the service can write, verified against the sha256 it was deployed with: process-artifacts.ts) and
// handed to workers as SVC_ARTIFACT_DIR.
//
// With a sandbox (sandbox/index.ts: bubblewrap; the sandboxed start is process-sandboxed.ts) each worker runs in
// namespaces of its own, sees its code read-only, its volume, a private /tmp and nothing of the service or of other
// workers, under a seccomp filter and cgroup limits. Without one, workers share the service's uid and view of the
// machine: one tenant only. docs/security.md, "Process workers".
//
// Beside the driver: its pre-booted runtimes (process-pool.ts), the records a restarted service adopts workers by
// (process-records.ts), workers' environment and limits (process-env.ts), handles (process-handle.ts), output
// (process-logs.ts), sockets (process-sockets.ts) and sandboxed networks (process-network.ts); snapshots are
// snapshot.ts's.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { allowedHostEnv } from "./host-env.js";
import { createArtifactDirs } from "./process-artifacts.js";
import { workerEnvironment } from "./process-env.js";
import { runningHandle, signalRunning, type Running, type TrackedWorker } from "./process-handle.js";
import { readLines } from "./process-logs.js";
import { createWorkerNetworks, freePort } from "./process-network.js";
import { createRuntimePool, pooledRunning } from "./process-pool.js";
import { createWorkerRecords, processStartTime } from "./process-records.js";
import { startSandboxed } from "./process-sandboxed.js";
import { createWorkerSockets } from "./process-sockets.js";
import { checkSandboxReach, resolveSandbox, type NoSandbox, type Sandbox, type SandboxDefaults, type SandboxSetting } from "./sandbox/index.js";
import { createSnapshotStore } from "./snapshot.js";
import type { WorkerDriver, WorkerHandle, WorkerLaunch } from "./types.js";

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

/** dist/runtime/worker.js beside this module once compiled; from the sources (tests), the compiled one. */
function defaultRuntimeEntry(): string {
  const candidates = [new URL("../runtime/worker.js", import.meta.url), new URL("../../dist/runtime/worker.js", import.meta.url)];
  const found = candidates.map((u) => fileURLToPath(u)).find((file) => existsSync(file));
  return found ?? fileURLToPath(candidates[0]!);
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
  const artifacts = createArtifactDirs(options.cacheDir);
  const children = new Map<string, Running>();
  const snapshots = createSnapshotStore({
    dir: options.snapshotDir ?? join(tmpdir(), "svc-snapshots"),
    runtimeEntry: entry,
    nodePath,
    criu: options.criuPath,
  });
  // Its result is kept by the store; a host that cannot checkpoint is said once, by the first snapshot worker.
  if (options.probeSnapshots && !sandbox) void snapshots.hostProblem();
  const records = createWorkerRecords(options.stateDir);
  const sockets = createWorkerSockets(options.localSockets);
  const networks = createWorkerNetworks(sandbox);

  const pool = createRuntimePool({
    size: options.pool ?? 0,
    nodePath,
    entry,
    sandbox,
    hostEnv,
    cacheRoot: artifacts.root,
    runDirFor: sockets.runDirFor,
    networks,
  });

  // Children must not outlive the service: kill what is left when this process exits, however it exits
  // normally. (A SIGKILLed parent is covered by the runtime's own orphan check.)
  const killAll = () => {
    for (const running of [...children.values(), ...pool.waiting().map(pooledRunning)]) {
      if (running.child.exitCode === null && running.child.signalCode === null) signalRunning(running, "SIGKILL");
    }
    networks.stopAll();
    snapshots.killTemplates();
  };
  process.on("exit", killAll);

  /** Watch a started worker: its exit (record and leftovers removed), and its handle. */
  const track = (launch: WorkerLaunch, running: Running, extra: TrackedWorker): WorkerHandle => {
    const handle = runningHandle(launch, running, extra, () => {
      children.delete(launch.workerId);
      records.forget(launch.workerId);
    });
    children.set(launch.workerId, running);
    return handle;
  };

  return {
    name: "process",
    // A sandboxed tree (bwrap and its namespaces) is not restored from a checkpoint: snapshot endpoints start as usual.
    restoresSnapshots: !sandbox,
    sandboxing: sandbox
      ? { sandboxed: true, description: sandbox.description }
      : { sandboxed: false, description: `no sandbox: single tenant (${resolved.kind === "none" ? resolved.reason : ""})` },
    async start(launch) {
      const dir = await artifacts.dir(launch.artifactPath);
      const loadBalanced = launch.loadBalanced === true && !launch.image;
      // The driver names a load-balanced worker's address (a port it chose), so the service never has to take
      // the worker's word for where it is.
      const http = loadBalanced ? { host: "127.0.0.1", port: await freePort() } : undefined;
      const address = http ? `http://${http.host}:${http.port}` : undefined;

      if (sandbox) {
        return startSandboxed(
          { sandbox, nodePath, entry, hostPorts: options.hostPorts, hostEnv, pool, networks, sockets, records, track },
          launch,
          dir,
          http,
          address,
        );
      }

      const localSocket = sockets.socketFor(launch);
      const env = workerEnvironment(launch, hostEnv(), {
        artifactDir: dir,
        volumePath: launch.volumePath,
        modelCache: launch.modelCache,
        parentPid: process.pid,
        lbSocket: localSocket,
        http,
      });
      const restored = launch.snapshot ? await snapshots.restore(launch, env, dir) : undefined;
      const pooled = launch.image || restored ? undefined : await pool.take();
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
        records.write(
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
      return records.adopt((workerId) => children.has(workerId));
    },
    snapshotImages(endpointId) {
      return snapshots.imageDirs(endpointId);
    },
    snapshotProblem() {
      return sandbox ? Promise.resolve("its workers run sandboxed, and svc does not restore a sandboxed process tree") : snapshots.hostProblem();
    },
    pooledPids() {
      return pool
        .waiting()
        .map((p) => (p.sandboxed ? p.sandboxed.innerPid : p.child.pid))
        .filter((pid): pid is number => pid !== undefined);
    },
    async close() {
      snapshots.killTemplates();
      await pool.close();
      const grace = options.closeGraceMs ?? 3000;
      await Promise.all([...children.values(), ...[...records.adopted.values()].map((handle) => ({ handle }))].map(({ handle }) => handle.stop(grace)));
      process.off("exit", killAll);
      sockets.close();
      artifacts.close();
      sandbox?.dispose();
    },
  };
}
