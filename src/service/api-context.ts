// The service's parts as the dispatcher (api.ts) holds them: every feature's dependencies together. Features
// never import this: each declares its own narrow interface (JobDeps, WorkerDeps, ...) and its rows are typed
// over it; `extends` below checks here, once, that the service provides what each feature asks for.

import type { ServerResponse } from "node:http";
import type { RouteCall as Call, RouteHandler as Handler } from "./http/router.js";
import type { JobDeps } from "./jobs/index.js";
import type { GpuDeps, WorkerDeps } from "./workers/index.js";
import type { ModelsDeps } from "./models/routes.js";
import type { ArtifactDeps } from "./artifacts/route.js";
import type { ManagementApiDeps } from "./management/index.js";
import type { KeyRing } from "./keys/auth.js";
import type { JobEngine } from "./engine/index.js";
import type { ClientGuards } from "./http/slow-clients.js";
import type { Scaler } from "./workers/scaler.js";
import type { Store } from "./store/types.js";
import type { Management } from "./management/index.js";
import type { LbRouter } from "./lb/index.js";
import type { Secrets } from "./secrets/index.js";
import type { Webhooks } from "./webhooks/index.js";
import type { VolumesApi } from "./volumes/index.js";
import type { InspectLimits } from "../artifact/inspect.js";
import type { ReleaseManager } from "./releases/manager.js";
import type { ArtifactStore } from "./artifacts/store.js";
import type { EndpointRegistry } from "./endpoints/registry.js";
import type { StartFailures } from "./releases/start-failures.js";
import type { HostGpus } from "../gpus/host.js";
import type { Deployments } from "./deploy/deployments.js";
import type { DeployRouteDeps } from "./deploy/routes.js";
import type { StateDeps } from "./state-routes.js";
import type { WebhookRouteDeps } from "./webhooks/routes.js";
import type { IdempotentSubmits } from "./idempotency/index.js";
import type { Tracing } from "./tracing/index.js";
import type { MetricsDeps } from "./metrics/routes.js";
import type { ServiceMetrics } from "./metrics/index.js";

export interface ApiContext
  extends JobDeps,
    WorkerDeps,
    GpuDeps,
    ArtifactDeps,
    ManagementApiDeps,
    DeployRouteDeps,
    StateDeps,
    WebhookRouteDeps,
    MetricsDeps,
    ModelsDeps {
  engine: JobEngine;
  keyring: KeyRing;
  /** The endpoints served: read here, changed through upsert/remove (endpoints/registry.ts). */
  endpoints: EndpointRegistry;
  url: string;
  scaler(): Scaler | undefined;
  followers: Set<ServerResponse>;
  /** What a slow client may cost: send stall timeout, follower caps, shared large outputs (http/slow-clients.ts). */
  clients: ClientGuards;
  log(message: string): void;
  leaseMs: number;
  heartbeatMs: number;
  /** Apps, environments and builds (deploy/routes.ts). */
  store: Store;
  dataDir: string;
  /** Build artifacts as every replica reaches them (artifacts/store.ts). */
  artifacts: ArtifactStore;
  /**
   * Set on a replica that does not serve jobs: the address of the one that does, where job traffic goes
   * (docs/scale-out.md); null when the database could not say which (job traffic is then refused with a 503).
   */
  jobsServedBy?(): string | null | undefined;
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
  /** Jobs' webhooks: endpoints' filters and signing secrets, delivery logs (webhooks/index.ts). */
  webhooks?: Webhooks;
  /** Volume access keys and usage, for the management API (the S3 API itself: volumes/s3.ts). */
  volumes?: VolumesApi;
  /** Releases of builds: probe workers first, then the switch (releases/manager.ts). */
  releases: ReleaseManager;
  /** Uploads, plans, activations, removals and configuration of apps' environments (deploy/deployments.ts). */
  deployments: Deployments;
  /** Workers that failed to start, per endpoint (/health's `workers.unhealthy`, an endpoint's last start error). */
  startFailures: StartFailures;
  /** This host's GPUs and who holds them, where the service's workers run here (process, Docker drivers). */
  gpus?(): HostGpus | undefined;
  /** Which job each Idempotency-Key made (idempotency/index.ts). */
  idempotency: IdempotentSubmits;
  /** Spans of requests and jobs, when traces are configured (tracing/index.ts). */
  tracing?: Tracing;
  /** Prometheus metrics, the recent series behind the charts, usage records (metrics/index.ts). */
  metrics?: ServiceMetrics;
}

/** A request to a row that needs the whole service (deploy, state; their features do not declare narrower). */
export type RouteCall = Call<ApiContext>;

export type RouteHandler = Handler<ApiContext>;
