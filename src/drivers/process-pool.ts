// Pre-booted runtimes for the process driver (docs/cold-start.md): Node and the runtime already loaded, waiting
// for a cold start to claim one instead of starting a process; the pool refills in the background. Sandboxed, each
// waits in a sandbox of its own with an empty code directory (its slot, filled at the claim) and, where workers
// get a network of their own, its network already connected. Apart from the driver (process.ts), which claims them.

import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processAlive } from "svc/internal";
import { workerLimits } from "./process-env.js";
import { signalRunning, type Running } from "./process-handle.js";
import { readLines, type LogSink } from "./process-logs.js";
import { freePort, type WorkerNetworks } from "./process-network.js";
import { tidy } from "./process-records.js";
import type { Sandbox, SandboxedProcess } from "./sandbox/index.js";
import type { AttachedNetwork } from "./sandbox/pasta.js";

/** A pre-booted runtime: ready once it says so; sandboxed, the directories its claim fills. */
export interface Pooled {
  child: ChildProcess;
  ready: Promise<boolean>;
  sink: LogSink;
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

export interface RuntimePoolOptions {
  /** Runtimes kept ready (0: none). */
  size: number;
  nodePath: string;
  entry: string;
  /** The sandbox pooled runtimes wait in (undefined: plain child processes). */
  sandbox: Sandbox | undefined;
  /** The allowed host variables: all a pooled runtime's environment holds besides SVC_POOLED. */
  hostEnv: () => Record<string, string>;
  /** The artifact cache's directory: sandboxed slots are made in it, beside the files linked into them. */
  cacheRoot: () => string;
  /** A run directory of its own for a sandboxed runtime. */
  runDirFor: (name: string) => string;
  networks: WorkerNetworks;
}

export interface RuntimePool {
  /** A ready pooled runtime, taken out of the pool (which refills), or undefined. */
  take(): Promise<Pooled | undefined>;
  /** The host ports sandboxed workers reach, as the last launch named them: the next runtimes connect to them at boot. */
  connectTo(ports: number[]): void;
  /** The runtimes waiting for a claim. */
  waiting(): readonly Pooled[];
  /** Stop refilling, end the runtimes waiting and remove their slots. */
  close(): Promise<void>;
}

/** A claimed runtime's replacement starts this long after the claim, once the claimed one is on its way. */
const POOL_REFILL_DELAY_MS = 100;

/** Remove the pool slots of services that are gone (named pool-<pid>-...: a service killed with SIGKILL left them). */
function sweepSlots(slotsDir: string): void {
  if (!existsSync(slotsDir)) return;
  for (const name of readdirSync(slotsDir)) {
    const pid = Number(/^pool-(\d+)-/.exec(name)?.[1]);
    if (pid && pid !== process.pid && !processAlive(pid)) rmSync(join(slotsDir, name), { recursive: true, force: true });
  }
}

/** A pool of `options.size` runtimes, booted at once. */
export function createRuntimePool(options: RuntimePoolOptions): RuntimePool {
  const { nodePath, entry, sandbox } = options;
  const pool: Pooled[] = [];
  /** The host ports sandboxed workers reach (the job API's), as the last launch named them: pooled ones connect at boot. */
  let poolPorts: number[] | undefined;
  let closed = false;
  /** Pooled runtimes that died before any claim, in a row: past a few, the pool stops refilling (said once). */
  let poolFailures = 0;
  let poolSlots = 0;
  const boot = (): Pooled => {
    // The pool's environment holds nothing of a user's: the allowed host variables, and that it is pooled.
    const env: Record<string, string> = { ...options.hostEnv(), SVC_POOLED: "1" };
    let child: ChildProcess;
    let sandboxed: Pooled["sandboxed"];
    if (sandbox) {
      // Sandboxed from its boot: an empty code directory of its own (filled at the claim, on the host) and a run
      // directory, both bound into its sandbox only. A worker that needs a mount unknown at boot (a volume)
      // does not come from the pool.
      const slotsDir = join(options.cacheRoot(), ".slots");
      if (poolSlots === 0) sweepSlots(slotsDir);
      mkdirSync(slotsDir, { recursive: true, mode: 0o700 });
      const name = `pool-${process.pid}-${++poolSlots}`;
      const codeDir = mkdtempSync(join(slotsDir, `${name}-`));
      chmodSync(codeDir, 0o755);
      const runDir = options.runDirFor(name);
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
              options.networks.watch(spawned.child, network);
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
    const sink: LogSink = {};
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
    while (!closed && poolFailures < 3 && pool.length < options.size) pool.push(boot());
  };
  refill();
  return {
    async take() {
      while (pool.length > 0) {
        const taken = pool.shift()!;
        // Spawning the replacement takes ~5 ms of this thread and a core for Node's boot: not on the claim's path.
        setTimeout(refill, POOL_REFILL_DELAY_MS).unref();
        if (await taken.ready) return taken;
        signalRunning(pooledRunning(taken), "SIGKILL");
      }
      return undefined;
    },
    connectTo(ports) {
      poolPorts = ports;
    },
    waiting: () => pool,
    async close() {
      closed = true;
      const booted = pool.splice(0);
      // A pooled runtime holds nothing to drain. Sandboxed, it is PID 1 of its namespace and has no SIGTERM
      // handler yet (which PID 1 ignores): SIGKILL.
      for (const p of booted) signalRunning(pooledRunning(p), p.sandboxed ? "SIGKILL" : "SIGTERM");
      await Promise.all(
        booted.map(({ child }) => (child.exitCode === null && child.signalCode === null ? new Promise((r) => child.once("exit", r)) : undefined)),
      );
      for (const p of booted) if (p.sandboxed) tidy({ dirs: [p.sandboxed.codeDir, p.sandboxed.runDir] });
    },
  };
}

/** A pooled runtime as a running process: its own pid inside its sandbox, where it has one. */
export function pooledRunning(p: Pooled): Pick<Running, "child" | "innerPid"> {
  return { child: p.child, innerPid: p.sandboxed?.innerPid };
}
