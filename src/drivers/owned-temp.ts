// Temporary directories of the process driver (the sandbox's identity files, load-balanced workers' sockets, the
// images of CRIU's dry run) carry
// the pid of the process that made them in their names. A process killed before its clean-up leaves its
// directories behind; the next service to start removes those whose owner is gone (never a live process's, never
// a name or an entry that is not one of these). A dead owner's directory stays while a live process still uses
// it: workers outlive a killed service, for the service restarted on the same data directory to adopt, and their
// sockets, run directories and bound files are in it; such a process names the directory in its environment
// (unsandboxed workers' socket path) or in its mounts (sandboxed workers' binds). Docker's staged artifacts (svc-worker-artifacts-<session>) are
// not among them: containers of a killed service keep running with those files bind-mounted, and the service
// restarted on the same data directory adopts them and reuses that directory, so its owner is not a pid.

import { lstatSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { asError } from "../errors.js";

/** The kinds of directory, each a name prefix. */
export const OWNED_TEMP_KINDS = ["svc-sandbox", "svc-lb", "svc-checkpoint-probe"] as const;
export type OwnedTempKind = (typeof OWNED_TEMP_KINDS)[number];

const OWNED_NAME = new RegExp(`^(?:${OWNED_TEMP_KINDS.join("|")})-pid([1-9]\\d{0,9})-`);

/** The start of a directory name of this kind owned by `pid` (mkdtemp adds its random end to it). Pure. */
export function ownedTempPrefix(kind: OwnedTempKind, pid: number = process.pid): string {
  return `${kind}-pid${pid}-`;
}

/** The pid that owns a directory of one of these names; undefined for any other name. Pure. */
export function tempDirOwner(name: string): number | undefined {
  const m = OWNED_NAME.exec(name);
  return m ? Number(m[1]) : undefined;
}

/**
 * Which of `names` (entries of the temporary directory) are stale: svc's own names whose owner pid is not alive
 * and is not `self`. Names of another form, earlier svc versions' without a pid included, are never stale: their
 * owner cannot be told. Pure.
 */
export function staleTempDirs(
  names: readonly string[],
  alive: (pid: number) => boolean,
  self: number = process.pid,
  inUse: (name: string) => boolean = () => false,
): string[] {
  return names.filter((name) => {
    const pid = tempDirOwner(name);
    return pid !== undefined && pid !== self && !alive(pid) && !inUse(name);
  });
}

/**
 * Which of `names` a live process names in its environment or its mounts (/proc/<pid>/environ and mountinfo, of
 * the processes this one may read). Linux only; elsewhere none.
 */
export function namesUsedByProcesses(names: readonly string[], proc = "/proc"): Set<string> {
  const used = new Set<string>();
  if (names.length === 0) return used;
  let pids: string[];
  try {
    pids = readdirSync(proc).filter((p) => /^\d+$/.test(p));
  } catch {
    return used; // No /proc (not Linux): nothing is known to use them, as before these names existed.
  }
  for (const pid of pids) {
    for (const file of ["environ", "mountinfo"]) {
      let text: string;
      try {
        text = readFileSync(join(proc, pid, file), "latin1");
      } catch {
        continue; // Gone meanwhile, or another user's: such a process cannot use this user's 0700 directories.
      }
      for (const name of names) if (text.includes(name)) used.add(name);
    }
    if (used.size === names.length) break;
  }
  return used;
}

/** Whether a process of that pid exists (one of another user's counts: signalling it is refused, not absent). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

/**
 * Remove the stale directories of `dir` (the system's temporary directory): only real directories (not links)
 * owned by this process's user. Returns the names removed; one that cannot be removed is reported through
 * `failed` and left.
 */
export function sweepStaleTempDirs(opts: { dir?: string; alive?: (pid: number) => boolean; failed?: (name: string, err: Error) => void } = {}): string[] {
  const dir = opts.dir ?? tmpdir();
  const uid = process.getuid?.();
  const removed: string[] = [];
  const alive = opts.alive ?? pidAlive;
  const ownerGone = staleTempDirs(readdirSync(dir), alive);
  const used = namesUsedByProcesses(ownerGone);
  for (const name of staleTempDirs(ownerGone, alive, process.pid, (n) => used.has(n))) {
    const path = join(dir, name);
    try {
      const st = lstatSync(path);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) continue;
      rmSync(path, { recursive: true, force: true });
      removed.push(name);
    } catch (err) {
      opts.failed?.(name, asError(err));
    }
  }
  return removed;
}
