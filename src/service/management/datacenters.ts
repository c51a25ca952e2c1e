// Data centers are configuration: where volumes live, their storage tiers, and the GPU types on offer. The
// service's own box is one of them (the host data center): endpoints are allocated GPU types from its list.

import type { VolumeType } from "./store.js";

export interface DataCenter {
  id: string;
  name: string;
  /** The tier a volume gets when the request names none. */
  primaryVolumeType: VolumeType;
  volumeTypes: VolumeType[];
  /** GPU type ids offered here (for the host data center: the GPUs this machine has). */
  gpuTypes: string[];
}

export const LOCAL_DATA_CENTER: DataCenter = {
  id: "local",
  name: "This machine",
  primaryVolumeType: "STANDARD",
  volumeTypes: ["STANDARD", "HIGH_PERFORMANCE"],
  gpuTypes: [],
};

export interface DataCenterConfig {
  dataCenters: DataCenter[];
  /** Id of the data center this service runs in (default: the first). */
  host: string;
}

export function dataCenterConfig(dataCenters: DataCenter[] | undefined, host?: string): DataCenterConfig {
  const list = dataCenters && dataCenters.length > 0 ? dataCenters : [LOCAL_DATA_CENTER];
  const hostId = host ?? list[0]!.id;
  if (!list.some((d) => d.id === hostId)) throw new Error(`host data center "${hostId}" is not configured`);
  return { dataCenters: list, host: hostId };
}

export function hostGpuTypes(config: DataCenterConfig): string[] {
  return config.dataCenters.find((d) => d.id === config.host)?.gpuTypes ?? [];
}
