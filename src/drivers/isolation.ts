// How a worker's container is confined, on every container driver (Docker, Swarm, Kubernetes): the worker image's
// non-root user, no capabilities, no privilege gain through setuid binaries (no-new-privileges), a read-only root
// filesystem with a private, size-bounded /tmp (where the runtime unpacks the artifact and user code writes), and
// limits on memory and CPU (the endpoint's CPU instance) and on processes. An operator may name an OCI runtime
// (gVisor's `runsc`): then each worker also gets its own kernel instead of sharing the host's. Pure; the drivers
// put these fields into their own API's shapes. docs/docker.md ("Isolation"), docs/cluster.md.

import type { Placement } from "./placement.js";

/** Where a worker writes: a private tmpfs (Docker, Swarm) or memory-backed emptyDir (Kubernetes). */
export const WORKER_TMP = "/tmp";
/**
 * HOME inside worker containers: the root filesystem is read-only, so tools that keep caches under HOME (npm,
 * model hubs) write to /tmp instead. A variable of the endpoint's named HOME still wins.
 */
export const WORKER_HOME = WORKER_TMP;

export interface ContainerLimits {
  /** Processes and threads a worker's container may hold (fork bombs stop there). */
  pidsLimit: number;
  /** Size of the worker's /tmp in MiB (its pages count against the container's memory limit too). */
  tmpMb: number;
}

export const DEFAULT_CONTAINER_LIMITS: ContainerLimits = { pidsLimit: 1024, tmpMb: 1024 };

/** The non-root user worker containers run as: the worker image's user (images.ts WORKER_USER). */
export const WORKER_UID = 1000;
export const WORKER_GID = 1000;

/**
 * Options of the /tmp tmpfs: `exec` because the runtime unpacks the artifact there and native addons in it are
 * mapped executable (Docker mounts a tmpfs noexec unless told); nosuid and nodev; writable by every user (1777)
 * like any /tmp. Pure.
 */
export function tmpfsOptions(tmpMb: number): string {
  return `rw,exec,nosuid,nodev,size=${tmpMb}m,mode=1777`;
}

/** Memory (no swap beyond it), CPU and process limits of a worker's Docker container. Pure. */
export function dockerResources(
  placement: Placement | undefined,
  limits: ContainerLimits,
): { Memory?: number; MemorySwap?: number; NanoCpus?: number; PidsLimit: number } {
  const memory = placement?.memoryMb ? placement.memoryMb * 1024 * 1024 : undefined;
  return {
    ...(memory ? { Memory: memory, MemorySwap: memory } : {}),
    ...(placement?.cpus ? { NanoCpus: placement.cpus * 1e9 } : {}),
    PidsLimit: limits.pidsLimit,
  };
}

export interface DockerConfinementOptions {
  limits: ContainerLimits;
  /** The engine's OCI runtime to run it under ("runsc"); undefined: the engine's default (runc). */
  runtime?: string;
  /**
   * svc's own worker image: read-only root (everything svc's runtime writes goes to /tmp or the volume). A
   * prebuilt image gets a writable root filesystem (its own layer) where its template allows one
   * (writableRootGb): images built for the provider write beside their code.
   */
  readOnlyRoot: boolean;
  /** The writable layer's bound in GiB, where the engine's storage driver can bound it (storage option `size`). */
  layerSizeGb?: number;
}

/**
 * The GiB of writable root a launch's container gets: its image's allowance (the template's `containerDiskInGb`);
 * 0, a read-only root, for svc's own image and for an image whose template allows none. Pure.
 */
export function writableRootGb(launch: { image?: string; containerDiskInGb?: number }): number {
  return launch.image ? Math.max(0, launch.containerDiskInGb ?? 0) : 0;
}

/** The confinement fields of a worker container's HostConfig. Pure. */
export function dockerConfinement(placement: Placement | undefined, options: DockerConfinementOptions) {
  return {
    SecurityOpt: ["no-new-privileges"],
    CapDrop: ["ALL"],
    ReadonlyRootfs: options.readOnlyRoot,
    ...(options.layerSizeGb && !options.readOnlyRoot ? { StorageOpt: { size: `${options.layerSizeGb}G` } } : {}),
    Tmpfs: { [WORKER_TMP]: tmpfsOptions(options.limits.tmpMb) },
    ...dockerResources(placement, options.limits),
    ...(options.runtime ? { Runtime: options.runtime } : {}),
  };
}

/** `docker info`'s runtimes -> the one workers run under, as `svc doctor` and the driver's start line say it. Pure. */
export function describeRuntime(runtime: string | undefined, defaultRuntime: string | undefined): string {
  const name = runtime ?? defaultRuntime ?? "runc";
  return /runsc/.test(name) ? `${name} (gVisor: a kernel of its own per container)` : `${name} (the host's kernel, shared)`;
}
