// What a process worker is given: its environment (the allowed host variables, the endpoint's own, then the
// protocol's) and, sandboxed, its limits. Apart from the driver (process.ts) because both are pure: the same
// launch gives the same environment whether the worker is spawned, claimed from the pool or restored.

import { applyProtocolEnv, type WorkerPlacement } from "./env.js";
import type { CgroupLimits, SandboxDefaults } from "./sandbox/index.js";
import type { WorkerLaunch } from "./types.js";

/**
 * The child's environment: the host variables the allow-list lets through (`hostEnv`, from allowedHostEnv: never
 * the service's whole environment), then the endpoint's configured variables, then the protocol variables (which
 * user env cannot override). Pure.
 */
export function workerEnvironment(
  launch: WorkerLaunch,
  hostEnv: Readonly<Record<string, string>>,
  placement: Omit<WorkerPlacement, "apiUrl" | "artifact"> & { artifact?: string },
): Record<string, string> {
  const env: Record<string, string | undefined> = { ...hostEnv };
  Object.assign(env, launch.environment);
  applyProtocolEnv(env, launch, { apiUrl: launch.apiUrl, artifact: launch.artifactPath, ...placement });
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  return out;
}

/** A worker's limits: its endpoint's instance (CPU endpoints name vCPUs and memory), else the sandbox's defaults. */
export function workerLimits(launch: Pick<WorkerLaunch, "placement">, defaults: SandboxDefaults): { limits: CgroupLimits; tmpBytes: number; shmBytes: number } {
  const memoryMb = launch.placement?.memoryMb ?? defaults.memoryMb;
  const limits: CgroupLimits = { pids: defaults.pids };
  if (memoryMb !== undefined) limits.memoryBytes = memoryMb * 1024 * 1024;
  if (launch.placement?.cpus !== undefined) limits.cpus = launch.placement.cpus;
  // /tmp is memory (tmpfs pages count against the worker's cgroup): never larger than the worker's memory.
  const tmpMb = memoryMb === undefined ? defaults.tmpMb : Math.min(defaults.tmpMb, memoryMb);
  const shmMb = memoryMb === undefined ? defaults.shmMb : Math.min(defaults.shmMb, memoryMb);
  return { limits, tmpBytes: tmpMb * 1024 * 1024, shmBytes: shmMb * 1024 * 1024 };
}
