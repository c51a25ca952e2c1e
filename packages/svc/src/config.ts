// Endpoint configuration as users write it, and its normalized form.
// The build validates configuration statically (with file:line); this module holds the shared rules and
// defaults so the build, the service and the runtime agree on them.

import { unknownGpuIdMessage } from "./gpus/pools.js";
import { reservedEnvName } from "./env-policy.js";
import { modelsProblems, normalizeModels } from "./models.js";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
export const HTTP_METHODS: readonly HttpMethod[] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/** What a user passes to `Endpoint(config)`. Units: seconds for timeouts. */
export interface EndpointConfig {
  /** Endpoint name; one endpoint is created per distinct name. Lowercase letters, digits and dashes. */
  name: string;
  /** GPU type or group, or a priority-ordered list of them (a GPU endpoint). Never together with `cpu`. */
  gpu?: string | readonly string[];
  /** Whole GPUs each worker gets (default 1); only with `gpu`. */
  gpuCount?: number;
  /** CPU instance identifier (a CPU endpoint). Never together with `gpu`. */
  cpu?: string;
  /** `[min, max]` workers, or just `max` (min 0). */
  workers?: readonly [number, number] | number;
  /** npm package specs installed into the artifact for Linux x86_64 at build time. */
  dependencies?: readonly string[];
  /** Worker environment variables. */
  env?: Readonly<Record<string, string>>;
  /** Names of secrets (`svc secret set NAME`) the workers get as environment variables; never in the artifact. */
  secrets?: readonly string[];
  /** Network volume id (or name) mounted into the workers. */
  volume?: string;
  /** Seconds an idle worker is kept before it is stopped. */
  idleTimeout?: number;
  /** Seconds a job may run before it ends TIMED_OUT. */
  executionTimeout?: number;
  /** Jobs one worker runs at once. */
  maxConcurrency?: number;
  /** Automatic retries of a failed job (queue-based endpoints). */
  retries?: number;
  /**
   * How long a failed job waits before each retry, in seconds: the n-th retry waits a random time between 0 and
   * min(max, base * factor^(n-1)) (exponential backoff with full jitter). Default { base: 1, factor: 2, max: 60 }.
   */
  retryBackoff?: RetryBackoff;
  /**
   * Start workers from a checkpoint taken right after the handler's initialisation (its class constructor or init
   * hook) instead of running it again (process driver with CRIU; CPU endpoints). docs/cold-start.md, "Snapshots".
   */
  snapshot?: boolean;
  /**
   * The handler answers OpenAI's routes itself, as the provider's vLLM workers do: the service turns every request
   * under `/openai/v1/` into a job `{openai_route, openai_input}` and relays what the handler returns or yields
   * (docs/llm.md, "Pass-through"). Off by default: svc's own OpenAI route serves chat and completions requests.
   */
  openaiPassthrough?: boolean;
  /**
   * Outputs larger than this many bytes (as JSON) are written to the endpoint's network volume and the job's output
   * is a presigned link to them instead (docs/volumes.md, "Large outputs"). Needs `volume`. Absent: outputs stay in
   * the service's store whatever their size.
   */
  largeOutputBytes?: number;
  /**
   * Models its workers load, each as "org/name@revision" (a branch, a tag or a commit; "org/name" alone: main):
   * every host fetches each once from the service's model hub into its model cache, before the workers start,
   * and mounts it read-only with HF_HOME/HF_HUB_CACHE pointing at it and HF_HUB_OFFLINE=1 (docs/models.md).
   */
  models?: string[];
  /**
   * When workers are added (docs/service.md, "Scaling policies"): `{ type: "QUEUE_DELAY", value: 4 }` adds one
   * once a job has waited more than 4 s; `{ type: "REQUEST_COUNT", value: 4 }` keeps one per 4 jobs queued or
   * running. Absent: one worker per `maxConcurrency` jobs (REQUEST_COUNT with value maxConcurrency).
   */
  scaler?: ScalingPolicy;
  /**
   * A container image to run as the endpoint's workers instead of a function of this app: an image written for the
   * provider's Python worker SDK (docs/provider-workers.md). Such an endpoint has no handler: `Endpoint({ name,
   * image })` declares it whole. Never with `dependencies` or `snapshot`.
   */
  image?: string;
  /** An image endpoint's /dev/shm in MiB (model servers share tensors through it); default: the engine's 64 MiB. */
  shmSizeMb?: number;
  /**
   * An image endpoint's writable root filesystem in GB, as the provider's templates have it (default 10); 0 gives
   * its containers a read-only root. Bounded where the engine can bound a container's layer (docs/provider-workers.md).
   */
  containerDiskInGb?: number;
}

