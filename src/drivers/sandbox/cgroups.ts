// Memory, process and CPU limits of a worker, through a cgroup of its own made under the service's cgroup: v2
// where the service may enable the memory, pids and cpu controllers for its children, else the v1 memory, pids
// and cpu hierarchies where the service may make directories in them. Where neither works, there are no limits,
// and the isolation description says so (never a pretended limit).
//
// A worker's cgroup is made before its sandboxed process runs (bwrap waits on --block-fd until the driver has
// moved the child in), its limits written (again at a pool claim, when the endpoint is known), and removed once
// the process is gone.

import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface CgroupLimits {
  memoryBytes?: number;
  /** Tasks (processes and threads). */
  pids?: number;
  /** CPU time as a number of CPUs (1.5: one and a half). */
  cpus?: number;
}

export type CgroupController = "memory" | "pids" | "cpu";
const CONTROLLERS: readonly CgroupController[] = ["memory", "pids", "cpu"];

/** Where this process's cgroups are, read from /proc/self/cgroup and /proc/self/mountinfo. */
export interface CgroupHost {
  /** The cgroup2 directory of this process (unified hierarchy), when one is mounted. */
  v2?: string;
  /** The v1 directory of this process per controller, when that hierarchy is mounted. */
  v1: Partial<Record<CgroupController, string>>;
}

/** One mount line of /proc/self/mountinfo: the root of the mounted tree, where, the type, the super options. */
interface Mount {
  root: string;
  point: string;
  type: string;
  options: string[];
}

function parseMountinfo(text: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of text.split("\n")) {
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const fields = left.split(" ");
    const [type, , superOptions] = right.split(" ");
    const unescape = (s: string) => s.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    mounts.push({ root: unescape(fields[3] ?? ""), point: unescape(fields[4] ?? ""), type: type ?? "", options: (superOptions ?? "").split(",") });
  }
  return mounts;
}

/** The directory of cgroup `path` in a mount of its hierarchy, or undefined when the mount does not show it. */
function inMount(mount: Mount, path: string): string | undefined {
  const root = mount.root === "/" ? "" : mount.root;
  if (root && path !== root && !path.startsWith(`${root}/`)) return undefined;
  return join(mount.point, path.slice(root.length)).replace(/(.)\/+$/, "$1");
}

/** Where this process's cgroups are, from the texts of /proc/self/cgroup and /proc/self/mountinfo. Pure. */
export function cgroupHost(procCgroup: string, mountinfo: string): CgroupHost {
  const mounts = parseMountinfo(mountinfo);
  const host: CgroupHost = { v1: {} };
  for (const line of procCgroup.split("\n")) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, id, controllers, path] = m as unknown as [string, string, string, string];
    if (id === "0" && controllers === "") {
      const mount = mounts.find((mt) => mt.type === "cgroup2");
      if (mount) host.v2 = inMount(mount, path);
      continue;
    }
    for (const controller of controllers.split(",")) {
      if (!(CONTROLLERS as readonly string[]).includes(controller)) continue;
      const mount = mounts.find((mt) => mt.type === "cgroup" && mt.options.includes(controller));
      const dir = mount ? inMount(mount, path) : undefined;
      if (dir) host.v1[controller as CgroupController] = dir;
    }
  }
  return host;
}

/** The files and values that set `limits` in a cgroup of `version`. Pure. */
export function limitWrites(version: 1 | 2, limits: CgroupLimits): Array<{ controller: CgroupController; file: string; value: string; optional?: boolean }> {
  const writes: ReturnType<typeof limitWrites> = [];
  const period = 100_000;
  if (version === 2) {
    if (limits.memoryBytes !== undefined) {
      writes.push({ controller: "memory", file: "memory.max", value: String(limits.memoryBytes) });
      // No swapping past the limit where the kernel accounts swap.
      writes.push({ controller: "memory", file: "memory.swap.max", value: "0", optional: true });
    }
    if (limits.pids !== undefined) writes.push({ controller: "pids", file: "pids.max", value: String(limits.pids) });
    if (limits.cpus !== undefined) writes.push({ controller: "cpu", file: "cpu.max", value: `${Math.round(limits.cpus * period)} ${period}` });
    return writes;
  }
  if (limits.memoryBytes !== undefined) {
    writes.push({ controller: "memory", file: "memory.limit_in_bytes", value: String(limits.memoryBytes) });
    writes.push({ controller: "memory", file: "memory.memsw.limit_in_bytes", value: String(limits.memoryBytes), optional: true });
  }
  if (limits.pids !== undefined) writes.push({ controller: "pids", file: "pids.max", value: String(limits.pids) });
  if (limits.cpus !== undefined) {
    writes.push({ controller: "cpu", file: "cpu.cfs_period_us", value: String(period) });
    writes.push({ controller: "cpu", file: "cpu.cfs_quota_us", value: String(Math.round(limits.cpus * period)) });
  }
  return writes;
}

/** A worker's cgroup (one directory per v1 hierarchy, or one v2 directory). */
export interface WorkerCgroup {
  /** The directories, to record (adoption removes them once the worker is gone). */
  readonly dirs: string[];
  /** Move a process (and so everything it starts) in. */
  add(pid: number): void;
  limit(limits: CgroupLimits): void;
  /** Remove it once its processes are gone; a few tries (the kernel takes a moment to empty it). */
  remove(): Promise<void>;
}

