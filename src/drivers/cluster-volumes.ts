// Network volumes on drivers that place workers on other machines (Swarm, Kubernetes). A volume's files live in
// the service's data directory; a worker on another node reaches them only through storage the operator names:
// on Swarm a Docker volume driver with options (each node creates `svc-vol-<id>` with that driver when a task
// lands there), on Kubernetes a ReadWriteMany PersistentVolumeClaim `svc-vol-<id>` of a named StorageClass, which
// svc creates before the Pod. Without that configuration a worker with a volume is refused, naming the setting;
// one whose volume's data center has no node it could run on is refused too, rather than left pending. Pure.

import { VOLUME_MOUNT } from "./image-names.js";
import { DATA_CENTER_LABEL } from "./placement.js";

/** The endpoint's network volume, as a cluster driver needs it: its id (names, placeholders) and size in GB. */
export interface LaunchVolume {
  id: string;
  sizeGb: number;
}

/** How volumes reach Swarm nodes: a volume driver and its options (`{volume}` and `{size}` expanded per volume). */
export interface SwarmVolumeConfig {
  driver: string;
  options: Record<string, string>;
}

/** How volumes reach Kubernetes nodes: ReadWriteMany claims of this StorageClass. */
export interface KubernetesVolumeConfig {
  storageClass: string;
}

/** The settings that turn network volumes on, named in refusals (config.ts). */
export const SWARM_VOLUME_SETTINGS = "SVC_SWARM_VOLUME_DRIVER and SVC_SWARM_VOLUME_OPTIONS";
export const KUBERNETES_VOLUME_SETTING = "SVC_K8S_STORAGE_CLASS";

/** The Swarm volume configuration the operator's settings name, or undefined (volumes refused). Pure. */
export function swarmVolumeConfigOf(driver: string | undefined, options: Record<string, string> | undefined): SwarmVolumeConfig | undefined {
  if (!driver && !options) return undefined;
  return { driver: driver ?? "local", options: options ?? {} };
}

/** The placeholders a driver option may hold: the volume's id, its size in GB. */
const PLACEHOLDERS = new Set(["volume", "size"]);

/** The Docker volume (Swarm) and PersistentVolumeClaim (Kubernetes) of a network volume. */
export function clusterVolumeName(volumeId: string): string {
  return `svc-vol-${volumeId
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .slice(0, 50)
    .replace(/-+$/, "")}`;
}

/**
 * Driver options as the operator writes them, in `docker volume create --opt` terms: `key=value` pairs separated by
 * commas, CSV-quoted where a value holds commas and `=` (`"o=addr=10.0.0.5,nfsvers=4,rw"`, as `docker service
 * create --mount` takes them). A piece without `=` continues the value before it, so `o=addr=10.0.0.5,rw` keeps
 * `rw` in `o`. Placeholders other than `{volume}` and `{size}` are refused. Pure.
 */
export function parseVolumeDriverOptions(raw: string): { options?: Record<string, string>; problem?: string } {
  const fields: string[] = [];
  let field = "";
  let quoted = false;
  for (const ch of raw) {
    if (ch === '"') quoted = !quoted;
    else if (ch === "," && !quoted) {
      fields.push(field);
      field = "";
    } else field += ch;
  }
  if (quoted) return { problem: "has an unclosed double quote" };
  fields.push(field);
  const options: Record<string, string> = {};
  let last: string | undefined;
  for (const f of fields.map((x) => x.trim()).filter(Boolean)) {
    const eq = f.indexOf("=");
    if (eq <= 0) {
      if (last === undefined) return { problem: `starts with "${f}", which is no key=value` };
      options[last] += `,${f}`;
      continue;
    }
    last = f.slice(0, eq);
    options[last] = f.slice(eq + 1);
  }
  if (Object.keys(options).length === 0) return { problem: "names no option" };
  for (const value of Object.values(options)) {
    for (const m of value.matchAll(/\{([^}]*)\}/g)) {
      if (!PLACEHOLDERS.has(m[1]!)) return { problem: `holds {${m[1]}}: the placeholders are {volume} (the volume's id) and {size} (its size in GB)` };
    }
  }
  return { options };
}

/** The driver options of one volume: `{volume}` its id, `{size}` its size in GB. Pure. */
export function expandVolumeOptions(options: Record<string, string>, volume: LaunchVolume): Record<string, string> {
  return Object.fromEntries(Object.entries(options).map(([k, v]) => [k, v.replaceAll("{volume}", volume.id).replaceAll("{size}", String(volume.sizeGb))]));
}

