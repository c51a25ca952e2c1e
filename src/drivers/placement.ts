// Where and on what a worker may run, as schedulers (Swarm, Kubernetes) are told: CPU and memory from the
// endpoint's CPU instance id (`cpu3c-2-4`: 2 vCPUs, 4 GB), GPUs (the endpoint's gpuCount per worker),
// and the data center its network volume lives in (the worker must run where the volume is). Pure.

import { gpuCountOf } from "../gpus/allocate.js";

/** The node label (Swarm) and node selector key (Kubernetes) naming a node's data center. */
export const DATA_CENTER_LABEL = "svc.data-center";

export interface Placement {
  /** vCPUs and memory the instance id names; absent for GPU endpoints (their machines are sized by the GPU). */
  cpus?: number;
  memoryMb?: number;
  /** GPUs per worker: the endpoint's gpuCount (1 unless set) for a GPU endpoint, else 0. */
  gpus: number;
  /** The data center of the endpoint's network volume, when it has one. */
  dataCenter?: string;
}

/** vCPUs and memory of a CPU instance id `<family>-<vcpus>-<memory GB>` (`cpu3c-1-2`); undefined for another form. */
export function cpuInstanceShape(instanceId: string): { cpus: number; memoryMb: number } | undefined {
  const m = /^[a-z0-9]+-(\d+)-(\d+)$/.exec(instanceId);
  if (!m) return undefined;
  const cpus = Number(m[1]);
  const memoryGb = Number(m[2]);
  if (cpus < 1 || memoryGb < 1) return undefined;
  return { cpus, memoryMb: memoryGb * 1024 };
}

export function placementOf(resource: { computeType: "GPU" | "CPU"; instanceIds: readonly string[]; gpuCount?: number }, dataCenter?: string): Placement {
  const shape = resource.computeType === "CPU" && resource.instanceIds[0] ? cpuInstanceShape(resource.instanceIds[0]) : undefined;
  return {
    ...(shape ?? {}),
    gpus: gpuCountOf(resource),
    ...(dataCenter ? { dataCenter } : {}),
  };
}