export interface Cgroups {
  version: 1 | 2;
  controllers: CgroupController[];
  /** Make the cgroup of a worker (`name`: its id, already safe as a file name). */
  create(name: string): WorkerCgroup;
  /**
   * Remove the empty worker cgroups a service killed with SIGKILL left (its workers ended since, no restart on its
   * data adopted them). Only those older than a minute: another service may be about to move a worker into its own.
   */
  sweep(): void;
}

const STALE_MS = 60_000;

function sweepDir(parent: string): void {
  let names: string[];
  try {
    names = readdirSync(parent).filter((n) => n.startsWith("svc-"));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(parent, name);
    try {
      if (Date.now() - statSync(dir).mtimeMs < STALE_MS) continue;
      rmdirSync(dir);
    } catch {
      // EBUSY: it still holds processes (a running worker's); anything else: not ours to worry about
    }
  }
}

/** Remove cgroup directories whose processes are gone (adopted workers' records name them). */
export async function removeCgroupDirs(dirs: string[]): Promise<void> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const left = dirs.filter((dir) => {
      if (!existsSync(dir)) return false;
      try {
        rmdirSync(dir);
        return false;
      } catch (err) {
        // EBUSY: the last task is still leaving; try again shortly.
        return (err as NodeJS.ErrnoException).code === "EBUSY";
      }
    });
    if (left.length === 0) return;
    dirs = left;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function workerCgroup(version: 1 | 2, dirs: Partial<Record<CgroupController, string>>): WorkerCgroup {
  const unique = [...new Set(Object.values(dirs))];
  return {
    dirs: unique,
    add(pid) {
      for (const dir of unique) writeFileSync(join(dir, "cgroup.procs"), String(pid));
    },
    limit(limits) {
      for (const write of limitWrites(version, limits)) {
        const dir = dirs[write.controller];
        if (!dir) continue;
        try {
          writeFileSync(join(dir, write.file), write.value);
        } catch (err) {
          if (!write.optional) throw err;
        }
      }
    },
    remove: () => removeCgroupDirs(unique),
  };
}

/** Make a worker's cgroup directory; one left by an earlier run under the same name is replaced once empty. */
function makeCgroupDir(dir: string): void {
  try {
    mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    // Still holding processes (EBUSY): the error says so, and the worker does not start unlimited.
    rmdirSync(dir);
    mkdirSync(dir);
  }
}

/** Whether a directory can be made (and removed) in `dir`: the test of each hierarchy. */
function canMakeChildren(dir: string): boolean {
  const probe = join(dir, `svc-probe-${process.pid}`);
  try {
    mkdirSync(probe);
    rmdirSync(probe);
    return true;
  } catch {
    return false;
  }
}

/**
 * The cgroups the service can make for its workers, or why not. v2 needs the controllers enabled for this
 * process's cgroup's children (they are when the service runs in a delegated cgroup, a systemd unit with
 * Delegate=yes); v1 needs write access to the hierarchies.
 */
export function detectCgroups(host?: CgroupHost): Cgroups | { unavailable: string } {
  let found: CgroupHost;
  try {
    found = host ?? cgroupHost(readFileSync("/proc/self/cgroup", "utf8"), readFileSync("/proc/self/mountinfo", "utf8"));
  } catch {
    return { unavailable: "no /proc/self/cgroup (not Linux?)" };
  }
  if (found.v2 && existsSync(join(found.v2, "cgroup.subtree_control"))) {
    const v2 = found.v2;
    const enabled = () => readFileSync(join(v2, "cgroup.subtree_control"), "utf8").split(/\s+/);
    const available = readFileSync(join(v2, "cgroup.controllers"), "utf8").split(/\s+/);
    const wanted = CONTROLLERS.filter((c) => available.includes(c));
    try {
      const missing = wanted.filter((c) => !enabled().includes(c));
      if (missing.length > 0) writeFileSync(join(v2, "cgroup.subtree_control"), missing.map((c) => `+${c}`).join(" "));
    } catch {
      // Not delegated to us, or this cgroup holds processes (the "no internal processes" rule): v1 may still do.
    }
    const on = wanted.filter((c) => enabled().includes(c));
    if (on.length > 0 && canMakeChildren(v2)) {
      return {
        version: 2,
        controllers: on,
        create(name) {
          const dir = join(v2, `svc-${name}`);
          makeCgroupDir(dir);
          return workerCgroup(2, Object.fromEntries(on.map((c) => [c, dir])));
        },
        sweep: () => sweepDir(v2),
      };
    }
  }
  const v1 = Object.fromEntries(Object.entries(found.v1).filter(([, dir]) => dir && canMakeChildren(dir))) as Partial<Record<CgroupController, string>>;
  const controllers = CONTROLLERS.filter((c) => v1[c]);
  if (controllers.length === 0) return { unavailable: "the service cannot make cgroups (neither delegated cgroup v2 controllers nor writable v1 hierarchies)" };
  return {
    version: 1,
    controllers,
    create(name) {
      const dirs: Partial<Record<CgroupController, string>> = {};
      try {
        for (const c of controllers) {
          const dir = join(v1[c]!, `svc-${name}`);
          makeCgroupDir(dir);
          dirs[c] = dir;
        }
      } catch (err) {
        for (const dir of Object.values(dirs)) rmdirSync(dir);
        throw err;
      }
      return workerCgroup(1, dirs);
    },
    sweep() {
      for (const c of controllers) sweepDir(v1[c]!);
    },
  };
}
