// A network volume's host directory, as every driver that runs workers on this host mounts it: the process
// driver binds it into the sandbox, the Docker driver bind-mounts it into the container. One directory is the
// volume's only home, so what one worker writes the next one reads, whichever driver started either.

import { chmodSync, mkdirSync, statSync } from "node:fs";

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

/**
 * Why a driver that places workers on other machines (Swarm, Kubernetes) refuses a launch with a network volume,
 * or undefined. The volume's files live in the service's data directory; such a driver has no way yet to bring
 * them to the node it picks (no volume driver or ReadWriteMany claim is configured per volume), and a worker
 * started without its volume, or on a node's own empty directory of that name, would lose what it writes. Pure.
 */
export function remoteVolumeRefusal(launch: { volumePath?: string; volumeName?: string; endpointName: string }, driver: string): string | undefined {
  if (!launch.volumePath || launch.volumeName) return undefined;
  return `Endpoint ${launch.endpointName} mounts a network volume, which ${driver} workers cannot reach yet (its files are in the service's data directory, not on the node a worker lands on): run it with process or Docker workers, or detach the volume. docs/volumes.md`;
}
