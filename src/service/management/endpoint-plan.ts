// What a REST endpoint (`{rest_url}/v1/endpoints`) is planned as, without I/O: a create or update body resolved
// against its template and volume, whether an update restarts its workers, and the endpoint row the engine and
// scaler work from, with its status. What an endpoint of a template runs:
//   - imageName "svc://<endpointId>": the code (artifact and handler) of that queue endpoint of an app the same
//     user deployed (`svc deploy`), with this endpoint's own settings, queue, volume and workers;
//   - with `type: "lb"`, any other image: a prebuilt image run as a load-balanced endpoint (any HTTP server
//     listening on $PORT; no handler, no queue) when the service's driver runs images (Docker) and the engine
//     holds the image (there is no registry: build or `docker load` it first). One worker of it is started at
//     once and its /ping checked before the endpoint gets traffic; the create or update answer says what the
//     check found (`ping`), and an image without /ping gets no workers until an update checks again;
//   - a queue endpoint of any other image: a worker built for the provider, started with the provider's
//     protocol (docs/provider-workers.md) when the service's driver runs images and the engine holds the image;
//     otherwise provisioned (its job API accepts and queues jobs) but WAITING with the reason, and no workers.
// GPU types are allocated in priority order from the host data center's GPU types; none available: WAITING.

import { createHash } from "node:crypto";
import { SCHEMAS, validate } from "../http/schema.js";
import type { EndpointRow } from "../store/types.js";
import type { RestEndpointSpec, TemplateRecord, VolumeRecord } from "./store.js";
import type { PingCheck } from "../lb/ping.js";
import { gpuTypeIdProblems, modelsProblems, normalizeModels, reservedEnvProblems } from "svc/internal";
import type { GpuRequest } from "../../gpus/allocate.js";

export const CODE_IMAGE_PREFIX = "svc://";

export const ENDPOINT_DEFAULTS = {
  gpuCount: 1,
  workersMin: 0,
  workersMax: 3,
  idleTimeout: 5,
  executionTimeoutMs: 600_000,
  scalerType: "QUEUE_DELAY",
  scalerValue: 4,
} as const;

export interface EndpointRecord extends RestEndpointSpec {
  id: string;
  url: string;
  /** "lb" for a prebuilt image (served at `lbUrl`), "queue" for svc code. */
  type: "queue" | "lb";
  lbUrl?: string;
  allocatedGpuType: string | null;
  /** Each worker holding GPUs of this host: which, and as which type of gpuTypeIds (docs/gpus.md). */
  workers?: Array<{ workerId: string; gpuType: string | null; gpus: string[] }>;
  status: "READY" | "WAITING";
  statusReason: string | null;
  /** A prebuilt image's /ping check, once its first worker answered (or did not). */
  ping?: PingCheck;
  createdAt: number;
  updatedAt: number;
}

/** Endpoint settings that decide what its workers execute: changing them needs the deploy scope. */
export const CODE_SETTINGS = ["templateId", "env"] as const;

/** How long a create or update waits for a prebuilt image's first worker to answer /ping. */
export const IMAGE_PING_WAIT_MS = 30_000;

/** What the service knows of prebuilt images: whether its driver runs them, and which ones the engine holds. */
export interface ImageSupport {
  runsImages: boolean;
  /** The driver's cluster pulls images itself (Kubernetes): a provider worker image needs no look-up. */
  pulls?: boolean;
  /** The service's worker driver ("process", "docker", ...), named where it cannot run an image. */
  driver?: string;
  /** Images found in the engine (checked when an endpoint is created or updated). */
  present(name: string): boolean;
}

