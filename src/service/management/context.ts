// What the management routes share: their store, the data-center configuration, the rate limiter, and the
// access rules of management scopes.

import type { VolumeStorage } from "../volumes/storage.js";
import type { KeyRing, Principal } from "../keys/auth.js";
import type { EngineEndpoint, JobEngine } from "../engine/index.js";
import type { EndpointRegistry } from "../endpoints/registry.js";
import type { StartFailures } from "../releases/start-failures.js";
import type { Scaler } from "../workers/scaler.js";
import type { VolumesApi } from "../volumes/index.js";
import type { HostGpus } from "../../gpus/host.js";
import type { WorkerDriver } from "../../drivers/types.js";
import { HttpProblem } from "../http/problems.js";
import type { SecretBox } from "../secrets/box.js";
import type { RateLimiting } from "../keys/ratelimit.js";
import type { EndpointRow } from "../store/types.js";
import type { DataCenterConfig } from "./datacenters.js";
import type { ManagementStore, VolumeRecord } from "./store.js";

// The management API's access check and body reader sit in the HTTP layer, where the features' routes share them.
export { readObjectBody, requireAccess, type ManagementFamily } from "../http/management-request.js";

/** What the management routes need of the rest of the service (beyond their own parts, ManagementContext). */
export interface ManagementDeps {
  url: string;
  engine: Pick<JobEngine, "write" | "appendLogs" | "dropEndpoint">;
  /** The endpoints served: REST endpoints are written here, deployed ones read. */
  endpoints: Pick<EndpointRegistry, "get" | "values" | "upsert" | "remove">;
  scaler():
    | Pick<
        Scaler,
        | "runsImages"
        | "pullsImages"
        | "driverName"
        | "hasImage"
        | "checkImage"
        | "workerGpus"
        | "gpuWait"
        | "pullFailure"
        | "modelWait"
        | "reconcile"
        | "crashLoop"
      >
    | undefined;
  startFailures: Pick<StartFailures, "unhealthy" | "last">;
  /** A revoked key is forgotten at once, not when its cached principal expires. */
  keyring: Pick<KeyRing, "forget">;
  gpus?(): HostGpus | undefined;
  /** Volume access keys and usage (volumes/index.ts); absent where the S3 API is not served. */
  volumes?: VolumesApi;
  /** The worker driver's storage of volumes on a cluster (a Kubernetes claim, a Swarm volume): deleted and grown with them. */
  clusterVolumes?(): Pick<WorkerDriver, "removeVolume" | "resizeVolume"> | undefined;
}

export interface ManagementContext {
  store: ManagementStore;
  dataDir: string;
  dataCenters: DataCenterConfig;
  limiter: RateLimiting;
  /** The user whose admin keys may act for other users (create their keys): the service's operator. */
  operatorUser: string;
  engineEndpoint(row: EndpointRow): EngineEndpoint;
  /**
   * Why this service serves one user only (its workers run without a sandbox), when it does: keys for another
   * user are refused (409).
   */
  singleUser?: string;
  /** What seals users' registry credentials at rest (the secrets key); absent: they cannot be created. */
  box?: SecretBox;
  /** Where volumes' files live and what bounds them (volumes/storage.ts). */
  volumeStorage: VolumeStorage;
}

/** Whether the key may decide what code workers run (an image, a template, a worker's environment). */
export function canDeploy(p: Principal): boolean {
  return !p.worker && (p.scopes.includes("admin") || p.scopes.includes("deploy"));
}

/**
 * 403 unless the key may decide what code workers run: `deploy` or `admin`. `management:write` alone changes
 * how many workers run and where their data lives, never what they execute.
 */
export function requireDeploy(p: Principal, what: string): void {
  if (!canDeploy(p)) throw new HttpProblem(403, `${what} decides what code workers run: it needs a key with the deploy (or admin) scope`);
}

export { volumeDir } from "../../drivers/volume-dir.js";

/** Volume ids as the service makes them (`vol` and 12 hex digits): a reference of this shape is an id, never a name. */
export const VOLUME_ID_PATTERN = /^vol[0-9a-f]{12}$/;
export const VOLUME_NAME_RULE = "1 to 64 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit, without '..'";
const VOLUME_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/;

/**
 * Why a volume name (or a `volume` setting) is not acceptable, or undefined. Names never become paths (a volume's
 * directory is named by its id), but a name that looks like one (`..`, `/`) is refused so it cannot be mistaken
 * for one anywhere.
 */
export function volumeNameProblem(name: string): string | undefined {
  if (!VOLUME_NAME.test(name) || name.includes("..")) return `"${name}" is not a volume name (${VOLUME_NAME_RULE})`;
  return undefined;
}

/** The volume an endpoint's `volume` setting names: one of its owner's volumes, by id, else by name. */
export function resolveVolume(volumes: VolumeRecord[], userId: string, ref: string): VolumeRecord | undefined {
  const mine = volumes.filter((v) => v.userId === userId);
  return mine.find((v) => v.id === ref) ?? mine.find((v) => v.name === ref);
}
