// The claim of a pre-booted worker container (docs/cold-start.md): the container waiting in the pool
// (docker-pool-engine.ts) becomes a launch's worker, on the endpoint's network, with the endpoint's memory and CPU
// and its whole environment written to the runtime's stdin. Apart from the driver (docker.ts), which decides
// whether a launch may claim one (docker-pool.ts poolRefusal) and falls back to a fresh container when a claim fails.

import type Docker from "dockerode";
import { dockerMessage, dockerNamePart } from "./docker-engine.js";
import type { NetworkState } from "./docker-networks.js";
import { claimedName, claimEnvironment, type ArtifactCache } from "./docker-pool.js";
import type { PooledContainer } from "./docker-pool-engine.js";
import { SERVICE_HOST_ALIAS } from "./docker-spec.js";
import type { StartedContainer } from "./docker-worker.js";
import { dockerResources, type ContainerLimits } from "./isolation.js";
import type { WorkerLaunch } from "./types.js";

/** What of its driver a claim uses. */
export interface ClaimContext {
  /** The node's artifact cache the pool's containers read artifacts from. */
  artifacts: ArtifactCache;
  limits: ContainerLimits;
  log: (message: string) => void;
}

/**
 * Make a pre-booted container this launch's worker: on the endpoint's network (when the pool's is another),
 * its artifact staged in the node's cache, its whole environment written to the runtime's stdin. Renamed after
 * its worker, so a later run of the service knows whose it was. Gives what the worker's handle is made from.
 */
export async function claim(
  docker: Docker,
  taken: PooledContainer,
  launch: WorkerLaunch,
  network: NetworkState,
  apiUrl: string,
  driver: ClaimContext,
): Promise<StartedContainer> {
  const container = taken.container;
  const moving = taken.network !== network.name;
  // The pool's network has its own gateway: the svc-api alias (fixed at create) names that one, so a container
  // that moves reaches the service at its new network's gateway by address.
  const claimUrl = moving && new URL(apiUrl).hostname === SERVICE_HOST_ALIAS ? apiUrl.replace(`//${SERVICE_HOST_ALIAS}`, `//${network.gateway}`) : apiUrl;
  // The endpoint's memory and CPU, set before its code can run: a pool container is booted before any endpoint.
  const resources = dockerResources(launch.placement, driver.limits);
  const [artifact] = await Promise.all([
    driver.artifacts.stage(launch.artifactPath),
    moving ? docker.getNetwork(network.id).connect({ Container: container.id, EndpointConfig: { Aliases: [dockerNamePart(launch.endpointName)] } }) : undefined,
    resources.Memory || resources.NanoCpus ? container.update(resources) : undefined,
  ]);
  taken.sink.onLog = launch.onLog;
  taken.stream.write(`${JSON.stringify({ env: claimEnvironment(launch, claimUrl, artifact) })}\n`);
  const name = claimedName(launch.endpointId, launch.workerId);
  await Promise.all([
    moving ? docker.getNetwork(taken.network).disconnect({ Container: container.id, Force: true }) : undefined,
    name ? container.rename({ name }) : undefined,
  ]).catch((err: unknown) => driver.log(`worker ${launch.workerId}: ${dockerMessage(err)} (after its claim of pre-booted container ${taken.name})`));
  return { name: name ?? taken.name, ports: {}, streamsDone: taken.streamsDone, status: taken.status };
}
