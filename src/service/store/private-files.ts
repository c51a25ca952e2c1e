// The service's files at rest are its own: the data directory is 0700 and what it writes there (the database
// and its WAL, artifacts, keys) 0600, so that no other account on the machine reads users' code, jobs or the keys
// that open their secrets. Made so when created, and tightened at every start when found looser (a data directory
// from an earlier version, a restored backup). Network volumes' own directories keep their modes: workers use them.

import { existsSync } from "node:fs";
import { chmod, mkdir, open, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { UserError } from "../../errors.js";

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** A mode without any permission for the group or others (nor set-id bits); the owner's as they were. Pure. */
export function tightened(mode: number): number {
  return mode & 0o700;
}

/** Take group and other permissions off `path` when it has any; false when it does not exist. */
async function tighten(path: string): Promise<boolean> {
  const st = await stat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
  if (!st) return false;
  if ((st.mode & 0o077) === 0) return true;
  await chmod(path, tightened(st.mode)).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== "EPERM") throw err;
    throw new UserError(`${path} belongs to another user, and the service keeps its data directory to itself (mode ${tightened(st.mode).toString(8)})`, {
      hint: "Run the service as the owner of its data directory, or `chown` it to the service's user, or pass another --data-dir (SVC_DATA_DIR).",
    });
  });
  return true;
}

/** A directory only its owner may enter: created 0700, or tightened. */
export async function privateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  await tighten(dir);
}

/** The files of the data directory the service writes, by name (the SQLite file's WAL and shared memory too). */
export const DATA_DIR_FILES = ["svc.sqlite", "svc.sqlite-wal", "svc.sqlite-shm", "svc.sqlite-journal", "admin-key", "secrets-key", "service.pid"] as const;

/**
 * Make the data directory the service's alone before anything opens it. The SQLite file is created empty (a valid
 * empty database) with 0600 when absent: SQLite gives its WAL and shared-memory files the database file's mode.
 */
export async function secureDataDir(dataDir: string, options: { sqlite: boolean }): Promise<void> {
  await privateDir(dataDir);
  const db = join(dataDir, "svc.sqlite");
  if (options.sqlite && !existsSync(db)) await (await open(db, "a", PRIVATE_FILE_MODE)).close();
  for (const name of DATA_DIR_FILES) await tighten(join(dataDir, name));
  for (const dir of ["artifacts"]) {
    const path = join(dataDir, dir);
    if (!existsSync(path)) continue;
    await tighten(path);
    for (const entry of await readdir(path, { withFileTypes: true })) if (entry.isFile()) await tighten(join(path, entry.name));
  }
  // The volumes' root only: each volume's own directory is what its workers are given.
  await privateDir(join(dataDir, "volumes"));
}
