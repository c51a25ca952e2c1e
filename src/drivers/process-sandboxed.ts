// The start of a sandboxed process worker (sandbox/index.ts: bubblewrap): claimed from the pool where it can be
// (no volume, model cache or GPU to bind in), else a sandbox of its own; either way its code read-only at
// SANDBOX_CODE_DIR, its environment as it sees it from inside, its limits, and its network connected before it runs
// the endpoint's code. Apart from the driver (process.ts) because a sandboxed worker's paths, pids and network all
// differ from an unsandboxed one's.

import type { ChildProcess } from "node:child_process";
import type { WorkerPlacement } from "./env.js";
import { linkTree } from "./process-artifacts.js";
import { workerEnvironment, workerLimits } from "./process-env.js";
import type { Running, TrackedWorker } from "./process-handle.js";
import { readLines } from "./process-logs.js";
import { workerHostPorts, type WorkerNetworks } from "./process-network.js";
import type { RuntimePool } from "./process-pool.js";
import { processStartTime, tidy, type WorkerRecords } from "./process-records.js";
import type { WorkerSockets } from "./process-sockets.js";
import { runDirSocket, SANDBOX_CODE_DIR, SANDBOX_MODELS_DIR, SANDBOX_VOLUME_DIR, type Sandbox, type SandboxedProcess } from "./sandbox/index.js";
import type { AttachedNetwork } from "./sandbox/pasta.js";
import type { WorkerHandle, WorkerLaunch } from "./types.js";
import { prepareVolumeDir } from "./volume-dir.js";

/** What of its driver a sandboxed start uses. */
export interface SandboxedStart {
  sandbox: Sandbox;
  nodePath: string;
  entry: string;
  /** Host loopback ports the operator lets sandboxed workers reach (ProcessDriverOptions.hostPorts). */
  hostPorts?: number[];
  hostEnv: () => Record<string, string>;
  pool: RuntimePool;
  networks: WorkerNetworks;
  sockets: WorkerSockets;
  records: WorkerRecords;
  /** Watch the started worker and give its handle. */
  track: (launch: WorkerLaunch, running: Running, extra: TrackedWorker) => WorkerHandle;
}

function sameSet(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

/** A sandboxed worker: from the pool where it can be (no volume), else a sandbox of its own. */
export async function startSandboxed(
  driver: SandboxedStart,
  launch: WorkerLaunch,
  dir: string,
  http: WorkerPlacement["http"],
  address: string | undefined,
): Promise<WorkerHandle> {
  const { sandbox: s, networks, sockets } = driver;
  const { limits, tmpBytes, shmBytes } = workerLimits(launch, s.defaults);
  // A pooled sandbox has no volume, no model cache and no GPU devices bound in: such workers get a sandbox of their own.
  const ownMounts = launch.volumePath !== undefined || launch.modelCache !== undefined || (launch.computeType === "GPU" && s.gpuDevices.length > 0);
  const hostPorts = workerHostPorts(launch, driver.hostPorts);
  // The pool's next runtimes connect their network at boot to what this launch needs (set before the claim
  // schedules the refill).
  if (!launch.image && !ownMounts) driver.pool.connectTo(hostPorts);
  const pooled = launch.image || ownMounts ? undefined : await driver.pool.take();
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
  const runDir = pooled?.sandboxed?.runDir ?? (sockets.wanted(launch) ? sockets.runDirFor(launch.workerId) : undefined);
  const socket = runDir && sockets.wanted(launch) ? runDirSocket(runDir) : undefined;
  const localSocket = socket && Buffer.byteLength(socket.host) <= 100 ? socket.host : undefined;
  const env = workerEnvironment(launch, driver.hostEnv(), {
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
    pasta = preconnected ?? (innerPid !== undefined ? await networks.connect(launch, child, innerPid, hostPorts, inbound) : undefined);
    child.send({ env: { ...env, HOME: "/tmp" }, cwd: SANDBOX_CODE_DIR });
  } else {
    if (launch.volumePath) prepareVolumeDir(launch.volumePath);
    if (runDir) dirs.push(runDir);
    let spawned: SandboxedProcess;
    try {
      spawned = s.spawn({
        nodePath: driver.nodePath,
        entry: driver.entry,
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
    if (innerPid !== undefined) pasta = await networks.connect(launch, child, innerPid, hostPorts, inbound);
    spawned.release();
  }
  if (innerPid !== undefined) {
    driver.records.write({
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
  return driver.track(launch, { child, handle: undefined!, innerPid }, { address, localSocket, cleanup: () => tidy({ dirs }), sandboxed: true });
}
