// Where load-balanced process workers also listen on a Unix socket, which the service's proxy reaches without TCP
// (measured: ~0.1x of a proxied request's latency): a directory of the driver's own (0700) under the system's tmp,
// and in it, for each sandboxed worker, a run directory of its own, the only one bound into its sandbox. Made when
// first needed; gone with the driver.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ownedTempPrefix } from "./owned-temp.js";
import type { WorkerLaunch } from "./types.js";

export interface WorkerSockets {
  /** Whether `launch`'s worker listens on a socket too (load-balanced, svc's own image, not on Windows). */
  wanted(launch: WorkerLaunch): boolean;
  /** An unsandboxed worker's socket path, in the driver's directory (undefined: TCP only). */
  socketFor(launch: WorkerLaunch): string | undefined;
  /** A sandboxed worker's own run directory (its socket is made there), named after `name`. */
  runDirFor(name: string): string;
  /** Remove the directory and all in it. */
  close(): void;
}

/** The sockets of one driver's workers (`localSockets` false: none, TCP only). */
export function createWorkerSockets(localSockets: boolean | undefined): WorkerSockets {
  let socketDir: string | undefined;
  const socketRoot = () => (socketDir ??= mkdtempSync(join(tmpdir(), ownedTempPrefix("svc-lb"))));
  const wanted = (launch: WorkerLaunch) => localSockets !== false && launch.loadBalanced === true && !launch.image && process.platform !== "win32";
  return {
    wanted,
    socketFor(launch) {
      if (!wanted(launch)) return undefined;
      const path = join(socketRoot(), `${launch.workerId}.sock`);
      // (A socket path has a small limit, ~107 bytes on Linux: past it, TCP only.)
      return Buffer.byteLength(path) <= 100 ? path : undefined;
    },
    runDirFor: (name) => mkdtempSync(join(socketRoot(), `${name}-`)),
    close() {
      if (socketDir) rmSync(socketDir, { recursive: true, force: true });
    },
  };
}