/** The configuration of an image endpoint: `image` set, no handler. */
export type ImageEndpointConfig = EndpointConfig & { image: string; dependencies?: never; snapshot?: never };

/** A retry backoff as users write it (seconds; fractions allowed); what is left out takes its default. */
export interface RetryBackoff {
  base?: number;
  factor?: number;
  max?: number;
}

/** A retry backoff as the manifest and the service keep it (ms). */
export interface NormalizedBackoff {
  baseMs: number;
  factor: number;
  maxMs: number;
}

export const SCALER_TYPES = ["QUEUE_DELAY", "REQUEST_COUNT"] as const;
export type ScalerType = (typeof SCALER_TYPES)[number];

/** An endpoint's scaling policy, the provider's `scalerType` and `scalerValue`. */
export interface ScalingPolicy {
  type: ScalerType;
  /** QUEUE_DELAY: seconds a job may wait before a worker is added; REQUEST_COUNT: jobs per worker. */
  value: number;
}

export const CONFIG_KEYS = [
  "name",
  "gpu",
  "gpuCount",
  "cpu",
  "workers",
  "dependencies",
  "env",
  "secrets",
  "volume",
  "idleTimeout",
  "executionTimeout",
  "maxConcurrency",
  "retries",
  "retryBackoff",
  "snapshot",
  "openaiPassthrough",
  "largeOutputBytes",
  "models",
  "scaler",
  "image",
  "shmSizeMb",
  "containerDiskInGb",
] as const;

export const DEFAULTS = {
  cpu: "cpu3c-1-2",
  workersMin: 0,
  workersMax: 3,
  idleTimeout: 60,
  executionTimeout: 600,
  maxConcurrency: 1,
  retries: 1,
  /** Seconds: the first retry waits up to 1 s, each next one up to twice as long, never more than 60 s. */
  retryBackoff: { base: 1, factor: 2, max: 60 },
} as const;

export const LIMITS = {
  workersMax: 100,
  /** The REST API's bound too (CreateEndpointRequest.gpuCount). */
  gpuCountMax: 8,
  idleTimeoutMax: 3600,
  executionTimeoutMax: 24 * 3600,
  maxConcurrencyMax: 1000,
  retriesMax: 10,
  /** Seconds, for retryBackoff's base and max. */
  retryBackoffMax: 3600,
  retryBackoffFactorMax: 10,
  /** The provider's bounds of scalerValue (the REST API's schema too). */
  scalerValueMin: 1,
  scalerValueMax: 3600,
  /** The REST API's bounds of a template's shmSizeMb and containerDiskInGb. */
  shmSizeMbMin: 64,
  shmSizeMbMax: 262144,
  containerDiskInGbMax: 1024,
  /** A template's or an image endpoint's containerDiskInGb when it gives none (the provider's templates always carry one). */
  containerDiskInGbDefault: 10,
} as const;

/** Paths an app may not define on a load-balanced endpoint. */
export const RESERVED_ROUTE_PATHS = ["/ping"] as const;

