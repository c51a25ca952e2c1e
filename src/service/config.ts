// The service's whole configuration, parsed once at start from flags and the environment: one table of
// settings, each with its flag or variable, its kind and default. Bad values are refused together, naming each
// setting, before anything starts; the modules of the service get typed values and read no environment.
// `svc server --print-config` shows the result and where each value came from (secrets redacted).

import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { UsageError, errorMessage } from "../errors.js";
import { DEFAULT_CLIENT_LIMITS, type ClientLimits } from "./http/slow-clients.js";
import { DEFAULT_LOG_LIMITS, type LogLimits } from "./engine/log-quota.js";
import { JOB_HISTORY_MS_DEFAULT } from "./engine/types.js";
import { MAX_ARTIFACT_BYTES } from "./deploy/upload.js";
import { parseRateLimits, type RateWindow } from "./keys/ratelimit.js";
import { DEFAULT_QUEUE_QUOTAS, parseUserQuotas, type QueueQuotas, type QueueUsage } from "./engine/quotas.js";
import { LOCAL_DATA_CENTER } from "./management/datacenters.js";
import type { ServiceOptions } from "./index.js";
import type { VolumeQuotaMode } from "./volumes/storage.js";
import { redactStoreUrl, storeUrlProblem } from "./store/url.js";
import { DEFAULT_CONTAINER_LIMITS } from "../drivers/isolation.js";
import { envPatternProblem } from "../drivers/host-env.js";
import type { SandboxSetting } from "../drivers/sandbox/index.js";
import { parseVolumeDriverOptions } from "../drivers/cluster-volumes.js";
import { parseWebhookAllow } from "./webhooks/address-policy.js";

export type WorkersKind = "process" | "docker" | "swarm" | "kubernetes" | "none";

/** What `svc server` and `svc dev` both take from the environment. */
export interface ServiceSettings {
  maxArtifactBytes: number;
  uploadIdleMs: number;
  /** Serve plain load-balanced requests on the LB front (lb/front.ts). */
  lbFront: boolean;
  releaseAttempts: number;
  releaseStartTimeoutMs: number;
  clientLimits: ClientLimits;
  /** Quotas and retention of worker logs (engine/log-quota.ts). */
  logLimits: LogLimits;
  /** How long a job's record stays as history after its result expired (0: not kept). */
  jobHistoryMs: number;
  /** This machine's GPU types (the local data center), when set. */
  gpuTypes?: string[];
  rateLimits?: RateWindow[];
  /** Queued jobs and input bytes per user and per endpoint (engine/quotas.ts), and per-user overrides. */
  queueQuotas: { userJobs: number; userBytes: number; endpointJobs: number; endpointBytes: number; users?: Record<string, Partial<QueueUsage>> };
  secretsKeys: { current?: string; previous?: string[]; file?: string };
  /** Process workers' sandbox: bubblewrap where it works (auto), required (bwrap), or none. */
  sandbox: SandboxSetting;
  /** Sandboxed process workers: size of each worker's /dev/shm in MiB. */
  sandboxShmMb: number;
  /** Whether a volume's size binds what workers write to it (loop: a filesystem of its own; volumes/storage.ts). */
  volumeQuotas: VolumeQuotaMode;
  /** Host variables process workers get beyond the default allow-list (drivers/host-env.ts). */
  workerEnvAllow?: string[];
  /** Ports of the host's loopback that sandboxed workers may reach besides the job API's (a local OTLP collector). */
  workerHostPorts?: number[];
  /** Where webhooks may go besides public addresses: CIDRs, addresses, host names (webhooks/address-policy.ts). */
  webhookAllow?: string[];
  /** The Hugging Face-compatible hub models are fetched from, its token, and the model cache's size in bytes (docs/models.md). */
  modelHub?: string;
  modelHubToken?: string;
  modelCacheSize?: number;
}

