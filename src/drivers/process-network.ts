// Where process workers are reached and what they reach: a free loopback port for a load-balanced worker, the host
// ports a sandboxed worker may reach, and the pasta connections of sandboxed workers' own network namespaces,
// stopped with their workers or with the service. Apart from the driver (process.ts) because a fresh sandboxed
// worker and a pooled runtime connect the same way.

import type { ChildProcess } from "node:child_process";
import { createServer, type AddressInfo } from "node:net";
import { errorMessage } from "../errors.js";
import { signalRunning } from "./process-handle.js";
import type { Sandbox } from "./sandbox/index.js";
import { loopbackPort, type AttachedNetwork } from "./sandbox/pasta.js";
import type { WorkerLaunch } from "./types.js";

/** A free TCP port on 127.0.0.1 for a load-balanced worker to listen on (the driver names its address). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The host ports a sandboxed worker reaches: the job API's, the S3 API's own where its BUCKET_* key uploads, the
 * service's trace collector's where it is on this host, and those the operator allows (`allowed`). Pure.
 */
export function workerHostPorts(launch: Pick<WorkerLaunch, "apiUrl" | "bucket" | "traces">, allowed: readonly number[] = []): number[] {
  const ports = [
    loopbackPort(launch.apiUrl),
    launch.bucket ? loopbackPort(launch.bucket.endpointUrl) : undefined,
    // The service's collector on this host: the runtime sends its spans there.
    launch.traces ? loopbackPort(launch.traces.tracesUrl) : undefined,
    ...allowed,
  ];
  return [...new Set(ports.filter((p): p is number => p !== undefined))];
}

export interface WorkerNetworks {
  /**
   * A sandboxed worker's own network namespace connected by pasta, only the job API's port of the host's loopback
   * reachable; pasta ends with the worker. A failure ends the worker (it could not reach the service) and says why.
   */
  connect(
    launch: WorkerLaunch,
    child: ChildProcess,
    innerPid: number,
    hostPorts: readonly number[],
    inbound: readonly number[],
  ): Promise<AttachedNetwork | undefined>;
  /** Stop a worker's pasta when the worker exits, or when this process does (it kills its workers then). */
  watch(child: ChildProcess, attached: AttachedNetwork): void;
  /** Stop the pasta of every worker that runs (this process exits). */
  stopAll(): void;
}

/** The networks of the sandboxed workers of one driver (none connected where the sandbox shares the host's). */
export function createWorkerNetworks(sandbox: Sandbox | undefined): WorkerNetworks {
  /** The pastas of this process's sandboxed workers that run: stopped with them, and when this process exits. */
  const networks = new Set<AttachedNetwork>();
  const watch = (child: ChildProcess, attached: AttachedNetwork): void => {
    if (child.exitCode !== null || child.signalCode !== null) return attached.stop();
    networks.add(attached);
    child.once("exit", () => {
      networks.delete(attached);
      attached.stop();
    });
  };
  return {
    watch,
    async connect(launch, child, innerPid, hostPorts, inbound) {
      const network = sandbox?.network;
      if (network?.kind !== "pasta") return undefined;
      try {
        // A load-balanced worker's port forwarded in: the service reaches it there, on the host's loopback.
        const attached = await network.attach(innerPid, hostPorts, inbound);
        watch(child, attached);
        return attached;
      } catch (err) {
        launch.onLog({ ts: Date.now(), stream: "stderr", text: `[svc] ${errorMessage(err)}` });
        child.kill("SIGKILL");
        signalRunning({ child, innerPid }, "SIGKILL");
        return undefined;
      }
    },
    stopAll() {
      for (const network of networks) network.stop();
    },
  };
}
