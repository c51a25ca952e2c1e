// A process worker's handle: signals reach the worker's own pid where the driver's child only wraps it (bwrap,
// criu), and its exit is read as the service reads exits (a sandboxed worker's 128 + n is the signal n). Apart
// from the driver (process.ts) because started, sandboxed, pooled and restored workers all end the same way.

import type { ChildProcess } from "node:child_process";
import type { WorkerExit, WorkerHandle, WorkerLaunch } from "./types.js";

/** A running child: the process the driver spawned, and for a sandboxed one the worker's own pid inside. */
export interface Running {
  child: ChildProcess;
  handle: WorkerHandle;
  /** The worker's host pid when it is not `child` (sandboxed: bwrap's child; restored: criu's). */
  innerPid?: number;
}

/** Send `name` to a running worker: its own pid where the driver's child is a wrapper (bwrap, criu). */
export function signalRunning(running: Pick<Running, "child" | "innerPid">, name: NodeJS.Signals): boolean {
  if (running.innerPid === undefined) return running.child.kill(name);
  try {
    process.kill(running.innerPid, name);
  } catch {
    // gone already: its wrapper exits with it
  }
  return true;
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

/** What a started worker's handle reports beyond its id, and what its end clears. */
export interface TrackedWorker {
  address?: string;
  localSocket?: string;
  cleanup: () => unknown;
  sandboxed?: boolean;
}

/** After a sandboxed worker is killed, how long its wrapper may take to exit before it is killed as well. */
const WRAPPER_KILL_MS = 2_000;

/**
 * The handle of a started worker: its exit watched (`ended` once it has exited or failed to start, then its
 * leftovers cleaned up), stop() escalating to SIGKILL after the grace. Sets `running.handle`.
 */
export function runningHandle(launch: WorkerLaunch, running: Running, extra: TrackedWorker, ended: () => void): WorkerHandle {
  const { child } = running;
  const exited = new Promise<WorkerExit>((resolve) => {
    child.once("exit", (code, signal) => {
      ended();
      extra.cleanup();
      resolve(extra.sandboxed ? sandboxExit(code, signal) : { code, signal });
    });
    child.once("error", (err) => {
      ended();
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
        let wrapperTimer: NodeJS.Timeout | undefined;
        const timer = setTimeout(() => {
          if (!alive()) return;
          signalRunning(running, "SIGKILL");
          // A wrapper (bwrap, criu) that outlives its worker (something else of the sandbox still runs) is killed
          // too, so a stop always ends: the sandbox dies with it.
          if (running.innerPid !== undefined) wrapperTimer = setTimeout(() => alive() && child.kill("SIGKILL"), WRAPPER_KILL_MS);
        }, graceMs);
        void exited.then(() => {
          clearTimeout(timer);
          clearTimeout(wrapperTimer);
        });
      }
      return exited;
    },
    kill() {
      if (alive()) signalRunning(running, "SIGKILL");
    },
  };
  running.handle = handle;
  return handle;
}