/** `svc server`'s configuration: the settings and where it listens, keeps its data and runs workers. */
export interface ServerConfig extends ServiceSettings {
  host: string;
  port: number;
  /** The S3 API's own port: null for none; unset, defaultS3Port of `port` (volumes/s3-origin.ts). */
  s3Port?: number | null;
  /** The address S3 clients use, when it differs from the S3 listener's. */
  s3PublicUrl?: string;
  dataDir: string;
  workers: WorkersKind;
  /** A PostgreSQL URL: the state goes there (stores.ts); else the data dir's SQLite file. */
  store?: string;
  /** Where the other replicas on the same database reach this one. */
  replicaUrl?: string;
  /** The address in front of all replicas, given to workers. */
  clusterUrl?: string;
  /** Workers may talk straight to the replica serving jobs once another replica named it. */
  workersDirect: boolean;
  handOffJobs: boolean;
  /** Prometheus' /metrics and the recent series behind the charts (SVC_METRICS=off turns them off). */
  metrics: boolean;
  /** Docker workers run the worker images pushed to this registry (host:port), by digest. */
  registry?: string;
  /** Pre-booted worker runtimes kept ready by the process driver (0: none). */
  workerPool: number;
  /** Kubernetes workers: their namespace (default: the service's own Pod's, else "default") and image. */
  k8sNamespace?: string;
  k8sImage?: string;
  /** Swarm workers: the network they join (default "host") and the image they run (default svc's worker image). */
  swarmNetwork?: string;
  swarmImage?: string;
  /** Docker workers: the engine's OCI runtime they run under ("runsc": gVisor); default the engine's default. */
  dockerRuntime?: string;
  /** Kubernetes workers: the RuntimeClass their Pods name (gVisor's, e.g. "gvisor"). */
  k8sRuntimeClass?: string;
  /** Kubernetes workers: network volumes as ReadWriteMany claims of this StorageClass (unset: such workers are refused). */
  k8sStorageClass?: string;
  /**
   * Swarm workers: network volumes as Docker volumes of this driver (default "local" when options are given) with
   * these options, `{volume}` and `{size}` expanded per volume (unset, both: such workers are refused).
   */
  swarmVolumeDriver?: string;
  swarmVolumeOptions?: Record<string, string>;
  /**
   * Swarm and Kubernetes workers: the directory on every node that holds that node's model cache (docs/models.md,
   * "Node caches"); unset: their workers get no model cache.
   */
  nodeModelCache?: string;
  /** The image the nodes fetch models with (default svc's server image, svc-server:<version>, or the registry's). */
  modelsFetchImage?: string;
  /** Container workers (Docker, Swarm): processes and threads per worker. */
  workerPidsLimit: number;
  /** Container workers (Docker, Swarm, Kubernetes): size of each worker's /tmp in MiB. */
  workerTmpMb: number;
  publicUrl?: string;
  /** The admin key given in the environment (else the data dir's generated one). */
  apiKey?: string;
  /** Serve several users with process workers that run without a sandbox: the operator says they are one tenant. */
  singleTenant: boolean;
  /** Traces: `otlp` sends them, `off` never does; unset, they are on when an OTLP endpoint is given (tracing/index.ts). */
  traces?: "otlp" | "off";
  /** The OTLP/HTTP collector's base address (traces go to its /v1/traces). */
  otlpEndpoint?: string;
  /** The OTLP/HTTP traces address itself. */
  otlpTracesEndpoint?: string;
  /** How operator messages are written: human lines, or one JSON object a line (logging.ts). */
  logFormat: "human" | "json";
}

export type Source = "flag" | "environment" | "default";

type Kind =
  | { type: "string" }
  | { type: "secret" }
  | { type: "storeUrl" }
  | { type: "port" }
  | { type: "portOrOff" }
  | { type: "positive" }
  | { type: "nonNegative" }
  | { type: "count" }
  | { type: "enum"; values: readonly string[] }
  | { type: "onOff" }
  | { type: "list" }
  | { type: "envNames" }
  | { type: "ports" }
  | { type: "webhookAllow" }
  | { type: "url" }
  | { type: "size" }
  | { type: "rateLimits" }
  | { type: "userQuotas" }
  | { type: "volumeDriverOptions" }
  | { type: "absolutePath" };

interface Setting {
  key: string;
  flag?: string;
  env?: string;
  kind: Kind;
  default?: unknown;
  /** The server only (not `svc dev`). */
  serverOnly?: boolean;
  description: string;
}

const positive: Kind = { type: "positive" };

