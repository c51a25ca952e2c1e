// What the Docker host has and what earlier sessions left on it: its GPUs (detectGpuSupport), where a session
// stages artifacts, and the removal of a crashed session's containers, networks, volumes and staged artifacts
// (cleanupStale). Apart from the driver (docker.ts) because each works without one: previews, `svc images` and
// the tests call them on their own.

import { existsSync } from "node:fs";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import type Docker from "dockerode";
import { errorMessage } from "../errors.js";
import { connectDocker, dockerNamePart, dockerStatus, labelFilter, LABELS } from "./docker-engine.js";
import { removeArtifactsDir } from "./docker-pool.js";
import type { GpuSupport } from "./docker-spec.js";

/** NVIDIA GPUs on this host: a device node, a working nvidia-smi, or the engine's nvidia runtime. */
export async function detectGpuSupport(docker?: Docker): Promise<GpuSupport> {
  if (existsSync("/dev/nvidia0")) return { available: true, reason: "/dev/nvidia0 exists" };
  try {
    const { stdout } = await promisify(execFile)("nvidia-smi", ["-L"], { timeout: 5000, encoding: "utf8" });
    if (/GPU \d+/.test(stdout)) return { available: true, reason: "nvidia-smi lists GPUs" };
  } catch {
    // no nvidia-smi, or no GPU behind it
  }
  if (docker) {
    try {
      const info = (await docker.info()) as { Runtimes?: Record<string, unknown> };
      if (info.Runtimes && "nvidia" in info.Runtimes) return { available: true, reason: "the engine has the nvidia runtime" };
    } catch {
      // the engine's absence is reported elsewhere
    }
  }
  return { available: false, reason: "this host has no NVIDIA GPU (no /dev/nvidia0, no nvidia-smi, no nvidia runtime in the Docker engine)" };
}

export interface StaleCleanup {
  containers: number;
  networks: number;
  volumes: number;
}

/** Where a driver of `session` stages the artifacts its containers bind-mount, unless given artifactCacheDir. */
export function stagedArtifactsDir(session: string): string {
  return join(tmpdir(), `svc-worker-artifacts-${dockerNamePart(session, 40)}`);
}

/** The node artifact cache pool containers of `session` read from, unless given artifactCacheDir. */
export function poolArtifactsDir(session: string): string {
  return join(tmpdir(), `svc-pool-artifacts-${dockerNamePart(session, 40)}`);
}

/**
 * Remove what svc left behind (a crashed session): containers, networks and (unless `volumes: false`) volumes
 * carrying all of `labels` and svc.managed=true. Returns how many of each went. Given a session, the artifacts
 * its driver staged in the temporary directory go too, once no container of it is left to read them; one that
 * cannot be removed is said through `log` and left (copies of artifacts the service keeps: nothing is lost).
 */
export async function cleanupStale(
  labels: Record<string, string>,
  options: { docker?: Docker; volumes?: boolean; log?: (message: string) => void } = {},
): Promise<StaleCleanup> {
  const docker = options.docker ?? (await connectDocker());
  const filters = labelFilter({ [LABELS.managed]: "true", ...labels });
  const result: StaleCleanup = { containers: 0, networks: 0, volumes: 0 };
  for (const c of await docker.listContainers({ all: true, filters })) {
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .then(() => result.containers++)
      .catch((err: unknown) => {
        if (dockerStatus(err) !== 404) throw err;
      });
  }
  const session = labels[LABELS.session];
  if (session !== undefined) {
    await Promise.all(
      [stagedArtifactsDir(session), poolArtifactsDir(session)].map((dir) =>
        removeArtifactsDir(dir).catch((err: unknown) => options.log?.(`left ${dir} (artifacts staged by session ${session}): ${errorMessage(err)}`)),
      ),
    );
  }
  for (const n of await docker.listNetworks({ filters })) {
    await docker
      .getNetwork(n.Id)
      .remove()
      .then(() => result.networks++)
      .catch((err: unknown) => {
        if (dockerStatus(err) !== 404) throw err;
      });
  }
  if (options.volumes !== false) {
    const { Volumes } = await docker.listVolumes({ filters });
    for (const v of Volumes ?? []) {
      await docker
        .getVolume(v.Name)
        .remove()
        .then(() => result.volumes++)
        .catch((err: unknown) => {
          if (dockerStatus(err) !== 404) throw err;
        });
    }
  }
  return result;
}
