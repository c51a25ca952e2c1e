// The service's whole configuration, parsed once at start from flags and the environment: one table of
// settings, each with its flag or variable, its kind and default. Bad values are refused together, naming each
// setting, before anything starts; the modules of the service get typed values and read no environment.
// `svc server --print-config` shows the result and where each value came from (secrets redacted).
//
// The table's rows are config-server-settings.ts's (the server alone) and config-service-settings.ts's (the
// service, `svc dev` included); the kinds of value and their parsing are config-kinds.ts's. This module assembles
// them, and holds the configuration's types, the parser over flags and environment, and the printer.

import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { UsageError } from "../errors.js";
import { DEFAULT_CLIENT_LIMITS, type ClientLimits } from "./http/slow-clients.js";
import type { LogLimits } from "./engine/log-quota.js";
import type { RateWindow } from "./keys/ratelimit.js";
import type { QueueQuotas, QueueUsage } from "./engine/quotas.js";
import { LOCAL_DATA_CENTER } from "./management/datacenters.js";
import type { ServiceOptions } from "./index.js";
import type { VolumeQuotaMode } from "./volumes/storage.js";
import { redactStoreUrl } from "./store/url.js";
import type { SandboxSetting } from "../drivers/sandbox/index.js";
import { type Setting, parseValue } from "./config-kinds.js";
import { SERVER_SETTINGS } from "./config-server-settings.js";
import { SERVICE_SETTINGS } from "./config-service-settings.js";

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

/** Every setting of the service. */
export const SETTINGS: readonly Setting[] = [...SERVER_SETTINGS, ...SERVICE_SETTINGS];

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