/** Every setting of the service. */
export const SETTINGS: readonly Setting[] = [
  { key: "host", flag: "host", kind: { type: "string" }, default: "127.0.0.1", serverOnly: true, description: "address to listen on" },
  { key: "port", flag: "port", kind: { type: "port" }, default: 8600, serverOnly: true, description: "port to listen on (0: any free port)" },
  {
    key: "s3Port",
    flag: "s3Port",
    env: "SVC_S3_PORT",
    kind: { type: "portOrOff" },
    serverOnly: true,
    description: "the S3 API's own port, apart from the console (default: port + 1; any free one with port 0; off: only under /s3)",
  },
  {
    key: "s3PublicUrl",
    flag: "s3PublicUrl",
    env: "SVC_S3_PUBLIC_URL",
    kind: { type: "string" },
    serverOnly: true,
    description: "the address S3 clients use (default: the public URL's host at the S3 port)",
  },
  {
    key: "dataDir",
    flag: "dataDir",
    env: "SVC_DATA_DIR",
    kind: { type: "string" },
    serverOnly: true,
    description: "the SQLite file, artifacts and the admin key",
  },
  {
    key: "workers",
    flag: "workers",
    kind: { type: "enum", values: ["process", "docker", "swarm", "kubernetes", "none"] },
    default: "process",
    serverOnly: true,
    description: "where workers run",
  },
  {
    key: "store",
    flag: "store",
    env: "SVC_STORE_URL",
    kind: { type: "storeUrl" },
    serverOnly: true,
    description: "PostgreSQL URL keeping the state (else the data dir's SQLite file)",
  },
  {
    key: "replicaUrl",
    env: "SVC_REPLICA_URL",
    kind: { type: "string" },
    serverOnly: true,
    description: "where the other replicas on the same database reach this one (default: the listening address)",
  },
  {
    key: "clusterUrl",
    env: "SVC_CLUSTER_URL",
    kind: { type: "string" },
    serverOnly: true,
    description: "the address in front of all replicas, given to workers (default: this replica's)",
  },
  {
    key: "workersDirect",
    env: "SVC_WORKERS_DIRECT",
    kind: { type: "onOff" },
    default: true,
    serverOnly: true,
    description: "tell workers the replica that serves jobs, to reach it without a hop (off: when workers reach replicas only through the cluster address)",
  },
  {
    key: "handOffJobs",
    env: "SVC_HAND_OFF_JOBS",
    kind: { type: "onOff" },
    default: true,
    serverOnly: true,
    description: "replicas that do not serve jobs write /run jobs themselves for the one that does to adopt (off: they pass /run to it)",
  },
  {
    key: "metrics",
    env: "SVC_METRICS",
    kind: { type: "onOff" },
    default: true,
    serverOnly: true,
    description: "Prometheus' /metrics and the recent series behind endpoints' charts (off: neither is kept; usage records are)",
  },
  {
    key: "workerPool",
    env: "SVC_WORKER_POOL",
    kind: { type: "count" },
    default: 0,
    serverOnly: true,
    description: "pre-booted worker runtimes kept ready (process and Docker workers, per image kind; 0: none)",
  },
  {
    key: "k8sNamespace",
    env: "SVC_K8S_NAMESPACE",
    kind: { type: "string" },
    serverOnly: true,
    description: "namespace of Kubernetes workers (default: this Pod's, else default)",
  },
  {
    key: "k8sImage",
    env: "SVC_K8S_IMAGE",
    kind: { type: "string" },
    serverOnly: true,
    description: "image of Kubernetes workers (default: the registry's svc worker image, by digest)",
  },
  {
    key: "swarmNetwork",
    env: "SVC_SWARM_NETWORK",
    kind: { type: "string" },
    serverOnly: true,
    description: "network Swarm workers join (default: host; svc's own overlay network when svc runs as a stack)",
  },
  {
    key: "swarmImage",
    env: "SVC_SWARM_IMAGE",
    kind: { type: "string" },
    serverOnly: true,
    description: "image of Swarm workers (default: svc's worker image, built here or the registry's by digest)",
  },
  {
    key: "dockerRuntime",
    flag: "dockerRuntime",
    env: "SVC_DOCKER_RUNTIME",
    kind: { type: "string" },
    serverOnly: true,
    description: "OCI runtime Docker workers run under, registered with dockerd (runsc: gVisor; default the engine's default, runc)",
  },
  {
    key: "k8sStorageClass",
    env: "SVC_K8S_STORAGE_CLASS",
    kind: { type: "string" },
    serverOnly: true,
    description: "StorageClass of network volumes' ReadWriteMany claims (svc-vol-<id>, the volume's size); unset: Kubernetes workers with a volume are refused",
  },
  {
    key: "swarmVolumeDriver",
    env: "SVC_SWARM_VOLUME_DRIVER",
    kind: { type: "string" },
    serverOnly: true,
    description:
      "Docker volume driver each Swarm node mounts network volumes with (svc-vol-<id>; default local when options are given); unset: Swarm workers with a volume are refused",
  },
  {
    key: "swarmVolumeOptions",
    env: "SVC_SWARM_VOLUME_OPTIONS",
    kind: { type: "volumeDriverOptions" },
    serverOnly: true,
    description: "that driver's options, key=value,... ({volume}: the volume's id, {size}: its GB), e.g. type=nfs,o=addr=10.0.0.5,rw,device=:/exports/{volume}",
  },
  {
    key: "nodeModelCache",
    flag: "nodeModelCache",
    env: "SVC_NODE_MODEL_CACHE",
    kind: { type: "absolutePath" },
    serverOnly: true,
    description:
      "Swarm and Kubernetes workers: the directory on every node where it fetches endpoints' models, once per node, before their workers start (made when missing); unset: those workers get no model cache",
  },
  {
    key: "modelsFetchImage",
    env: "SVC_MODELS_FETCH_IMAGE",
    kind: { type: "string" },
    serverOnly: true,
    description: "the image nodes run `svc models fetch` in (default: svc's server image, svc-server:<version>, or the registry's by digest)",
  },
  {
    key: "k8sRuntimeClass",
    env: "SVC_K8S_RUNTIME_CLASS",
    kind: { type: "string" },
    serverOnly: true,
    description: "RuntimeClass of Kubernetes worker Pods (gVisor's, e.g. gvisor; default the cluster's default)",
  },
  {
    key: "workerPidsLimit",
    env: "SVC_WORKER_PIDS_LIMIT",
    kind: positive,
    default: DEFAULT_CONTAINER_LIMITS.pidsLimit,
    serverOnly: true,
    description: "processes and threads per Docker or Swarm worker container",
  },
  {
    key: "workerTmpMb",
    env: "SVC_WORKER_TMP_MB",
    kind: positive,
    default: DEFAULT_CONTAINER_LIMITS.tmpMb,
    serverOnly: true,
    description: "size of each container worker's /tmp in MiB (in memory: it counts against the worker's memory)",
  },
  {
    key: "registry",
    env: "SVC_WORKER_REGISTRY",
    kind: { type: "string" },
    serverOnly: true,
    description: "registry (host:port) Docker workers' images are pulled from, by digest",
  },
  { key: "publicUrl", flag: "publicUrl", env: "SVC_PUBLIC_URL", kind: { type: "string" }, serverOnly: true, description: "the address clients use" },
  { key: "apiKey", env: "SVC_API_KEY", kind: { type: "secret" }, serverOnly: true, description: "the admin API key (else <data dir>/admin-key)" },
  { key: "maxArtifactBytes", env: "SVC_MAX_ARTIFACT_BYTES", kind: positive, default: MAX_ARTIFACT_BYTES, description: "largest build artifact accepted" },
  { key: "uploadIdleMs", env: "SVC_UPLOAD_IDLE_MS", kind: positive, default: 60_000, description: "an upload sending nothing this long gets 408" },
  {
    key: "lbFront",
    env: "SVC_LB_FRONT",
    kind: { type: "onOff" },
    default: true,
    description: "serve plain load-balanced requests and job /runs on the LB front, not node:http",
  },
  { key: "releaseAttempts", env: "SVC_RELEASE_ATTEMPTS", kind: positive, default: 3, description: "new workers tried per endpoint before a release fails" },
  {
    key: "releaseStartTimeoutMs",
    env: "SVC_RELEASE_START_TIMEOUT_MS",
    kind: positive,
    default: 5 * 60_000,
    description: "how long a release's new worker may take to come up",
  },
  {
    key: "clientLimits.sendStallMs",
    env: "SVC_SEND_STALL_MS",
    kind: positive,
    default: DEFAULT_CLIENT_LIMITS.sendStallMs,
    description: "an answer nobody reads this long is dropped",
  },
  {
    key: "clientLimits.followersPerUser",
    env: "SVC_MAX_FOLLOWERS_PER_USER",
    kind: positive,
    default: DEFAULT_CLIENT_LIMITS.followersPerUser,
    description: "log followers per user",
  },
  {
    key: "clientLimits.followersTotal",
    env: "SVC_MAX_FOLLOWERS",
    kind: positive,
    default: DEFAULT_CLIENT_LIMITS.followersTotal,
    description: "log followers in total",
  },
  {
    key: "clientLimits.followerQueueBytes",
    env: "SVC_FOLLOWER_QUEUE_BYTES",
    kind: positive,
    default: DEFAULT_CLIENT_LIMITS.followerQueueBytes,
    description: "unread bytes a follower may queue",
  },
  {
    key: "clientLimits.pinnedOutputBytes",
    env: "SVC_MAX_PINNED_OUTPUT_BYTES",
    kind: positive,
    default: DEFAULT_CLIENT_LIMITS.pinnedOutputBytes,
    description: "bytes of large outputs held for answers",
  },
  {
    key: "logLimits.maxLineBytes",
    env: "SVC_LOG_LINE_MAX_BYTES",
    kind: positive,
    default: DEFAULT_LOG_LIMITS.maxLineBytes,
    description: "longest worker log line kept, in bytes (a longer one is cut and says so)",
  },
  {
    key: "logLimits.workerLinesPerS",
    env: "SVC_LOG_WORKER_LINES_PER_S",
    kind: positive,
    default: DEFAULT_LOG_LIMITS.workerLinesPerS,
    description: "log lines a second each worker may write (more are dropped, and a line says how many)",
  },
  {
    key: "logLimits.workerBytesPerS",
    env: "SVC_LOG_WORKER_BYTES_PER_S",
    kind: positive,
    default: DEFAULT_LOG_LIMITS.workerBytesPerS,
    description: "log bytes a second each worker may write (a line counts its text and 100 bytes)",
  },
  {
    key: "logLimits.endpointLinesPerS",
    env: "SVC_LOG_ENDPOINT_LINES_PER_S",
    kind: positive,
    default: DEFAULT_LOG_LIMITS.endpointLinesPerS,
    description: "log lines a second all workers of an endpoint may write together",
  },
  {
    key: "logLimits.endpointBytesPerS",
    env: "SVC_LOG_ENDPOINT_BYTES_PER_S",
    kind: positive,
    default: DEFAULT_LOG_LIMITS.endpointBytesPerS,
    description: "log bytes a second all workers of an endpoint may write together",
  },
  {
    key: "logLimits.burstS",
    env: "SVC_LOG_BURST_S",
    kind: positive,
    default: DEFAULT_LOG_LIMITS.burstS,
    description: "seconds of those rates a worker or endpoint may write at once (the burst)",
  },
  {
    key: "logLimits.retentionMs",
    env: "SVC_LOG_RETENTION_MS",
    kind: positive,
    default: DEFAULT_LOG_LIMITS.retentionMs,
    description: "log lines written more than this many ms ago are deleted (default 7 days)",
  },
  {
    key: "jobHistoryMs",
    env: "SVC_JOB_HISTORY_MS",
    kind: { type: "nonNegative" },
    default: JOB_HISTORY_MS_DEFAULT,
    description:
      "a job's record (status, times, attempts, error, worker) is kept this many ms after its result expired: the job history (default 7 days; 0: not kept)",
  },
  {
    key: "logLimits.endpointMaxBytes",
    env: "SVC_LOG_ENDPOINT_MAX_BYTES",
    kind: positive,
    default: DEFAULT_LOG_LIMITS.endpointMaxBytes,
    description: "an endpoint's log lines beyond its newest this many bytes are deleted, first written first",
  },
  { key: "gpuTypes", env: "SVC_GPU_TYPES", kind: { type: "list" }, description: "this machine's GPU types, comma separated" },
  { key: "rateLimits", env: "SVC_RATE_LIMITS", kind: { type: "rateLimits" }, description: "per-user rate-limit windows (minute=600,hour=20000/3600s, ...)" },
  {
    key: "queueQuotas.userJobs",
    env: "SVC_QUEUE_QUOTA_USER_JOBS",
    kind: positive,
    default: DEFAULT_QUEUE_QUOTAS.user.jobs,
    description: "jobs one user may have queued (over all endpoints); more get 429",
  },
  {
    key: "queueQuotas.userBytes",
    env: "SVC_QUEUE_QUOTA_USER_BYTES",
    kind: positive,
    default: DEFAULT_QUEUE_QUOTAS.user.bytes,
    description: "bytes of input one user may have queued; more get 429",
  },
  {
    key: "queueQuotas.endpointJobs",
    env: "SVC_QUEUE_QUOTA_ENDPOINT_JOBS",
    kind: positive,
    default: DEFAULT_QUEUE_QUOTAS.endpoint.jobs,
    description: "jobs one endpoint may have queued; more get 429",
  },
  {
    key: "queueQuotas.endpointBytes",
    env: "SVC_QUEUE_QUOTA_ENDPOINT_BYTES",
    kind: positive,
    default: DEFAULT_QUEUE_QUOTAS.endpoint.bytes,
    description: "bytes of input one endpoint may have queued; more get 429",
  },
  {
    key: "queueQuotas.users",
    env: "SVC_QUEUE_QUOTA_USERS",
    kind: { type: "userQuotas" },
    description: "per-user queue quotas instead of the above (alice=jobs:50000/bytes:4294967296;bob=jobs:100)",
  },
  { key: "secretsKeys.current", env: "SVC_SECRETS_KEY", kind: { type: "secret" }, description: "the key sealing secrets (else <data dir>/secrets-key)" },
  {
    key: "secretsKeys.file",
    env: "SVC_SECRETS_KEY_FILE",
    kind: { type: "string" },
    description: "file with the key sealing secrets, kept outside the data directory so that its backups never carry the key (made on the first start)",
  },
  { key: "secretsKeys.previous", env: "SVC_SECRETS_KEY_PREVIOUS", kind: { type: "list" }, description: "keys secrets may still be sealed with (rotation)" },
  {
    key: "sandbox",
    flag: "sandbox",
    env: "SVC_SANDBOX",
    kind: { type: "enum", values: ["auto", "bwrap", "none"] },
    default: "auto",
    description: "process workers' sandbox: auto (bubblewrap where it works), bwrap (required), none",
  },
  {
    key: "sandboxShmMb",
    env: "SVC_SANDBOX_SHM_MB",
    kind: positive,
    default: 64,
    serverOnly: true,
    description: "size of each sandboxed process worker's /dev/shm in MiB (in memory, at most the worker's memory; its root and /dev are read-only)",
  },
  {
    key: "volumeQuotas",
    flag: "volumeQuotas",
    env: "SVC_VOLUME_QUOTAS",
    kind: { type: "enum", values: ["off", "loop"] },
    default: "off",
    serverOnly: true,
    description:
      "whether workers can write past a network volume's size: off (its size binds S3 writes only), loop (each volume a filesystem of its size through a loop device; needs root)",
  },
  {
    key: "workerEnvAllow",
    env: "SVC_WORKER_ENV_ALLOW",
    kind: { type: "envNames" },
    description: "host variables process workers get beyond PATH, locale, TZ, proxies and TLS roots (names, or prefixes ending in *)",
  },
  {
    key: "workerHostPorts",
    env: "SVC_WORKER_HOST_PORTS",
    kind: { type: "ports" },
    serverOnly: true,
    description:
      "ports of the host's 127.0.0.1 that sandboxed process workers may reach besides the job API's (e.g. 4318 for a local OTLP collector); the rest of the host's loopback is out of their reach",
  },
  {
    key: "webhookAllow",
    flag: "webhookAllow",
    env: "SVC_WEBHOOK_ALLOW",
    kind: { type: "webhookAllow" },
    description:
      "where webhooks may go besides public addresses: CIDRs, addresses, host names, *.domain (e.g. 10.0.0.0/8,hooks.internal); loopback, private, link-local and the service itself are refused otherwise",
  },
  {
    key: "modelHub",
    flag: "modelHub",
    env: "SVC_MODEL_HUB",
    kind: { type: "url" },
    description:
      "the Hugging Face-compatible hub endpoints' models are fetched from, once per host (a mirror, an air-gapped copy; default https://huggingface.co)",
  },
  { key: "modelHubToken", env: "SVC_MODEL_HUB_TOKEN", kind: { type: "secret" }, description: "the token sent to the model hub (private and gated models)" },
  {
    key: "modelCacheSize",
    flag: "modelCacheSize",
    env: "SVC_MODEL_CACHE_SIZE",
    kind: { type: "size" },
    description: "the size past which the host's model cache evicts least recently used models no worker uses (e.g. 200G, 1T; default: no limit)",
  },
  {
    key: "singleTenant",
    flag: "singleTenant",
    env: "SVC_SINGLE_TENANT",
    kind: { type: "onOff" },
    default: false,
    serverOnly: true,
    description: "serve several users with unsandboxed process workers (they are one tenant)",
  },
  {
    key: "traces",
    env: "SVC_TRACES",
    kind: { type: "enum", values: ["otlp", "off"] },
    serverOnly: true,
    description: "traces over OTLP/HTTP: otlp (to the endpoint below, else localhost:4318) or off (default: on when an OTLP endpoint is set)",
  },
  {
    key: "otlpEndpoint",
    flag: "otlpEndpoint",
    env: "OTEL_EXPORTER_OTLP_ENDPOINT",
    kind: { type: "string" },
    serverOnly: true,
    description: "OpenTelemetry collector (OTLP/HTTP) base address: traces go to its /v1/traces",
  },
  {
    key: "otlpTracesEndpoint",
    env: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    kind: { type: "string" },
    serverOnly: true,
    description: "OTLP/HTTP traces address, used as it is",
  },
  {
    key: "logFormat",
    flag: "logFormat",
    env: "SVC_LOG_FORMAT",
    kind: { type: "enum", values: ["human", "json"] },
    default: "human",
    serverOnly: true,
    description: "operator messages on stderr: human lines or json (one object a line)",
  },
];

