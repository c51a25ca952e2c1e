// The worker protocol's route rows (/_worker/v1/..., worker tokens only, never rate limited, answered by the
// replica serving jobs) and the host's GPU list. Handlers: routes.ts, the artifact download (artifacts/route.ts),
// gpu-routes.ts.

import { serveArtifact, type ArtifactDeps } from "../artifacts/route.js";
import { WORKER_BODY_LIMIT } from "../http/body-limits.js";
import type { Route } from "../http/router.js";
import { workerRoutes, type WorkerDeps } from "./routes.js";
import { providerWorkerRoutes, type ProviderWorkerDeps } from "./provider-routes.js";
import { PROVIDER_ROUTES } from "../../wire/provider-worker.js";

export type { WorkerDeps } from "./routes.js";
export { GPU_ROUTES, type GpuDeps } from "./gpu-routes.js";

const WORKER = { auth: "worker", rateLimited: false, jobsReplica: true, purpose: "call the worker protocol" } as const;
/** The provider's worker protocol (provider-routes.ts): its SDK sends the worker's token bare. */
const PROVIDER = { ...WORKER, bareKey: true } as const;

export const WORKER_ROUTES: ReadonlyArray<Route<WorkerDeps & ProviderWorkerDeps & ArtifactDeps>> = [
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/register", body: WORKER_BODY_LIMIT, handler: workerRoutes.register },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/fail-start", body: WORKER_BODY_LIMIT, handler: workerRoutes.failStart },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/take", body: WORKER_BODY_LIMIT, handler: workerRoutes.take },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/stream", body: WORKER_BODY_LIMIT, handler: workerRoutes.stream },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/progress", body: WORKER_BODY_LIMIT, handler: workerRoutes.progress },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/done", body: WORKER_BODY_LIMIT, handler: workerRoutes.done },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/heartbeat", body: WORKER_BODY_LIMIT, handler: workerRoutes.heartbeat },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/events", body: WORKER_BODY_LIMIT, handler: workerRoutes.events },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/log", body: WORKER_BODY_LIMIT, handler: workerRoutes.log },
  { ...WORKER, methods: ["POST"], pattern: "/_worker/v1/release", body: WORKER_BODY_LIMIT, handler: workerRoutes.release },
  { ...PROVIDER, methods: ["GET"], pattern: PROVIDER_ROUTES.take, body: "none", handler: providerWorkerRoutes.take },
  { ...PROVIDER, methods: ["GET"], pattern: PROVIDER_ROUTES.takeBatch, body: "none", handler: providerWorkerRoutes.takeBatch },
  { ...PROVIDER, methods: ["GET"], pattern: PROVIDER_ROUTES.stop, body: "none", handler: providerWorkerRoutes.stop },
  { ...PROVIDER, methods: ["POST"], pattern: PROVIDER_ROUTES.done, body: WORKER_BODY_LIMIT, handler: providerWorkerRoutes.done },
  { ...PROVIDER, methods: ["POST"], pattern: PROVIDER_ROUTES.stream, body: WORKER_BODY_LIMIT, handler: providerWorkerRoutes.stream },
  { ...PROVIDER, methods: ["GET"], pattern: PROVIDER_ROUTES.ping, body: "none", handler: providerWorkerRoutes.ping },
  { ...WORKER, methods: ["GET", "HEAD"], pattern: "/_worker/v1/artifacts/:sha", body: "none", purpose: "download artifacts", handler: serveArtifact },
];