/** Resolve the settings of a create or update body: defaults, template and volume ownership, consistency. Pure. */
export function planEndpointSpec(
  body: Record<string, unknown>,
  before: RestEndpointSpec | undefined,
  lookup: { template(id: string): TemplateRecord | undefined; volume(id: string): VolumeRecord | undefined },
): { spec?: RestEndpointSpec; errors: string[] } {
  const errors = validate(before ? SCHEMAS.UpdateEndpointRequest : SCHEMAS.CreateEndpointRequest, body);
  if (errors.length > 0) return { errors };
  const b = body as Partial<RestEndpointSpec> & { networkVolumeId?: string | null };
  const gpuTypeIds = b.gpuTypeIds ?? before?.gpuTypeIds ?? [];
  const spec: RestEndpointSpec = {
    name: b.name ?? before!.name,
    templateId: b.templateId ?? before!.templateId,
    computeType: b.computeType ?? before?.computeType ?? (gpuTypeIds.length > 0 ? "GPU" : "CPU"),
    gpuTypeIds,
    gpuCount: b.gpuCount ?? before?.gpuCount ?? ENDPOINT_DEFAULTS.gpuCount,
    workersMin: b.workersMin ?? before?.workersMin ?? ENDPOINT_DEFAULTS.workersMin,
    workersMax: b.workersMax ?? before?.workersMax ?? ENDPOINT_DEFAULTS.workersMax,
    idleTimeout: b.idleTimeout ?? before?.idleTimeout ?? ENDPOINT_DEFAULTS.idleTimeout,
    env: b.env ?? before?.env ?? {},
    networkVolumeId: b.networkVolumeId === undefined ? (before?.networkVolumeId ?? null) : b.networkVolumeId,
    executionTimeoutMs: b.executionTimeoutMs ?? before?.executionTimeoutMs ?? ENDPOINT_DEFAULTS.executionTimeoutMs,
    scalerType: b.scalerType ?? before?.scalerType ?? ENDPOINT_DEFAULTS.scalerType,
    scalerValue: b.scalerValue ?? before?.scalerValue ?? ENDPOINT_DEFAULTS.scalerValue,
    type: b.type ?? before?.type ?? "queue",
    models: b.models ?? before?.models ?? [],
  };
  const template = lookup.template(spec.templateId);
  if (!template) errors.push(`$.templateId: no template "${spec.templateId}"`);
  else if (spec.type === "lb" && template.imageName.startsWith(CODE_IMAGE_PREFIX)) {
    errors.push(
      `$.type: a load-balanced endpoint runs a prebuilt image; template ${template.id} runs svc code (${template.imageName}), which \`svc deploy\` serves`,
    );
  }
  if (b.env !== undefined) errors.push(...reservedEnvProblems(Object.keys(b.env), "$.env."));
  if (b.models !== undefined) {
    const problems = modelsProblems(b.models, "$.models");
    errors.push(...problems);
    if (problems.length === 0) spec.models = normalizeModels(b.models);
  }
  if (spec.networkVolumeId !== null && !lookup.volume(spec.networkVolumeId)) errors.push(`$.networkVolumeId: no network volume "${spec.networkVolumeId}"`);
  if (spec.workersMin > spec.workersMax) errors.push(`$.workersMin: must not exceed workersMax (${spec.workersMax})`);
  if (spec.computeType === "CPU" && spec.gpuTypeIds.length > 0) errors.push("$.gpuTypeIds: must be empty for a CPU endpoint");
  errors.push(...gpuTypeIdProblems(b.gpuTypeIds));
  return errors.length > 0 ? { errors } : { spec, errors };
}

/** Whether an update must restart the endpoint's active workers (what they run or how many changed). Pure. */
export function needsRestart(before: RestEndpointSpec, after: RestEndpointSpec): boolean {
  const key = (s: RestEndpointSpec) =>
    JSON.stringify([s.gpuTypeIds, s.gpuCount, s.workersMin, s.workersMax, s.computeType, s.templateId, s.networkVolumeId, s.models ?? []]);
  return key(before) !== key(after);
}

/**
 * The endpoint row the engine and scaler work from, its status, and the allocated GPU type. An endpoint that
 * cannot run (no GPU type available, or a template without svc code) gets workersMax 0. Pure.
 */