function parseValue(setting: Setting, raw: string, origin: string): { value?: unknown; problem?: string } {
  const kind = setting.kind;
  switch (kind.type) {
    case "string":
    case "secret":
      return raw === "" ? { problem: `${origin} is empty` } : { value: raw };
    case "absolutePath":
      return raw.startsWith("/") && !raw.split("/").includes("..")
        ? { value: raw.length > 1 ? raw.replace(/\/+$/, "") : raw }
        : { problem: `${origin} must be an absolute path on the nodes (e.g. /var/lib/svc-models), not "${raw}"` };
    case "storeUrl": {
      const problem = storeUrlProblem(raw);
      return problem ? { problem: `${origin} ${problem}` } : { value: raw };
    }
    case "port": {
      const n = Number(raw);
      return Number.isInteger(n) && n >= 0 && n <= 65535 ? { value: n } : { problem: `${origin} must be 0..65535, not "${raw}"` };
    }
    case "portOrOff": {
      if (raw === "off") return { value: null };
      const n = Number(raw);
      return Number.isInteger(n) && n >= 0 && n <= 65535 ? { value: n } : { problem: `${origin} must be 0..65535 or "off", not "${raw}"` };
    }
    case "positive": {
      const n = Number(raw);
      return Number.isInteger(n) && n > 0 ? { value: n } : { problem: `${origin} must be a positive whole number, not "${raw}"` };
    }
    case "nonNegative": {
      const n = Number(raw);
      return Number.isInteger(n) && n >= 0 ? { value: n } : { problem: `${origin} must be a whole number (0 or more), not "${raw}"` };
    }
    case "url": {
      let u: URL;
      try {
        u = new URL(raw);
      } catch {
        return { problem: `${origin} must be an http or https address, not "${raw}"` };
      }
      return u.protocol === "http:" || u.protocol === "https:"
        ? { value: raw.replace(/\/+$/, "") }
        : { problem: `${origin} must be an http or https address, not "${raw}"` };
    }
    case "size": {
      const m = /^(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?$/.exec(raw.trim());
      const scale = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[(m?.[2] ?? "").toLowerCase() as "" | "k" | "m" | "g" | "t"];
      const n = m ? Math.floor(Number(m[1]) * scale) : Number.NaN;
      return n > 0 ? { value: n } : { problem: `${origin} must be a size such as 500M, 200G or 1T (bytes when no unit), not "${raw}"` };
    }
    case "count": {
      const n = Number(raw);
      return Number.isInteger(n) && n >= 0 && n <= 64 ? { value: n } : { problem: `${origin} must be a whole number from 0 to 64, not "${raw}"` };
    }
    case "enum":
      return kind.values.includes(raw) ? { value: raw } : { problem: `${origin} must be ${kind.values.map((v) => `"${v}"`).join(", ")}, not "${raw}"` };
    case "onOff":
      if (["on", "1", "true"].includes(raw)) return { value: true };
      if (["off", "0", "false"].includes(raw)) return { value: false };
      return { problem: `${origin} must be "on" or "off", not "${raw}"` };
    case "list": {
      const items = raw
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      return items.length > 0 ? { value: items } : { problem: `${origin} lists nothing` };
    }
    case "ports": {
      const items = raw
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      const bad = items.filter((p) => !/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535);
      if (bad.length > 0) return { problem: `${origin}: not a port (1-65535): ${bad.join(", ")}` };
      return items.length > 0 ? { value: items.map(Number) } : { problem: `${origin} lists nothing` };
    }
    case "envNames": {
      const items = raw
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      const problems = items.map(envPatternProblem).filter((p): p is string => p !== undefined);
      if (problems.length > 0) return { problem: `${origin}: ${problems.join("; ")}` };
      return items.length > 0 ? { value: items } : { problem: `${origin} lists nothing` };
    }
    case "webhookAllow": {
      const items = raw
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      const { problems } = parseWebhookAllow(items);
      if (problems.length > 0) return { problem: `${origin}: ${problems.join("; ")}` };
      return items.length > 0 ? { value: items } : { problem: `${origin} lists nothing` };
    }
    case "volumeDriverOptions": {
      const { options, problem } = parseVolumeDriverOptions(raw);
      return problem ? { problem: `${origin} ${problem}` } : { value: options };
    }
    case "userQuotas":
      try {
        return { value: parseUserQuotas(raw) };
      } catch (err) {
        return { problem: `${origin}: ${errorMessage(err)}` };
      }
    case "rateLimits":
      try {
        return { value: parseRateLimits(raw) };
      } catch (err) {
        return { problem: `${origin}: ${errorMessage(err)}` };
      }
  }
}

function assign(target: Record<string, unknown>, key: string, value: unknown): void {
  const [head, tail] = key.split(".") as [string, string | undefined];
  if (tail === undefined) {
    target[head] = value;
    return;
  }
  target[head] = { ...(target[head] as Record<string, unknown> | undefined), [tail]: value };
}

export interface ParsedConfig<T> {
  config: T;
  /** Where each setting's value came from, by key. */
  sources: Record<string, Source>;
}

function parseSettings(
  settings: readonly Setting[],
  flags: Record<string, string | undefined>,
  env: Readonly<Record<string, string | undefined>>,
): { values: Record<string, unknown>; sources: Record<string, Source> } {
  const values: Record<string, unknown> = { clientLimits: { ...DEFAULT_CLIENT_LIMITS }, secretsKeys: {} };
  const sources: Record<string, Source> = {};
  const problems: string[] = [];
  for (const setting of settings) {
    const fromFlag = setting.flag === undefined ? undefined : flags[setting.flag];
    const fromEnv = setting.env === undefined ? undefined : env[setting.env];
    const raw = fromFlag ?? fromEnv;
    if (raw === undefined) {
      if (setting.default !== undefined) assign(values, setting.key, setting.default);
      sources[setting.key] = "default";
      continue;
    }
    const origin = fromFlag !== undefined ? `--${setting.flag!.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}` : setting.env!;
    const parsed = parseValue(setting, raw, origin);
    if (parsed.problem) problems.push(parsed.problem);
    else assign(values, setting.key, parsed.value);
    sources[setting.key] = fromFlag !== undefined ? "flag" : "environment";
  }
  if (problems.length > 0)
    throw new UsageError(
      `The service's configuration is not valid:\n  - ${problems.join("\n  - ")}`,
      "Fix these flags or environment variables (`svc server --print-config` shows every setting).",
    );
  return { values, sources };
}

/** `svc server`: flags (commander's camelCase names) over the environment over defaults. */
export function parseServerConfig(flags: Record<string, string | undefined>, env: Readonly<Record<string, string | undefined>>): ParsedConfig<ServerConfig> {
  const { values, sources } = parseSettings(SETTINGS, flags, env);
  values.dataDir = resolve((values.dataDir as string | undefined) ?? join(homedir(), ".svc", "data"));
  return { config: values as unknown as ServerConfig, sources };
}

/** `svc dev` (and any embedder): the settings the environment may change, without the server's own. */
export function parseServiceSettings(env: Readonly<Record<string, string | undefined>>): ServiceSettings {
  return parseSettings(
    SETTINGS.filter((s) => !s.serverOnly),
    {},
    env,
  ).values as unknown as ServiceSettings;
}

/** The configuration as `--print-config` shows it: each setting's value (secrets redacted) and source. Pure. */
export function printableConfig(
  parsed: ParsedConfig<ServerConfig>,
): Array<{ setting: string; value: unknown; source: Source; from: string; description: string }> {
  return SETTINGS.map((s) => {
    const [head, tail] = s.key.split(".") as [string, string | undefined];
    const holder = parsed.config as unknown as Record<string, unknown>;
    const value = tail === undefined ? holder[head] : (holder[head] as Record<string, unknown> | undefined)?.[tail];
    const secret = s.kind.type === "secret" || s.key === "secretsKeys.previous";
    return {
      setting: s.key,
      value: value === undefined ? null : secret ? "(set, not shown)" : s.kind.type === "storeUrl" ? redactStoreUrl(value as string) : value,
      source: parsed.sources[s.key] ?? "default",
      from: s.flag ? `--${s.flag.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}${s.env ? ` or ${s.env}` : ""}` : s.env!,
      description: s.description,
    };
  });
}

/** What the settings change in `startService`'s options. Pure. */
export function serviceOptionsOf(settings: ServiceSettings): Partial<ServiceOptions> {
  return {
    maxArtifactBytes: settings.maxArtifactBytes,
    uploadIdleMs: settings.uploadIdleMs,
    lbFront: settings.lbFront,
    releaseAttempts: settings.releaseAttempts,
    releaseStartTimeoutMs: settings.releaseStartTimeoutMs,
    clientLimits: settings.clientLimits,
    logLimits: settings.logLimits,
    jobHistoryMs: settings.jobHistoryMs,
    secretsKeys: settings.secretsKeys,
    ...(settings.rateLimits ? { rateLimits: settings.rateLimits } : {}),
    ...(settings.webhookAllow ? { webhooks: { allow: settings.webhookAllow } } : {}),
    models: { hub: settings.modelHub, token: settings.modelHubToken, cacheSizeBytes: settings.modelCacheSize },
    queueQuotas: queueQuotasOf(settings.queueQuotas),
    volumeQuotas: settings.volumeQuotas,
    ...(settings.gpuTypes ? { dataCenters: [{ ...LOCAL_DATA_CENTER, gpuTypes: settings.gpuTypes }] } : {}),
  };
}

/** The queue quotas as the engine takes them. Pure. */
export function queueQuotasOf(q: ServiceSettings["queueQuotas"]): QueueQuotas {
  return { user: { jobs: q.userJobs, bytes: q.userBytes }, endpoint: { jobs: q.endpointJobs, bytes: q.endpointBytes }, ...(q.users ? { users: q.users } : {}) };
}

/** The variables the settings read, each looked up with `get` (the process's environment, a .env file...). */
export function settingsEnvironment(get: (name: string) => string | undefined): Record<string, string | undefined> {
  const names = SETTINGS.map((s) => s.env).filter((n): n is string => n !== undefined);
  return Object.fromEntries(names.map((n) => [n, get(n)]));
}