/** A secret is delivered as an environment variable of this name; SVC_ names are the worker protocol's. */
export const SECRET_NAME_PATTERN = /^(?!SVC_)[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export const ENDPOINT_NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Configuration with every default filled in, as the manifest and the service use it. */
export interface NormalizedConfig {
  name: string;
  computeType: "GPU" | "CPU";
  /** GPU types in priority order (GPU endpoints); empty for CPU. */
  gpuTypeIds: string[];
  /** Whole GPUs per worker: 1 or more for GPU endpoints, 0 for CPU. */
  gpuCount: number;
  /** CPU instance ids (CPU endpoints); empty for GPU. */
  instanceIds: string[];
  workersMin: number;
  workersMax: number;
  dependencies: string[];
  env: Record<string, string>;
  secrets: string[];
  volume: string | null;
  idleTimeout: number;
  executionTimeoutMs: number;
  maxConcurrency: number;
  retries: number;
  /** Absent: the default backoff (DEFAULTS.retryBackoff). */
  retryBackoff?: NormalizedBackoff;
  snapshot: boolean;
  openaiPassthrough: boolean;
  /** Absent: outputs of any size stay in the service's store. */
  largeOutputBytes?: number;
  /** The models its workers find in the host's model cache, "org/name@revision" each (docs/models.md). */
  models: string[];
  /** Absent: the default (one worker per maxConcurrency jobs). */
  scaler?: ScalingPolicy;
  /** An image endpoint's image (absent: the endpoint runs this app's code). */
  image?: string;
  shmSizeMb?: number;
  containerDiskInGb?: number;
}

/** Problems with an image name as a user wrote it (a Docker reference, not svc's own `svc://` form); empty when valid. Pure. */
export function imageNameProblems(value: unknown, key = "image"): string[] {
  if (typeof value !== "string" || value.length === 0) return [`"${key}" must be a container image such as "my/worker:1.2"`];
  if (value.startsWith("svc://")) return [`"${key}" names svc code ("${value}"); an image endpoint runs a container image such as "my/worker:1.2"`];
  if (!/^[A-Za-z0-9][A-Za-z0-9._/:@-]*$/.test(value) || value.length > 255) {
    return [`"${key}" "${value}" is not a container image reference (letters, digits, and . _ / : @ -, e.g. "my/worker:1.2")`];
  }
  return [];
}

/** The largest `largeOutputBytes`: outputs over it could not reach the service in one result anyway. */
export const MAX_LARGE_OUTPUT_BYTES = 64 * 1024 * 1024;

/** Problems with an endpoint's `largeOutputBytes` (a positive integer, with a volume); empty when valid. Pure. */
export function largeOutputProblems(value: unknown, volume: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_LARGE_OUTPUT_BYTES)
    return [`"largeOutputBytes" must be an integer from 1 to ${MAX_LARGE_OUTPUT_BYTES} (bytes of output JSON)`];
  if (typeof volume !== "string" || volume.length === 0) return ['"largeOutputBytes" needs a network volume ("volume"): large outputs are written there'];
  return [];
}

/** Problems with a scaling policy as a user wrote it; empty when valid. Pure. */
export function scalingPolicyProblems(value: unknown, key = "scaler"): string[] {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return [`"${key}" must be { type: "QUEUE_DELAY" | "REQUEST_COUNT", value: <integer> }`];
  }
  const v = value as Record<string, unknown>;
  const problems: string[] = [];
  for (const k of Object.keys(v)) if (k !== "type" && k !== "value") problems.push(`"${key}" has an unknown key "${k}" (known keys: type, value)`);
  if (!(SCALER_TYPES as readonly unknown[]).includes(v.type)) problems.push(`"${key}.type" must be one of ${SCALER_TYPES.join(", ")}`);
  const { scalerValueMin: min, scalerValueMax: max } = LIMITS;
  if (typeof v.value !== "number" || !Number.isInteger(v.value) || v.value < min || v.value > max) {
    problems.push(`"${key}.value" must be an integer from ${min} to ${max} (QUEUE_DELAY: seconds a job waits; REQUEST_COUNT: jobs per worker)`);
  }
  return problems;
}

/** Problems with a retry backoff as a user wrote it; empty when valid. Pure. */
export function retryBackoffProblems(value: unknown, key = "retryBackoff"): string[] {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return [`"${key}" must be { base?, factor?, max? } (seconds)`];
  const v = value as Record<string, unknown>;
  const problems: string[] = [];
  for (const k of Object.keys(v))
    if (!["base", "factor", "max"].includes(k)) problems.push(`"${key}" has an unknown key "${k}" (known keys: base, factor, max)`);
  const number = (k: string, min: number, max: number, what: string) => {
    const n = v[k];
    if (n !== undefined && (typeof n !== "number" || !Number.isFinite(n) || n < min || n > max))
      problems.push(`"${key}.${k}" must be a number from ${min} to ${max} (${what})`);
  };
  number("base", 0, LIMITS.retryBackoffMax, "seconds the first retry waits at most");
  number("factor", 1, LIMITS.retryBackoffFactorMax, "how much longer each next retry may wait");
  number("max", 0, LIMITS.retryBackoffMax, "seconds any retry waits at most");
  const base = typeof v.base === "number" ? v.base : DEFAULTS.retryBackoff.base;
  if (problems.length === 0 && typeof v.max === "number" && v.max < base) problems.push(`"${key}.max" (${v.max}) must be at least its base (${base})`);
  return problems;
}

/** A valid retry backoff in the manifest's form (ms). Pure. */
export function normalizeBackoff(value: RetryBackoff): NormalizedBackoff {
  const d = DEFAULTS.retryBackoff;
  return {
    baseMs: Math.round((value.base ?? d.base) * 1000),
    factor: value.factor ?? d.factor,
    maxMs: Math.round((value.max ?? Math.max(d.max, value.base ?? 0)) * 1000),
  };
}

/**
 * Validate a plain config object. Returns a list of problems (empty when valid); each problem names the key.
 * Used by the build (which adds file:line) and by `Endpoint()` at run time.
 */
