// One service per data directory. Two job engines on one SQLite file would each think they own its jobs (leases,
// retries, retention): jobs run twice, updates are lost. The first service writes its pid and host into
// <dataDir>/service.pid; another start there is refused while that process lives. A lock left by a crash (its
// process gone) is taken over, so a restart after kill -9 needs nothing.

import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { UserError } from "../../errors.js";
import { processAlive } from "svc/internal";

export interface DataDirLock {
  release(): void;
}

/** Who holds a lock file's contents ("<pid>\n<host>"), or undefined when it cannot be read as one. Pure. */
export function parseLock(text: string): { pid: number; host: string } | undefined {
  const [pid, host] = text.split("\n");
  const n = Number(pid);
  return Number.isInteger(n) && n > 0 && host ? { pid: n, host } : undefined;
}

/** A pid reused by another program after a crash is not a service (where /proc tells; elsewhere assume it is). */
function runsNode(pid: number): boolean {
  try {
    return /node/i.test(readFileSync(`/proc/${pid}/cmdline`, "utf8"));
  } catch {
    return true;
  }
}

export function lockDataDir(dataDir: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, "service.pid");
  const mine = `${process.pid}\n${hostname()}\n`;
  try {
    writeFileSync(file, mine, { flag: "wx", mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    let holder: { pid: number; host: string } | undefined;
    try {
      holder = parseLock(readFileSync(file, "utf8"));
    } catch {
      holder = undefined; // removed meanwhile, or unreadable: taken over below
    }
    if (holder && holder.host !== hostname()) {
      throw new UserError(`The data directory ${dataDir} is in use by an svc service on host ${holder.host} (pid ${holder.pid})`, {
        hint: `Stop that service first; if it is gone for good, delete ${file}.`,
      });
    }
    // The same process may open its directory again (a restart in place); another live one may not.
    if (holder && holder.pid !== process.pid && processAlive(holder.pid) && runsNode(holder.pid)) {
      throw new UserError(`The data directory ${dataDir} is in use by another svc service (pid ${holder.pid})`, {
        hint: "Stop that one first (a second `svc dev` in the same project, or `svc server` on the same --data-dir), or give this one another --data-dir.",
      });
    }
    writeFileSync(file, mine, { mode: 0o600 });
  }
  return {
    release() {
      try {
        if (readFileSync(file, "utf8") === mine) rmSync(file, { force: true });
      } catch {
        // already gone
      }
    },
  };
}
