// The protocol variables every worker gets (docs/worker-protocol.md), shared by the drivers: they differ only in
// where the service, the artifact and the volume are as the worker sees them.

import { OUTPUT_CAPTURED_ENV } from "../runtime/output-marks.js";
import { providerWorkerEnv } from "./provider-env.js";
import type { WorkerBucket, WorkerLaunch } from "./types.js";

export interface WorkerPlacement {
  apiUrl: string;
  artifact: string;
  artifactDir?: string;
  volumePath?: string;
  /** The model cache as the worker sees it (read-only), when the launch has one. */
  modelCache?: string;
  parentPid?: number;
  /** Where a load-balanced worker listens (SVC_HTTP_HOST/PORT); unset: the runtime's default, loopback on any port. */
  http?: { host: string; port: number };
  /** A Unix socket path where a load-balanced worker also listens, for the service's proxy (SVC_LB_SOCKET). */
  lbSocket?: string;
  /**
   * No parent pid to watch (a sandboxed worker cannot see its parent): the worker counts itself orphaned once the
   * service has been unreachable for SVC_ORPHAN_EXIT_MS (SVC_ORPHAN_CHECK=unreachable).
   */
  orphanWhenUnreachable?: boolean;
}

/**
 * Set the protocol variables on `env` (which already holds the endpoint's own variables): they always win, and a
 * protocol variable with no value is removed, so user env cannot fake one.
 */
export function applyProtocolEnv(env: Record<string, string | undefined>, launch: WorkerLaunch, placement: WorkerPlacement): void {
  const protocol: Record<string, string | undefined> =
    launch.protocol === "provider"
      ? providerProtocolEnv(launch, placement)
      : {
          SVC_API_URL: placement.apiUrl,
          SVC_WORKER_ID: launch.workerId,
          // What it runs, told back at registration: a replica taking over the cluster adopts it as of that revision.
          SVC_WORKER_REVISION: launch.revision,
          SVC_WORKER_TOKEN: launch.workerToken,
          SVC_ENDPOINT_ID: launch.endpointId,
          SVC_ENDPOINT_NAME: launch.endpointName,
          SVC_APP: launch.app,
          SVC_ENV: launch.env,
          SVC_API_KEY: launch.apiKey,
          SVC_ARTIFACT: placement.artifact,
          SVC_ARTIFACT_DIR: placement.artifactDir,
          SVC_MAX_CONCURRENCY: String(launch.maxConcurrency),
          SVC_VOLUME_PATH: placement.volumePath,
          SVC_PARENT_PID: placement.parentPid === undefined ? undefined : String(placement.parentPid),
          SVC_LB_SOCKET: placement.lbSocket,
          SVC_ORPHAN_CHECK: placement.orphanWhenUnreachable ? "unreachable" : undefined,
          // Both drivers read the worker's stdout/stderr, so the runtime marks job lines instead of shipping them.
          [OUTPUT_CAPTURED_ENV]: "1",
        };
  for (const [key, value] of Object.entries(protocol)) {
    if (value !== undefined && value !== "") env[key] = value;
    else delete env[key];
  }
  applyBucketEnv(env, launch.bucket);
  // The provider's SDK reads none of svc's variables: a provider worker is told none (nor any a user set).
  if (launch.protocol === "provider") for (const key of Object.keys(env)) if (key.startsWith("SVC_")) delete env[key];
  // The GPUs it holds and no others (CUDA's and the NVIDIA container runtime's names for them); a CPU worker
  // none ("void": the container runtime adds no GPU). User env cannot widen it.
  if (launch.gpus !== undefined) {
    env.CUDA_VISIBLE_DEVICES = launch.gpus.join(",");
    env.NVIDIA_VISIBLE_DEVICES = launch.gpus.length > 0 ? launch.gpus.join(",") : "void";
  }
  // The models it names, where huggingface_hub (transformers, diffusers...) looks, found offline. User env
  // cannot point them elsewhere.
  if (placement.modelCache) Object.assign(env, modelCacheEnv(placement.modelCache));
  // The service's collector for the runtime's own spans (and the user's OpenTelemetry, which reads the same
  // variables), unless the endpoint names a collector of its own.
  if (launch.traces && launch.protocol !== "provider" && !env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = launch.traces.tracesUrl;
    if (launch.traces.headers && !env.OTEL_EXPORTER_OTLP_HEADERS) env.OTEL_EXPORTER_OTLP_HEADERS = launch.traces.headers;
  }
  // Only when the driver needs a reachable address: the process driver keeps the runtime's loopback default.
  if (placement.http) {
    env.SVC_HTTP_HOST = placement.http.host;
    env.SVC_HTTP_PORT = String(placement.http.port);
  }
}

/**
 * Point the provider SDK's upload helper (it reads BUCKET_ENDPOINT_URL, BUCKET_ACCESS_KEY_ID and
 * BUCKET_SECRET_ACCESS_KEY) at the endpoint's volume, for svc's workers and provider workers alike. An endpoint whose
 * own variables already name a bucket endpoint keeps all three of its own: a user's bucket elsewhere is theirs to
 * choose, and half of one set mixed with half of another would sign with the wrong key.
 */
export function applyBucketEnv(env: Record<string, string | undefined>, bucket: WorkerBucket | undefined): void {
  if (!bucket || env.BUCKET_ENDPOINT_URL) return;
  env.BUCKET_ENDPOINT_URL = bucket.endpointUrl;
  env.BUCKET_ACCESS_KEY_ID = bucket.accessKeyId;
  env.BUCKET_SECRET_ACCESS_KEY = bucket.secretAccessKey;
}

/**
 * The variables that make huggingface_hub read the model cache mounted at `path` and never ask a hub: HF_HOME
 * (its root), HF_HUB_CACHE (its hub/ folder, laid out as the library's own) and HF_HUB_OFFLINE. Pure.
 */
export function modelCacheEnv(path: string): Record<string, string> {
  return { HF_HOME: path, HF_HUB_CACHE: `${path.replace(/\/+$/, "")}/hub`, HF_HUB_OFFLINE: "1" };
}

/** What a worker speaking the provider's protocol gets in place of svc's variables (provider-env.ts). */
function providerProtocolEnv(launch: WorkerLaunch, placement: WorkerPlacement): Record<string, string | undefined> {
  return providerWorkerEnv({
    apiUrl: placement.apiUrl,
    workerId: launch.workerId,
    endpointId: launch.endpointId,
    workerToken: launch.workerToken,
    pingIntervalMs: launch.heartbeatMs ?? DEFAULT_PROVIDER_PING_MS,
  });
}

/** The provider SDK's own default ping period. */
const DEFAULT_PROVIDER_PING_MS = 10_000;
