// What every route handler is given: the service's parts (ApiContext) and one request as the route table's
// dispatcher (api.ts) prepared it (RouteCall).

import type { IncomingMessage, ServerResponse } from "node:http";
import type { KeyRing, Principal } from "./auth.js";
import type { JobEngine } from "./engine.js";
import type { RequestTarget } from "./http.js";
import type { ClientGuards } from "./slow-clients.js";
import type { Scaler } from "./scaler.js";
import type { Store } from "./store/types.js";
import type { Management } from "./management/index.js";
import type { LbRouter } from "./lb/index.js";
import type { Secrets } from "./secrets/index.js";
import type { VolumesApi } from "./volumes/index.js";
import type { InspectLimits } from "../artifact/inspect.js";
import type { ReleaseManager } from "./releases/manager.js";
import type { ArtifactStore } from "./artifacts.js";
import type { EndpointRegistry } from "./endpoint-registry.js";
import type { StartFailures } from "./releases/start-failures.js";
import type { HostGpus } from "../gpus/host.js";

export interface ApiContext {
  engine: JobEngine;
  keyring: KeyRing;
  /** The endpoints served: read here, changed through upsert/remove (endpoint-registry.ts). */
  endpoints: EndpointRegistry;
  url: string;
  scaler(): Scaler | undefined;
  followers: Set<ServerResponse>;
  /** What a slow client may cost: send stall timeout, follower caps, shared large outputs (slow-clients.ts). */
  clients: ClientGuards;
  log(message: string): void;
  leaseMs: number;
  heartbeatMs: number;
  /** Apps, environments and builds (deploy/routes.ts). */
  store: Store;
  dataDir: string;
  /** Build artifacts as every replica reaches them (artifacts.ts). */
  artifacts: ArtifactStore;
  /** Set on a replica that does not serve jobs: the address of the one that does, where job traffic goes (docs/scale-out.md). */
  jobsServedBy?(): string | undefined;
  /** Workers whose calls this replica passes on are told the jobs replica's address, to reach it straight. */
  workersDirect?: boolean;
  /** This replica's name, when it writes `/run` jobs itself while another serves jobs (engine/handoff.ts). */
  handOffAs?: string;
  /** Whether the replica serving jobs adopts what followers hand off (an older svc does not: `/run` goes to it). */
  jobsReplicaAdopts?(): boolean;
  maxArtifactBytes: number;
  /** How an uploaded archive may expand (tests make these small; defaults: a worker's extraction limits). */
  uploadInspectLimits?: Partial<InspectLimits>;
  uploadIdleMs?: number;
  /** The management API (volumes, REST endpoints, templates, keys), rate limits and the OpenAPI document. */
  management?: Management;
  /** Load-balanced endpoints: the proxy and its worker pool. */
  lb?: LbRouter;
  /** Users' secrets, given to their endpoints' workers. */
  secrets?: Secrets;
  /** Volume access keys and usage, for the management API (the S3 API itself: volumes/s3.ts). */
  volumes?: VolumesApi;
  /** Releases of builds: probe workers first, then the switch (releases/manager.ts). */
  releases: ReleaseManager;
  /** Workers that failed to start, per endpoint (/health's `workers.unhealthy`, an endpoint's last start error). */
  startFailures: StartFailures;
  /** This host's GPUs and who holds them, where the service's workers run here (process, Docker drivers). */
  gpus?(): HostGpus | undefined;
}

/** One authenticated request, matched to its route row. */
export interface RouteCall {
  ctx: ApiContext;
  req: IncomingMessage;
  res: ServerResponse;
  url: RequestTarget;
  /** The pattern's parameters, percent-decoded (`:endpoint`, `*rest`...). */
  params: Record<string, string>;
  principal: Principal;
  /** The body parsed as JSON (undefined when empty), read within the row's limit: 413, 415 and 400 otherwise. */
  json(): Promise<unknown>;
  /**
   * Set when the dispatcher chose to answer this `/run` here, on a replica that does not serve jobs, by handing its
   * job off under this replica's name (api.ts handedOffHere).
   */
  handOffAs?: string;
}

export type RouteHandler = (call: RouteCall) => Promise<void> | void;
