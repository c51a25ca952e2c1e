// A network volume's host directory, as every driver that runs workers on this host mounts it: the process
// driver binds it into the sandbox, the Docker driver bind-mounts it into the container. One directory is the
// volume's only home, so what one worker writes the next one reads, whichever driver started either.

import { chmodSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";

/**
 * Open to every worker: Docker workers run as uid 1000, process workers as the service's user. The data
 * directory's `volumes/` above it is the service's alone (0700), so no other account on the host reaches it;
 * the only ones who do are the volume owner's own workers and the service.
 */
export const VOLUME_DIR_MODE = 0o777;

/** Create the volume's directory when missing and open it to every worker. Idempotent. */
export function prepareVolumeDir(path: string): void {
  mkdirSync(path, { recursive: true });
  if ((statSync(path).mode & 0o777) !== VOLUME_DIR_MODE) {
    try {
      chmodSync(path, VOLUME_DIR_MODE);
    } catch (err) {
      // A directory of another account (a restored backup): workers of the owner's uid can still use it.
      if ((err as NodeJS.ErrnoException).code !== "EPERM") throw err;
    }
  }
}

/** A network volume's directory under the service's data directory. */
export function volumeDir(dataDir: string, volumeId: string): string {
  return join(dataDir, "volumes", volumeId);
}