export function configProblems(config: unknown): string[] {
  const problems: string[] = [];
  if (typeof config !== "object" || config === null || Array.isArray(config)) {
    return ['the endpoint configuration must be an object like { name: "my-endpoint" }'];
  }
  const c = config as Record<string, unknown>;
  for (const key of Object.keys(c)) {
    if (!(CONFIG_KEYS as readonly string[]).includes(key)) {
      problems.push(`unknown configuration key "${key}" (known keys: ${CONFIG_KEYS.join(", ")})`);
    }
  }
  if (typeof c.name !== "string" || c.name.length === 0) {
    problems.push('"name" is required and must be a non-empty string');
  } else if (!ENDPOINT_NAME_PATTERN.test(c.name)) {
    problems.push(`"name" "${c.name}" must be 1-63 lowercase letters, digits or dashes, starting and ending with a letter or digit`);
  }
  if (c.gpu !== undefined && c.cpu !== undefined) {
    problems.push('"gpu" and "cpu" are mutually exclusive: an endpoint is either GPU-based or CPU-based');
  }
  if (c.gpu !== undefined) {
    const list = Array.isArray(c.gpu) ? c.gpu : [c.gpu];
    if (list.length === 0 || !list.every((g) => typeof g === "string" && g.length > 0)) {
      problems.push('"gpu" must be a GPU type (string) or a non-empty list of GPU types in priority order');
    } else if (new Set(list).size !== list.length) {
      problems.push('"gpu" lists a GPU type twice');
    } else {
      for (const id of list as string[]) {
        const unknown = unknownGpuIdMessage(id);
        if (unknown) problems.push(`"gpu" names an ${unknown}`);
      }
    }
  }
  if (c.gpuCount !== undefined) {
    if (typeof c.gpuCount !== "number" || !Number.isInteger(c.gpuCount) || c.gpuCount < 1 || c.gpuCount > LIMITS.gpuCountMax) {
      problems.push(`"gpuCount" must be an integer from 1 to ${LIMITS.gpuCountMax} (whole GPUs per worker)`);
    } else if (c.gpu === undefined) {
      problems.push('"gpuCount" needs "gpu": it is the number of GPUs of a GPU endpoint\'s workers');
    }
  }
  if (c.cpu !== undefined && (typeof c.cpu !== "string" || c.cpu.length === 0)) {
    problems.push('"cpu" must be a CPU instance id such as "cpu3c-1-2"');
  }
  if (c.workers !== undefined) {
    const w = c.workers;
    if (typeof w === "number") {
      if (!Number.isInteger(w) || w < 1 || w > LIMITS.workersMax) {
        problems.push(`"workers" as a number is the maximum: an integer from 1 to ${LIMITS.workersMax}`);
      }
    } else if (Array.isArray(w) && w.length === 2 && w.every((n) => Number.isInteger(n))) {
      const [min, max] = w as number[];
      if (min! < 0 || max! < 1 || min! > max! || max! > LIMITS.workersMax) {
        problems.push(`"workers" [min, max] needs 0 <= min <= max, 1 <= max <= ${LIMITS.workersMax}`);
      }
    } else {
      problems.push('"workers" must be [min, max] (two integers) or a maximum (one integer)');
    }
  }
  if (c.dependencies !== undefined) {
    if (!Array.isArray(c.dependencies) || !c.dependencies.every((d) => typeof d === "string" && d.length > 0)) {
      problems.push('"dependencies" must be a list of npm package specs such as ["sharp@^0.34"]');
    }
  }
  if (c.env !== undefined) {
    if (typeof c.env !== "object" || c.env === null || Array.isArray(c.env)) {
      problems.push('"env" must be an object of string values');
    } else {
      for (const [k, v] of Object.entries(c.env)) {
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) problems.push(`"env" key "${k}" is not a valid variable name`);
        else if (reservedEnvName(k)) problems.push(`"env" key "${k}" ${reservedEnvName(k)}`);
        if (typeof v !== "string") problems.push(`"env.${k}" must be a string`);
      }
    }
  }
  if (c.secrets !== undefined) {
    if (!Array.isArray(c.secrets) || !c.secrets.every((n) => typeof n === "string")) {
      problems.push('"secrets" must be a list of secret names such as ["HF_TOKEN"]');
    } else {
      for (const name of c.secrets as string[]) {
        if (!SECRET_NAME_PATTERN.test(name))
          problems.push(`"secrets" name "${name}" is not a valid variable name (letters, digits, _; not starting with a digit or SVC_)`);
        else if (reservedEnvName(name)) problems.push(`"secrets" name "${name}" ${reservedEnvName(name)}`);
      }
    }
  }
  if (c.volume !== undefined && (typeof c.volume !== "string" || c.volume.length === 0)) {
    problems.push('"volume" must be a network volume id');
  }
  const intRange = (key: string, min: number, max: number) => {
    const v = c[key];
    if (v !== undefined && (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)) {
      problems.push(`"${key}" must be an integer from ${min} to ${max}`);
    }
  };
  intRange("idleTimeout", 1, LIMITS.idleTimeoutMax);
  intRange("executionTimeout", 1, LIMITS.executionTimeoutMax);
  intRange("maxConcurrency", 1, LIMITS.maxConcurrencyMax);
  intRange("retries", 0, LIMITS.retriesMax);
  if (c.retryBackoff !== undefined) problems.push(...retryBackoffProblems(c.retryBackoff));
  if (c.snapshot !== undefined && typeof c.snapshot !== "boolean") problems.push('"snapshot" must be true or false');
  if (c.openaiPassthrough !== undefined && typeof c.openaiPassthrough !== "boolean") problems.push('"openaiPassthrough" must be true or false');
  problems.push(...largeOutputProblems(c.largeOutputBytes, c.volume));
  if (c.models !== undefined) problems.push(...modelsProblems(c.models));
  if (c.scaler !== undefined) problems.push(...scalingPolicyProblems(c.scaler));
  if (c.image !== undefined) {
    problems.push(...imageNameProblems(c.image));
    for (const key of ["dependencies", "snapshot"])
      if (c[key] !== undefined) problems.push(`"${key}" does not apply to an image endpoint: "image" runs a container image, not this app's code`);
  }
  intRange("shmSizeMb", LIMITS.shmSizeMbMin, LIMITS.shmSizeMbMax);
  intRange("containerDiskInGb", 0, LIMITS.containerDiskInGbMax);
  for (const key of ["shmSizeMb", "containerDiskInGb"])
    if (c[key] !== undefined && c.image === undefined) problems.push(`"${key}" needs "image": it sizes an image endpoint's container`);
  return problems;
}

