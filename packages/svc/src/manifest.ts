// The deployment manifest (`.svc/svc_manifest.json`, also at the root of the artifact).
// The spec's fields come first in each resource; the rest is what svc needs to deploy and run.
// Written by src/build, read by the service, the runtime and the SDK (cross-endpoint calls).

import type { HttpMethod, NormalizedBackoff, ScalingPolicy } from "./config.js";

export const MANIFEST_FILE = "svc_manifest.json";
export const MANIFEST_VERSION = 1;

export type FunctionKind = "function" | "generator" | "method" | "generator-method";

export interface ManifestFunction {
  /** The function's name: the name jobs use to call it (unique within its endpoint). */
  name: string;
  /** Source module, relative to the project root, forward slashes (e.g. "src/gpu.ts"). */
  module: string;
  /** The export that holds it (the class's export for methods). */
  export: string;
  kind: FunctionKind;
  /** For class endpoints: the class whose method this is. */
  class?: string;
  /** An input built from the TypeScript type of the function's parameter, for "Try it" (absent without a type). */
  exampleInput?: unknown;
}

export interface ManifestResource {
  // --- the spec's fields ---
  is_load_balanced: boolean;
  imageName: string;
  workersMin: number;
  workersMax: number;
  /** GPU types in priority order joined with ","; "" for CPU endpoints. */
  gpuIds: string;
  env: Record<string, string>;
  functions: ManifestFunction[];
  // --- svc's own fields ---
  computeType: "GPU" | "CPU";
  gpuTypeIds: string[];
  /** Whole GPUs per worker (0 for CPU endpoints). Absent in manifests built before it existed: one GPU. */
  gpuCount?: number;
  instanceIds: string[];
  dependencies: string[];
  idleTimeout: number;
  executionTimeoutMs: number;
  maxConcurrency: number;
  retries: number;
  /** How long a failed job waits before each retry (ms; absent: 1 s doubling to 60 s, with full jitter). */
  retryBackoff?: NormalizedBackoff;
  volume: string | null;
  /** Names of the secrets its workers get as environment variables (values are never in the artifact). */
  secrets?: string[];
  /**
   * sha256 of the endpoint's bundled code (its handler and source map): unchanged when only another endpoint's
   * code changed, so a redeploy replaces only the workers whose code or configuration changed.
   */
  codeHash?: string;
  /** Workers start from a checkpoint taken after initialisation (`snapshot: true`); absent when off. */
  snapshot?: boolean;
  /** Outputs over this many bytes of JSON go to the endpoint's volume, the output a link to them; absent: off. */
  largeOutputBytes?: number;
  /**
   * The endpoint's handler answers OpenAI's routes itself (`{openai_route, openai_input}` jobs, as the provider's
   * vLLM workers): the service passes `/openai/v1/*` through to it (docs/llm.md). Absent when off.
   */
  openaiPassthrough?: boolean;
  /**
   * Models the host fetches into its model cache before the workers start, each "org/name@revision"; absent:
   * none (docs/models.md).
   */
  models?: string[];
  /**
   * When workers are added (QUEUE_DELAY: seconds a job waits; REQUEST_COUNT: jobs per worker). Absent: one worker
   * per maxConcurrency jobs queued or running (REQUEST_COUNT with value maxConcurrency).
   */
  scaler?: ScalingPolicy;
  /**
   * The worker protocol of an image endpoint (`Endpoint({ name, image })`): "provider", the provider's worker SDK
   * (docs/provider-workers.md). Then `imageName` is the image its workers run, `functions` is empty and `handler`
   * is "": no code of the app is bundled for it. Absent: the endpoint runs the app's code.
   */
  protocol?: "provider";
  /** An image endpoint's /dev/shm in MiB (absent: the engine's default). */
  shmSizeMb?: number;
  /** An image endpoint's container disk in GB, recorded as the provider's templates do (not a quota under Docker). */
  containerDiskInGb?: number;
  /** Path of the bundled handler inside the artifact, e.g. "endpoints/gpu-worker/handler.mjs"; "" for an image endpoint. */
  handler: string;
}

/** The image an image endpoint's workers run, or undefined when the endpoint runs the app's code. Pure. */
export function endpointImageOf(resource: Pick<ManifestResource, "protocol" | "imageName">): string | undefined {
  return resource.protocol === "provider" && typeof resource.imageName === "string" && resource.imageName !== "" ? resource.imageName : undefined;
}

export type RouteKey = `${HttpMethod} /${string}`;

export interface Manifest {
  version: typeof MANIFEST_VERSION;
  /** App name, from the project's package.json (or its directory name). */
  app: string;
  /** sha256 over the project's source files (paths and contents); changes exactly when sources change. */
  fingerprint: string;
  /** Version of svc that built it. */
  svcVersion: string;
  resources: Record<string, ManifestResource>;
  /** Load-balanced routing: endpoint name -> "METHOD /path" -> function name. */
  routes: Record<string, Record<string, string>>;
  /** Packages left out of the artifact (base-image packages and --exclude). */
  excluded: string[];
}
