// A lock between processes on one cache directory: several fetchers on one node (Pods' init containers, Swarm
// tasks, `svc models fetch` run by hand) share a node's model cache, and each file must be downloaded once. The
// lock is a directory made with mkdir (atomic on every local filesystem) holding its owner (pid, host, time); its
// holder touches it while it works. A lock whose holder is gone (its pid dead on this host) or that nobody touched
// for `staleMs` is taken over: renamed aside first (one taker wins the rename), then made again.

import { mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { errorMessage } from "../../errors.js";

export interface DirLockOptions {
  /** How long a lock may go untouched before it counts as abandoned, ms. */
  staleMs?: number;
  /** How often the holder touches it (and a waiter looks again), ms. */
  refreshMs?: number;
  /** Said once when the lock is held by another process and this one waits. */
  onWait?(owner: string): void;
}

const OWNER_FILE = "owner.json";

interface Owner {
  pid: number;
  host: string;
  at: number;
}

/** Run `fn` holding the lock at `path` (a directory that must not exist unless a process holds it). */
export async function withDirLock<T>(path: string, fn: () => Promise<T>, options: DirLockOptions = {}): Promise<T> {
  const staleMs = options.staleMs ?? 30_000;
  const refreshMs = options.refreshMs ?? Math.max(50, Math.floor(staleMs / 6));
  let told = false;
  for (;;) {
    if (tryTake(path)) break;
    const owner = readOwner(path);
    if (owner === undefined || abandoned(path, owner, staleMs)) {
      takeOver(path);
      continue;
    }
    if (!told) {
      told = true;
      options.onWait?.(`pid ${owner.pid} on ${owner.host.split(" ")[0]}`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(refreshMs, 250)));
  }
  const touch = setInterval(() => {
    const now = new Date();
    try {
      utimesSync(path, now, now);
    } catch (err) {
      // Taken over (this process stalled past staleMs): the other fetcher's work is as good as this one's, and the
      // cache's writes are verified and renamed into place, so nothing is lost; only the once-per-node saving is.
      options.onWait?.(`the lock ${path} was taken over while held (${errorMessage(err)})`);
    }
  }, refreshMs);
  touch.unref();
  try {
    return await fn();
  } finally {
    clearInterval(touch);
    rmSync(path, { recursive: true, force: true });
  }
}

function tryTake(path: string): boolean {
  try {
    mkdirSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  const owner: Owner = { pid: process.pid, host: thisHost(), at: Date.now() };
  writeFileSync(join(path, OWNER_FILE), JSON.stringify(owner));
  return true;
}

/** The lock's owner; undefined when the lock is gone, or its owner was never written (its taker died in between). */
function readOwner(path: string): Owner | undefined {
  try {
    return JSON.parse(readFileSync(join(path, OWNER_FILE), "utf8")) as Owner;
  } catch {
    // Released meanwhile (the next try takes it), or made and never filled: judged by its age below.
    return ageOf(path) > 5_000 ? undefined : { pid: 0, host: "", at: Date.now() };
  }
}

function ageOf(path: string): number {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function abandoned(path: string, owner: Owner, staleMs: number): boolean {
  if (owner.host === thisHost() && owner.pid > 0 && owner.pid !== process.pid && !alive(owner.pid)) return true;
  return ageOf(path) > staleMs;
}

/**
 * The host and pid namespace this process's pids mean something in: containers on one node (host networking gives
 * them the node's name) each count pids their own way, so a pid is only checked where it was written.
 */
function thisHost(): string {
  let namespace = "";
  try {
    namespace = readlinkSync("/proc/self/ns/pid");
  } catch {
    // No /proc (not Linux): the host name alone, and staleness for the rest.
  }
  return namespace ? `${hostname()} ${namespace}` : hostname();
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: a process of another user has that pid; it is alive.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Move an abandoned lock aside and drop it: of several takers, only the one whose rename succeeds removes it. */
function takeOver(path: string): void {
  const aside = `${path}.stale-${randomBytes(4).toString("hex")}`;
  try {
    renameSync(path, aside);
  } catch (err) {
    // Another taker moved it first, or its holder released it: the next try decides.
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  rmSync(aside, { recursive: true, force: true });
}