export function planEndpointRow(input: {
  id: string;
  userId: string;
  spec: RestEndpointSpec;
  template: TemplateRecord | undefined;
  /** The app endpoint a `svc://` template points at, when the user owns it. */
  code: EndpointRow | undefined;
  hostGpuTypes: string[];
  /**
   * Whether this host could ever give one worker `request` (it has that many GPUs of one of the types), from its
   * GPU inventory; undefined where the service has none (no GPUs found, or a scheduler places workers).
   */
  gpuCapacity?: (request: GpuRequest) => { satisfiable: boolean; reason: string };
  images: ImageSupport;
  /** A prebuilt image's failed /ping check: no workers until the image is fixed (an update checks again). */
  pingFailed?: PingCheck;
  before: EndpointRow | undefined;
  /** Bumped when the workers must be replaced. */
  generation: number;
  now: number;
}): { row: EndpointRow; status: "READY" | "WAITING"; statusReason: string | null; allocatedGpuType: string | null } {
  const { spec, template, code } = input;
  const reasons: string[] = [];
  let allocated: string | null = null;
  // The types of the list this host has, in priority order: each worker gets the first with a free GPU (scaler).
  let onHost: string[] = [];
  if (spec.computeType === "GPU") {
    const wanted = spec.gpuTypeIds.length > 0 ? spec.gpuTypeIds : input.hostGpuTypes.slice(0, 1);
    onHost = wanted.filter((t) => input.hostGpuTypes.includes(t));
    allocated = onHost[0] ?? null;
    const capacity = allocated && input.gpuCapacity?.({ typeIds: onHost, count: spec.gpuCount });
    if (!allocated) {
      reasons.push(
        `none of the GPU types ${spec.gpuTypeIds.length > 0 ? spec.gpuTypeIds.join(", ") : "(any)"} is available on this host (it has: ${input.hostGpuTypes.join(", ") || "no GPUs"})`,
      );
    } else if (capacity && !capacity.satisfiable) {
      allocated = null;
      reasons.push(`this host has too few GPUs for gpuCount ${spec.gpuCount} (${capacity.reason})`);
    }
  }
  const prebuilt = spec.type === "lb";
  if (!template) reasons.push(`template ${spec.templateId} no longer exists`);
  else if (!prebuilt && !template.imageName.startsWith(CODE_IMAGE_PREFIX)) {
    // A worker image built for the provider: it speaks the provider's protocol, on a driver that runs images.
    if (!input.images.runsImages && !input.images.pulls) {
      reasons.push(
        `image "${template.imageName}" is a worker image, and ${input.images.driver ? `the ${input.images.driver} driver runs no images` : "this service starts no workers"}: only the Docker, Swarm and Kubernetes drivers run them ` +
          `(start the service with \`svc server --workers docker\`); or run svc code with imageName "${CODE_IMAGE_PREFIX}<app endpoint id>"`,
      );
    } else if (!input.images.pulls && !input.images.present(template.imageName)) {
      reasons.push(
        `image "${template.imageName}" is not in the Docker engine; there is no registry to pull from: build it or \`docker load\` it, then update the endpoint`,
      );
    }
  } else if (prebuilt && !input.images.runsImages) {
    reasons.push(
      `image "${template.imageName}" is a prebuilt image, which only the Docker driver runs (start the service with \`svc server --workers docker\`); ` +
        `or run svc code with imageName "${CODE_IMAGE_PREFIX}<app endpoint id>"`,
    );
  } else if (prebuilt && !input.images.present(template.imageName)) {
    reasons.push(
      `image "${template.imageName}" is not in the Docker engine; there is no registry to pull from: build it or \`docker load\` it, then update the endpoint`,
    );
  } else if (prebuilt && input.pingFailed) reasons.push(input.pingFailed.message);
  else if (!prebuilt && !code) reasons.push(`template image "${template.imageName}" names no queue endpoint of yours`);
  const runnable = reasons.length === 0;
  const source = code?.resource;
  const revision = createHash("sha256")
    .update(
      JSON.stringify([
        input.generation,
        code?.artifactPath ?? "",
        source?.handler ?? "",
        template?.imageName ?? "",
        allocated,
        runnable,
        ...((spec.models ?? []).length > 0 ? [spec.models] : []),
      ]),
    )
    .digest("hex")
    .slice(0, 16);
  const row: EndpointRow = {
    id: input.id,
    userId: input.userId,
    app: "",
    env: "",
    // Workers find their handler in the artifact by endpoint name (SVC_ENDPOINT_NAME): an endpoint running an
    // app endpoint's code carries that name here; its own name lives in its settings (records show that one).
    name: code?.name ?? spec.name,
    type: prebuilt ? "lb" : "queue",
    resource: {
      is_load_balanced: prebuilt,
      imageName: template?.imageName ?? "",
      workersMin: runnable ? spec.workersMin : 0,
      workersMax: runnable ? spec.workersMax : 0,
      gpuIds: spec.gpuTypeIds.join(","),
      env: { ...(source?.env ?? {}), ...(template?.env ?? {}), ...spec.env },
      functions: source?.functions ?? [],
      computeType: spec.computeType,
      // Any type (none named) on a host whose GPUs the service assigns: any of its GPUs.
      gpuTypeIds: !allocated ? spec.gpuTypeIds : spec.gpuTypeIds.length === 0 && input.gpuCapacity ? [] : onHost,
      gpuCount: spec.computeType === "GPU" ? spec.gpuCount : 0,
      instanceIds: [],
      dependencies: [],
      idleTimeout: spec.idleTimeout,
      executionTimeoutMs: spec.executionTimeoutMs,
      maxConcurrency: source?.maxConcurrency ?? 1,
      retries: source?.retries ?? 1,
      ...(source?.retryBackoff ? { retryBackoff: source.retryBackoff } : {}),
      ...(source?.openaiPassthrough ? { openaiPassthrough: true } : {}),
      volume: spec.networkVolumeId,
      ...((spec.models ?? []).length > 0 ? { models: [...spec.models!] } : {}),
      // The policy the endpoint shows is the one its workers scale by (load-balanced ones: docs/lb.md).
      scaler: { type: spec.scalerType, value: spec.scalerValue },
      handler: source?.handler ?? "",
    },
    artifactPath: code?.artifactPath ?? "",
    revision,
    createdAt: input.before?.createdAt ?? input.now,
    updatedAt: input.now,
    completed: input.before?.completed ?? 0,
    failed: input.before?.failed ?? 0,
    retried: input.before?.retried ?? 0,
  };
  return { row, status: runnable ? "READY" : "WAITING", statusReason: runnable ? null : reasons.join("; "), allocatedGpuType: allocated };
}