/**
 * Why a cluster driver refuses a launch with a network volume, or undefined: the operator named no way for volumes
 * to reach nodes (`configured` false), or the launch names no volume the driver could create. Pure.
 */
export function clusterVolumeRefusal(
  launch: { volumePath?: string; volume?: LaunchVolume; endpointName: string },
  driver: "Docker Swarm" | "Kubernetes",
  configured: boolean,
): string | undefined {
  if (!launch.volumePath && !launch.volume) return undefined;
  const setting = driver === "Kubernetes" ? KUBERNETES_VOLUME_SETTING : SWARM_VOLUME_SETTINGS;
  if (!configured) {
    return `Endpoint ${launch.endpointName} mounts a network volume, and this service names no storage that follows ${driver} workers to their nodes: set ${setting} (docs/volumes.md), run it with process or Docker workers, or detach the volume`;
  }
  if (!launch.volume) return `Endpoint ${launch.endpointName} mounts a network volume the service could not name for ${driver}`;
  return undefined;
}

/** A node as a placement check sees it: its labels and whether the scheduler may put work there. */
export interface ClusterNode {
  labels: Record<string, string>;
  schedulable: boolean;
}

/**
 * Why a worker whose volume lives in `dataCenter` cannot be placed, or undefined: no schedulable node carries the
 * data center's label, so the task or Pod would wait forever. Pure.
 */
export function dataCenterRefusal(
  endpointName: string,
  dataCenter: string | undefined,
  nodes: readonly ClusterNode[],
  driver: "Docker Swarm" | "Kubernetes",
): string | undefined {
  if (!dataCenter) return undefined;
  if (nodes.some((n) => n.schedulable && n.labels[DATA_CENTER_LABEL] === dataCenter)) return undefined;
  const how =
    driver === "Kubernetes"
      ? `kubectl label node <node> ${DATA_CENTER_LABEL}=${dataCenter}`
      : `docker node update --label-add ${DATA_CENTER_LABEL}=${dataCenter} <node>`;
  return `Endpoint ${endpointName}'s network volume lives in data center ${dataCenter}, and no ${driver} node that takes work is labelled ${DATA_CENTER_LABEL}=${dataCenter}, so its worker could never be placed: label the nodes that reach the volume's storage (${how})`;
}

/** The Swarm mount of a worker's volume: created on the task's node by the operator's driver. Pure. */
export function swarmVolumeMount(volume: LaunchVolume, config: SwarmVolumeConfig, labels: Record<string, string>) {
  return {
    Type: "volume" as const,
    Source: clusterVolumeName(volume.id),
    Target: VOLUME_MOUNT,
    VolumeOptions: {
      // The worker image has nothing at the mount point to seed the volume with.
      NoCopy: true,
      Labels: labels,
      DriverConfig: { Name: config.driver, Options: expandVolumeOptions(config.options, volume) },
    },
  };
}

/**
 * The claim of a worker's volume on Kubernetes: ReadWriteMany (workers of the endpoint run on several nodes at
 * once), the StorageClass the operator names, the volume's size requested (GB as GiB: never less than asked). Pure.
 */
export function volumeClaim(volume: LaunchVolume, config: KubernetesVolumeConfig, labels: Record<string, string>) {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: clusterVolumeName(volume.id), labels },
    spec: {
      accessModes: ["ReadWriteMany"],
      storageClassName: config.storageClass,
      resources: { requests: { storage: `${volume.sizeGb}Gi` } },
    },
  };
}

/** Whether a claim's requested storage (`10Gi`, `10G`, bytes) is below `sizeGb` GiB: growing it is then due. Pure. */
export function claimBelow(requested: string | undefined, sizeGb: number): boolean {
  if (!requested) return true;
  const m = /^(\d+(?:\.\d+)?)([KMGTPE]i?)?$/.exec(requested);
  if (!m) return false;
  const unit = m[2] ?? "";
  const powers: Record<string, number> = {
    "": 1,
    K: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    P: 1e15,
    E: 1e18,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    Pi: 2 ** 50,
    Ei: 2 ** 60,
  };
  return Number(m[1]) * powers[unit]! < sizeGb * 2 ** 30;
}
