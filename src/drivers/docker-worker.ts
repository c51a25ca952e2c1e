// A worker container's handle, whether the driver created the container or claimed a pre-booted one: its exit
// read from the engine's wait once its last output lines are in, the container removed then, stop() as `docker
// stop` (SIGTERM, SIGKILL after the grace) and its addresses for a load-balanced worker. Apart from the driver
// (docker.ts) because a fresh start and a claim end in the same handle.

import type Docker from "dockerode";
import { dockerMessage, dockerStatus } from "./docker-engine.js";
import { exitFromStatus, LB_CONTAINER_PORT } from "./docker-spec.js";
import type { WorkerExit, WorkerHandle, WorkerLaunch } from "./types.js";

export interface DockerWorkerHandle extends WorkerHandle {
  readonly containerId: string;
  readonly containerName: string;
  /** Published ports: container port -> host port on 127.0.0.1. */
  readonly ports: Record<number, number>;
}

/** What is known of a started worker container. */
export interface StartedContainer {
  name: string;
  ports: Record<number, number>;
  /** Its address on its network, reachable from the host on a local engine. */
  containerIp?: string;
  /** Its output read to the end. */
  streamsDone: Promise<void>;
  /** The engine's wait: its exit status. */
  status: Promise<{ StatusCode: number }>;
}

/**
 * The handle of a started worker container: its exit watched, the container removed once it has exited (then
 * `removed`). `log` says what could not be stopped or killed.
 */
export function watchWorker(
  container: Docker.Container,
  launch: WorkerLaunch,
  started: StartedContainer,
  driver: { log: (message: string) => void; removed: () => void },
): DockerWorkerHandle {
  const { ports, containerIp, streamsDone } = started;
  const { log } = driver;
  const exited: Promise<WorkerExit> = (async () => {
    let exit: WorkerExit;
    try {
      const result = await started.status;
      exit = exitFromStatus(result.StatusCode);
    } catch (err) {
      // The container vanished under us (removed by hand, engine restarted).
      launch.onLog({ ts: Date.now(), stream: "stderr", text: `[svc] lost the worker container: ${dockerMessage(err)}` });
      exit = { code: null, signal: null };
    }
    // Let the last lines (a crash's stack) reach onLog before the exit is reported.
    await Promise.race([streamsDone, new Promise((r) => setTimeout(r, 1000).unref())]);
    await container.remove({ force: true }).catch(() => undefined /* already gone, or left for close() to remove */);
    driver.removed();
    return exit;
  })();

  return {
    workerId: launch.workerId,
    containerId: container.id,
    containerName: started.name,
    ports,
    address: launch.loadBalanced && ports[LB_CONTAINER_PORT] ? `http://127.0.0.1:${ports[LB_CONTAINER_PORT]}` : undefined,
    directAddress:
      launch.loadBalanced && containerIp ? `http://${containerIp.includes(":") ? `[${containerIp}]` : containerIp}:${LB_CONTAINER_PORT}` : undefined,
    exited,
    stop(graceMs) {
      // docker stop: SIGTERM (forwarded by docker-init to the runtime, which drains), SIGKILL after t seconds.
      void container.stop({ t: Math.max(1, Math.ceil(graceMs / 1000)) }).catch((err: unknown) => {
        // Already stopped (304) or gone (404): its exit is all there is to wait for.
        if (dockerStatus(err) !== 304 && dockerStatus(err) !== 404)
          log(`could not stop container ${started.name} of worker ${launch.workerId}: ${dockerMessage(err)}`);
      });
      return exited;
    },
    kill() {
      void container.kill().catch((err: unknown) => {
        // Not running (409) or gone (404): nothing left to kill.
        if (dockerStatus(err) !== 409 && dockerStatus(err) !== 404)
          log(`could not kill container ${started.name} of worker ${launch.workerId}: ${dockerMessage(err)}`);
      });
    },
  };
}