/** Fill in defaults. Call only on a config for which configProblems() returned nothing. */
export function normalizeConfig(config: EndpointConfig): NormalizedConfig {
  const gpu = config.gpu === undefined ? [] : Array.isArray(config.gpu) ? [...config.gpu] : [config.gpu as string];
  const isGpu = gpu.length > 0;
  let workersMin: number = DEFAULTS.workersMin;
  let workersMax: number = DEFAULTS.workersMax;
  if (typeof config.workers === "number") {
    workersMax = config.workers;
  } else if (Array.isArray(config.workers)) {
    [workersMin, workersMax] = config.workers as [number, number];
  }
  const env: Record<string, string> = {};
  for (const key of Object.keys(config.env ?? {}).sort()) env[key] = config.env![key]!;
  return {
    name: config.name,
    computeType: isGpu ? "GPU" : "CPU",
    gpuTypeIds: gpu,
    gpuCount: isGpu ? (config.gpuCount ?? 1) : 0,
    instanceIds: isGpu ? [] : [config.cpu ?? DEFAULTS.cpu],
    workersMin,
    workersMax,
    dependencies: [...(config.dependencies ?? [])],
    env,
    secrets: [...new Set(config.secrets ?? [])].sort(),
    volume: config.volume ?? null,
    idleTimeout: config.idleTimeout ?? DEFAULTS.idleTimeout,
    executionTimeoutMs: (config.executionTimeout ?? DEFAULTS.executionTimeout) * 1000,
    maxConcurrency: config.maxConcurrency ?? DEFAULTS.maxConcurrency,
    retries: config.retries ?? DEFAULTS.retries,
    ...(config.retryBackoff ? { retryBackoff: normalizeBackoff(config.retryBackoff) } : {}),
    snapshot: config.snapshot === true,
    openaiPassthrough: config.openaiPassthrough === true,
    ...(config.largeOutputBytes !== undefined ? { largeOutputBytes: config.largeOutputBytes } : {}),
    models: normalizeModels(config.models ?? []),
    ...(config.scaler ? { scaler: { type: config.scaler.type, value: config.scaler.value } } : {}),
    ...(config.image !== undefined ? { image: config.image } : {}),
    ...(config.shmSizeMb !== undefined ? { shmSizeMb: config.shmSizeMb } : {}),
    ...(config.containerDiskInGb !== undefined ? { containerDiskInGb: config.containerDiskInGb } : {}),
  };
}
