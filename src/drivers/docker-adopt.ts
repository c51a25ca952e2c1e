// What a Docker driver with a stable session finds of an earlier, killed run of its service: the containers it
// left. Their host-side forwarder died with that run, so they cannot reach the service again: they are removed,
// and those that were workers are returned as workers that have ended, for the service to requeue their jobs at
// once instead of waiting for the leases to lapse. Apart from the driver (docker.ts): it reads labels and names only.

import type Docker from "dockerode";
import { dockerStatus, labelFilter, LABELS } from "./docker-engine.js";
import { parseClaimedName } from "./docker-pool.js";
import type { AdoptedWorker, WorkerExit } from "./types.js";

/**
 * Remove the containers of `session` that this run does not hold (`ours`: its pool's and its workers'), and give
 * the workers among them as ended. A pre-booted container never claimed is removed and given as nothing.
 */
export async function removeLeftovers(
  docker: Docker,
  session: string,
  ours: { container: (name: string, id: string) => boolean; worker: (workerId: string) => boolean },
  log: (message: string) => void,
): Promise<AdoptedWorker[]> {
  const leftovers = await docker.listContainers({ all: true, filters: labelFilter({ [LABELS.managed]: "true", [LABELS.session]: session }) });
  const gone: AdoptedWorker[] = [];
  for (const info of leftovers) {
    let workerId = info.Labels[LABELS.worker];
    let endpointId = info.Labels[LABELS.endpoint];
    if (info.Labels[LABELS.pool] === "true") {
      const name = (info.Names[0] ?? "").replace(/^\//, "");
      // This run's own pool, or a container it claimed.
      if (ours.container(name, info.Id)) continue;
      // A pre-booted container the killed run claimed: its name says for which worker (labels are fixed at
      // create). One it never claimed is just removed.
      const claimed = parseClaimedName(name);
      if (!claimed) {
        await docker
          .getContainer(info.Id)
          .remove({ force: true })
          .catch((err: unknown) => {
            if (dockerStatus(err) !== 404) throw err;
          });
        log(`removed pre-booted container ${name} left by an earlier run of the service`);
        continue;
      }
      ({ workerId, endpointId } = claimed);
    }
    if (!workerId || !endpointId || ours.worker(workerId)) continue;
    await docker
      .getContainer(info.Id)
      .remove({ force: true })
      .catch((err: unknown) => {
        if (dockerStatus(err) !== 404) throw err;
      });
    log(`removed worker container ${info.Names[0] ?? info.Id} left by an earlier run of the service`);
    const exited = Promise.resolve<WorkerExit>({ code: null, signal: "SIGKILL" });
    gone.push({ endpointId, handle: { workerId, exited, stop: () => exited, kill: () => undefined }, ended: true });
  }
  return gone;
}
