// Image endpoints in `svc dev`: the app's TypeScript endpoints run as local processes, an image endpoint's
// workers (`Endpoint({ name, image })`) in Docker containers, the only place an image runs. One driver serves
// both: a launch with an image goes to Docker, every other to the process driver. Without a Docker engine the
// session still serves the other endpoints; the image endpoints' jobs wait, and the session says so for each.

import type Docker from "dockerode";
import { connectDocker } from "../drivers/docker-engine.js";
import { createDockerDriver, type DockerDriver } from "../drivers/docker.js";
import type { ProcessDriver } from "../drivers/process.js";
import { errorMessage, UserError } from "../errors.js";
import { endpointImageOf, type Manifest } from "svc/internal";

/** The image endpoints of a manifest, by name: `[name, image]`, sorted by name. Pure. */
export function imageEndpointsOf(manifest: Pick<Manifest, "resources">): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  for (const [name, resource] of Object.entries(manifest.resources)) {
    const image = endpointImageOf(resource);
    if (image) found.push([name, image]);
  }
  return found.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** What `svc dev` says of an image endpoint it cannot run: what is missing and what to do. Pure. */
export function imageEndpointUnavailable(name: string, image: string, reason: string): UserError {
  return new UserError(`Endpoint "${name}" runs the image "${image}" in Docker, and ${reason}: its jobs wait in the queue`, {
    hint: "Start a Docker engine (or set DOCKER_HOST) and restart `svc dev`; the other endpoints are served meanwhile.",
  });
}

/**
 * A driver that starts image launches in Docker and the others with `processes`. It runs images (hasImage) only
 * with a Docker engine: without one, the service leaves image endpoints waiting with a reason.
 */
export function withImageWorkers(processes: ProcessDriver, docker: DockerDriver | undefined): ProcessDriver {
  if (!docker) return processes;
  const driver: ProcessDriver = Object.create(processes) as ProcessDriver;
  return Object.assign(driver, {
    start: (launch: Parameters<ProcessDriver["start"]>[0]) => (launch.image ? docker.start(launch) : processes.start(launch)),
    hasImage: (name: string) => docker.hasImage?.(name) ?? Promise.resolve(false),
    async close() {
      await Promise.all([processes.close(), docker.close()]);
    },
  });
}

/** The Docker engine for a session's image endpoints, or why there is none (the engine's own words). */
export async function dockerForImages(options: { docker?: Docker; timeoutMs?: number } = {}): Promise<{ driver: DockerDriver } | { reason: string }> {
  try {
    const docker = await connectDocker({ docker: options.docker, timeoutMs: options.timeoutMs ?? 3000 });
    // A session of its own: its network and containers go when the session ends. GPU endpoints run on CPU where
    // the host has no GPU, as dev's process workers do.
    return { driver: createDockerDriver({ docker, networkScope: "session", volumeLifetime: "session", allowCpuFallback: true }) };
  } catch (err) {
    return { reason: err instanceof UserError ? err.message.replace(/^No/, "no") : `no Docker engine answers (${errorMessage(err)})` };
  }
}
