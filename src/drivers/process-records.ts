// The process driver's record of each running worker (pid, endpoint, revision, what it leaves on the host), kept in
// a state directory so that a service restarted on the same data adopts the workers its killed predecessor left
// running, and requeues at once the jobs of those that ended meanwhile. Apart from the driver (process.ts): the
// records and the adopted workers' handles are read and written by pid and file alone, never through a child.

import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { processAlive } from "svc/internal";
import { removeCgroupDirs } from "./sandbox/cgroups.js";
import { stopPasta } from "./sandbox/pasta.js";
import type { AdoptedWorker, WorkerExit, WorkerHandle } from "./types.js";

/** What the driver keeps about a running worker, for a later process of the service to adopt. */
export interface WorkerRecord {
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
export function processStartTime(pid: number): string | undefined {
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
export function tidy(record: Pick<WorkerRecord, "cgroups" | "dirs" | "pasta">): void {
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

export interface WorkerRecords {
  /** The handles of the workers adopted from an earlier run, while they run. */
  readonly adopted: ReadonlyMap<string, WorkerHandle>;
  /** Keep a started worker's record (nothing without a state directory). */
  write(record: WorkerRecord): void;
  /** Drop a worker's record: it has ended. */
  forget(workerId: string): void;
  /**
   * The workers whose records an earlier run left, but for those `ours` names: the ones still running adopted
   * (watched until they end), the ones that ended meanwhile returned as ended, their leftovers removed.
   */
  adopt(ours: (workerId: string) => boolean): AdoptedWorker[];
}

/** The records of workers kept in `stateDir` (undefined: none kept, nothing to adopt). */
export function createWorkerRecords(stateDir: string | undefined): WorkerRecords {
  const adopted = new Map<string, WorkerHandle>();
  // Made on the first start: a driver is created before the service checks that its data directory is writable.
  let stateDirMade = false;
  const recordFile = (workerId: string) => join(stateDir!, `${workerId}.json`);
  const forget = (workerId: string) => {
    if (stateDir) rmSync(recordFile(workerId), { force: true });
  };
  return {
    adopted,
    forget,
    write(record) {
      if (!stateDir) return;
      if (!stateDirMade) mkdirSync(stateDir, { recursive: true, mode: 0o700 });
      stateDirMade = true;
      writeFileSync(recordFile(record.workerId), JSON.stringify(record), { mode: 0o600 });
    },
    adopt(ours) {
      if (!stateDir || !existsSync(stateDir)) return [];
      const found: AdoptedWorker[] = [];
      for (const name of readdirSync(stateDir)) {
        if (!name.endsWith(".json")) continue;
        const workerId = name.slice(0, -".json".length);
        if (ours(workerId) || adopted.has(workerId)) continue;
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
  };
}
