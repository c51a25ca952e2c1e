// Templates and endpoints created through the REST API (`{rest_url}/v1/templates`, `{rest_url}/v1/endpoints`).
//
// A template names a worker image and defaults (env, disk). What an endpoint of a template runs:
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
// REST endpoints are stored in the endpoints table with app "" and env "" (never part of an app) plus their
// settings as given in `rest_endpoints`.

import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../keys/auth.js";
import { newId } from "../keys/auth.js";
import { sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import { SCHEMAS, validate } from "../http/schema.js";
import type { EndpointRow } from "../store/types.js";
import { readObjectBody, requireAccess, requireDeploy, type ManagementContext, type ManagementDeps } from "./context.js";
import { LIMITS, reservedEnvProblems } from "svc/internal";
import type { ContainerAllowances } from "../../drivers/types.js";
import type { RegistryAuthRecord, RestEndpointSpec, TemplateRecord, VolumeRecord } from "./store.js";
import { ownRegistryAuth } from "./registry-auths.js";
import type { PingCheck } from "../lb/ping.js";
import { lbEndpointUrl } from "../lb/address.js";
import { gpuTypeIdProblems, modelsProblems, normalizeModels } from "svc/internal";
import type { GpuRequest } from "../../gpus/allocate.js";
import { gpuWaitMessage } from "../../gpus/host.js";
import { crashLoopMessage } from "../workers/crash-loop.js";

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

export function templateJson(t: TemplateRecord) {
  return {
    id: t.id,
    name: t.name,
    imageName: t.imageName,
    env: t.env,
    containerDiskInGb: t.containerDiskInGb,
    shmSizeMb: t.shmSizeMb ?? null,
    containerRegistryAuthId: t.containerRegistryAuthId ?? null,
    createdAt: t.createdAt,
  };
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

// ------------------------------------------------------------------------------------------- I/O

/** REST endpoints' settings and generations (restart counters), cached in memory; loaded from the store at start. */
export class RestEndpoints {
  readonly specs = new Map<string, { userId: string; spec: RestEndpointSpec; generation: number }>();
  /** Prebuilt images the engine was found to hold (looked up when an endpoint is created, updated or loaded). */
  private readonly presentImages = new Set<string>();
  /** The last /ping check of each prebuilt-image endpoint. */
  private readonly pings = new Map<string, PingCheck>();

  constructor(
    private readonly ctx: () => ManagementDeps,
    private readonly m: ManagementContext,
  ) {
    for (const r of m.store.restEndpoints()) this.specs.set(r.id, { userId: r.userId, spec: r.spec, generation: r.generation });
  }

  /** What this host's GPUs can serve, where the service assigns them (its driver runs workers here). */
  gpuCapacity(): ((request: GpuRequest) => { satisfiable: boolean; reason: string }) | undefined {
    const gpus = this.ctx().gpus?.();
    return gpus?.assigning ? (request) => gpus.capacity(request) : undefined;
  }

  private images(): ImageSupport {
    const scaler = this.ctx().scaler();
    return {
      runsImages: scaler?.runsImages ?? false,
      pulls: scaler?.pullsImages ?? false,
      driver: scaler?.driverName,
      present: (name) => this.presentImages.has(name),
    };
  }

  private prebuiltImage(entry: { userId: string; spec: RestEndpointSpec }): string | undefined {
    const template = this.m.store.template(entry.spec.templateId);
    // A load-balanced endpoint's server, or a queue endpoint's worker built for the provider: not svc code.
    return template && template.userId === entry.userId && !template.imageName.startsWith(CODE_IMAGE_PREFIX) ? template.imageName : undefined;
  }

  /** Ask the engine whether it holds the endpoint's prebuilt image (I/O; the plan reads the answer). */
  async lookUpImage(id: string): Promise<void> {
    const entry = this.specs.get(id);
    const image = entry && this.prebuiltImage(entry);
    const scaler = this.ctx().scaler();
    if (!image || !scaler?.runsImages) return;
    if (await scaler.hasImage(image)) this.presentImages.add(image);
    else this.presentImages.delete(image);
  }

  /**
   * A created or updated prebuilt-image endpoint: start one worker of it, see whether it serves /ping, and keep the
   * verdict (a failed one stops the endpoint from getting workers until an update checks again).
   */
  async checkPing(id: string): Promise<void> {
    const row = this.ctx().endpoints.get(id);
    const scaler = this.ctx().scaler();
    if (!row || row.type !== "lb" || row.resource.workersMax === 0 || !scaler) return;
    const check = await scaler.checkImage(row, IMAGE_PING_WAIT_MS);
    this.pings.set(id, check);
    void this.ctx().engine.appendLogs([{ ts: Date.now(), endpointId: id, workerId: "svc", jobId: null, stream: "log", text: `ping check: ${check.message}` }]);
    if (!check.ok) await this.apply(id);
  }

  private codeOf(userId: string, template: TemplateRecord | undefined): EndpointRow | undefined {
    if (!template?.imageName.startsWith(CODE_IMAGE_PREFIX)) return undefined;
    const row = this.ctx().endpoints.get(template.imageName.slice(CODE_IMAGE_PREFIX.length));
    return row && row.userId === userId && row.type === "queue" && row.app !== "" ? row : undefined;
  }

  plan(id: string, entry: { userId: string; spec: RestEndpointSpec; generation: number }, now = Date.now()) {
    const template = this.m.store.template(entry.spec.templateId);
    return planEndpointRow({
      id,
      userId: entry.userId,
      spec: entry.spec,
      template: template?.userId === entry.userId ? template : undefined,
      code: this.codeOf(entry.userId, template),
      hostGpuTypes: this.m.dataCenters.dataCenters.find((d) => d.id === this.m.dataCenters.host)?.gpuTypes ?? [],
      gpuCapacity: this.gpuCapacity(),
      images: this.images(),
      pingFailed: this.pings.get(id)?.ok === false ? this.pings.get(id) : undefined,
      before: this.ctx().endpoints.get(id),
      generation: entry.generation,
      now,
    });
  }

  record(id: string): EndpointRecord {
    const entry = this.specs.get(id)!;
    const row = this.ctx().endpoints.get(id);
    const planned = this.plan(id, entry);
    const ping = this.pings.get(id);
    const scaler = this.ctx().scaler();
    const workers = scaler?.workerGpus(id) ?? [];
    const wait = planned.status === "READY" ? scaler?.gpuWait(id) : undefined;
    // Its image could not be pulled at the last worker's start: it waits (its jobs stay queued), and says why.
    const pull = planned.status === "READY" && !wait ? scaler?.pullFailure(id) : undefined;
    const modelWait = planned.status === "READY" && row ? scaler?.modelWait(row) : undefined;
    return {
      id,
      ...entry.spec,
      url: `${this.ctx().url}/v2/${id}`,
      type: entry.spec.type ?? "queue",
      ...(entry.spec.type === "lb" ? { lbUrl: lbEndpointUrl(this.ctx().url, id) } : {}),
      // What its workers got, once they hold GPUs; before, the type a worker would get first.
      allocatedGpuType: workers.find((w) => w.gpuType)?.gpuType ?? planned.allocatedGpuType,
      ...(workers.length > 0 ? { workers } : {}),
      // Workers that wait for a free GPU, for the models it names, or for an image that could not be pulled: the
      // endpoint waits, and says for what.
      status: wait || pull || modelWait ? "WAITING" : planned.status,
      statusReason: modelWait ?? (wait ? gpuWaitMessage(wait) : (pull ?? planned.statusReason)),
      ...(ping ? { ping } : {}),
      createdAt: row?.createdAt ?? planned.row.createdAt,
      updatedAt: row?.updatedAt ?? planned.row.updatedAt,
    };
  }

  /** Why a REST endpoint cannot run (its record's statusReason); undefined when it can, or is not one. */
  statusReason(id: string): string | undefined {
    const entry = this.specs.get(id);
    return (entry && this.plan(id, entry).statusReason) ?? undefined;
  }

  /**
   * What a REST endpoint's image is allowed in its containers beyond the sandbox's defaults, from its template
   * (docs/provider-workers.md, "What the container gets"); empty for svc code and for other endpoints.
   */
  containerAllowances(id: string): ContainerAllowances | undefined {
    const entry = this.specs.get(id);
    const image = entry && this.prebuiltImage(entry);
    const template = image ? this.m.store.template(entry.spec.templateId) : undefined;
    if (!template) return undefined;
    return { containerDiskInGb: template.containerDiskInGb, ...(template.shmSizeMb ? { shmSizeMb: template.shmSizeMb } : {}) };
  }

  /** The registry auth a REST endpoint's image is pulled with (its template's), when it names one of its owner's. */
  registryAuthOf(id: string): RegistryAuthRecord | undefined {
    const entry = this.specs.get(id);
    const image = entry && this.prebuiltImage(entry);
    const authId = image ? this.m.store.template(entry.spec.templateId)?.containerRegistryAuthId : undefined;
    return authId ? ownRegistryAuth(this.m, entry!.userId, authId) : undefined;
  }

  forgetPing(id: string): void {
    this.pings.delete(id);
  }

  /** Write the planned row where the engine and scaler see it. */
  async apply(id: string): Promise<void> {
    const ctx = this.ctx();
    const entry = this.specs.get(id)!;
    const { row } = this.plan(id, entry);
    // Unchanged revision keeps updatedAt stable for the record; the engine upserts either way.
    await ctx.engine.write([{ op: "upsertEndpoint", endpoint: row }]);
    ctx.endpoints.upsert(row);
    ctx.scaler()?.reconcile();
  }

  /** After a restart, or when an app endpoint a template points at was redeployed: re-plan every REST endpoint. */
  async refreshAll(): Promise<void> {
    for (const id of this.specs.keys()) {
      await this.lookUpImage(id);
      const current = this.ctx().endpoints.get(id);
      const { row } = this.plan(id, this.specs.get(id)!);
      if (!current || current.revision !== row.revision || current.resource.workersMax !== row.resource.workersMax) await this.apply(id);
    }
  }
}

function ownTemplate(m: ManagementContext, p: Principal, id: string): TemplateRecord | undefined {
  const t = m.store.template(id);
  return t && t.userId === p.userId ? t : undefined;
}

function ownVolume(m: ManagementContext, p: Principal, id: string): VolumeRecord | undefined {
  const v = m.store.volume(id);
  return v && v.userId === p.userId ? v : undefined;
}

/**
 * A template as a create or update body makes it (`before`: the template updated): every failure, the registry
 * auth it names among them when it is not one of the user's. Pure.
 */
export function planTemplate(
  body: Record<string, unknown>,
  before: TemplateRecord | undefined,
  ownsRegistryAuth: (id: string) => boolean,
): { template?: Omit<TemplateRecord, "id" | "userId" | "createdAt">; errors: string[] } {
  const errors = validate(before ? SCHEMAS.UpdateTemplateRequest : SCHEMAS.CreateTemplateRequest, body);
  if (errors.length > 0) return { errors };
  if (body.env !== undefined) errors.push(...reservedEnvProblems(Object.keys(body.env as object), "$.env."));
  const shm = body.shmSizeMb as number | null | undefined;
  if (typeof shm === "number" && (shm < 64 || shm > 262144)) errors.push("$.shmSizeMb: must be 64 to 262144 (MiB), or null");
  const auth = body.containerRegistryAuthId as string | null | undefined;
  if (typeof auth === "string" && !ownsRegistryAuth(auth)) errors.push(`$.containerRegistryAuthId: no container registry auth "${auth}" of yours`);
  if (errors.length > 0) return { errors };
  return {
    template: {
      name: (body.name as string | undefined) ?? before!.name,
      imageName: (body.imageName as string | undefined) ?? before!.imageName,
      env: (body.env as Record<string, string> | undefined) ?? before?.env ?? {},
      containerDiskInGb: (body.containerDiskInGb as number | undefined) ?? before?.containerDiskInGb ?? LIMITS.containerDiskInGbDefault,
      shmSizeMb: shm === undefined ? (before?.shmSizeMb ?? null) : shm,
      containerRegistryAuthId: auth === undefined ? (before?.containerRegistryAuthId ?? null) : auth,
    },
    errors,
  };
}

export async function templateRoute(
  m: ManagementContext,
  p: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  id: string | undefined,
  /** A template changed: the endpoints made from it are planned again. */
  changed: () => Promise<void> = async () => undefined,
): Promise<void> {
  const method = req.method ?? "GET";
  requireAccess(p, "templates", method !== "GET");
  if (method === "GET") {
    req.resume();
    if (id === undefined) return sendJson(res, m.store.templates(p.userId).map(templateJson));
    const t = ownTemplate(m, p, id);
    if (!t) throw new HttpProblem(404, `No template ${id}`);
    return sendJson(res, templateJson(t));
  }
  if (method === "POST" && id === undefined) {
    requireDeploy(p, "Creating a template");
    const body = await readObjectBody(req);
    const plan = planTemplate(body, undefined, (auth) => ownRegistryAuth(m, p.userId, auth) !== undefined);
    if (!plan.template) throw new HttpProblem(422, "The template is not valid", { errors: plan.errors });
    const t: TemplateRecord = { id: `tpl${newId(6)}`, userId: p.userId, ...plan.template, createdAt: Date.now() };
    await m.store.putTemplate(t);
    return sendJson(res, templateJson(t), 201);
  }
  if (method === "PATCH" && id !== undefined) {
    const before = ownTemplate(m, p, id);
    if (!before) {
      req.resume();
      throw new HttpProblem(404, `No template ${id}`);
    }
    requireDeploy(p, "Changing a template");
    const body = await readObjectBody(req);
    const plan = planTemplate(body, before, (auth) => ownRegistryAuth(m, p.userId, auth) !== undefined);
    if (!plan.template) throw new HttpProblem(422, "The template update is not valid", { errors: plan.errors });
    const t: TemplateRecord = { ...before, ...plan.template };
    await m.store.putTemplate(t);
    await changed();
    return sendJson(res, templateJson(t));
  }
  if (method === "DELETE" && id !== undefined) {
    req.resume();
    if (!ownTemplate(m, p, id)) throw new HttpProblem(404, `No template ${id}`);
    await m.store.deleteTemplate(id);
    res.writeHead(204);
    res.end();
    return;
  }
  req.resume();
  throw new HttpProblem(405, `${method} is not allowed here`, { headers: { allow: id === undefined ? "GET, POST" : "GET, PATCH, DELETE" } });
}

/**
 * An endpoint that `svc deploy` (or `svc dev`) made, as the endpoint list shows it beside REST-created ones: the
 * same fields where they mean the same, its app and environment, and `source: "deploy"`. It has no template (its
 * code is the app's build). Pure.
 */
export function deployedEndpointRecord(row: EndpointRow, serviceUrl: string) {
  const r = row.resource;
  return {
    id: row.id,
    name: row.name,
    templateId: "",
    source: "deploy" as const,
    app: row.app,
    environment: row.env,
    url: `${serviceUrl}/v2/${row.id}`,
    type: row.type,
    ...(row.type === "lb" ? { lbUrl: lbEndpointUrl(serviceUrl, row.id) } : {}),
    computeType: r.computeType,
    gpuTypeIds: r.gpuTypeIds,
    // A manifest built before gpuCount existed means one GPU per worker.
    gpuCount: r.computeType === "GPU" ? (r.gpuCount ?? 1) : 0,
    workersMin: r.workersMin,
    workersMax: r.workersMax,
    idleTimeout: r.idleTimeout,
    executionTimeoutMs: r.executionTimeoutMs,
    env: r.env,
    networkVolumeId: r.volume,
    models: r.models ?? [],
    status: "READY" as const,
    statusReason: null,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

/**
 * 422 for GPUs this host can never give one worker (more than it has of every listed type, or none of them),
 * where the service knows its GPUs: waiting could not help.
 */
function refuseBeyondHost(rest: RestEndpoints, spec: RestEndpointSpec): void {
  const capacity = rest.gpuCapacity();
  if (!capacity || spec.computeType !== "GPU") return;
  const c = capacity({ typeIds: spec.gpuTypeIds.length > 0 ? spec.gpuTypeIds : ["ANY"], count: spec.gpuCount });
  if (!c.satisfiable) {
    throw new HttpProblem(422, "This host does not have the GPUs the endpoint asks for", {
      errors: [
        `$.${spec.gpuCount > 1 ? "gpuCount" : "gpuTypeIds"}: ${spec.gpuCount} GPU(s) of ${spec.gpuTypeIds.join(", ") || "any type"} per worker, more than this host has (${c.reason})`,
      ],
    });
  }
}

/**
 * What a deployed endpoint's workers got of this host's GPUs, and whether some wait for one (the record then says
 * WAITING, and why).
 */
function deployedGpuState(ctx: ManagementDeps, id: string) {
  const scaler = ctx.scaler();
  const workers = scaler?.workerGpus(id) ?? [];
  const wait = scaler?.gpuWait(id);
  const row = ctx.endpoints.get(id);
  const modelWait = row ? scaler?.modelWait(row) : undefined;
  return {
    ...(workers.length > 0 ? { allocatedGpuType: workers.find((w) => w.gpuType)?.gpuType ?? null, workers } : {}),
    ...(wait ? { status: "WAITING" as const, statusReason: gpuWaitMessage(wait) } : {}),
    // Its models being fetched (or failed): said before a GPU wait, which follows it.
    ...(modelWait ? { status: "WAITING" as const, statusReason: modelWait } : {}),
  };
}

/**
 * An endpoint's record with how its workers fare: those that failed to start recently and the last such error
 * (null: none since the start), and a crash loop its workers are in (statusReason says it too).
 */
function withHealth<R extends { statusReason: string | null }>(ctx: ManagementDeps, id: string, record: R) {
  const loop = ctx.scaler()?.crashLoop(id);
  const reason = loop ? crashLoopMessage(loop, Date.now()) : undefined;
  return {
    ...record,
    unhealthyWorkers: ctx.startFailures.unhealthy(id),
    lastStartError: ctx.startFailures.last(id),
    ...(loop ? { crashLoop: loop, statusReason: record.statusReason ? `${record.statusReason}; ${reason}` : reason! } : {}),
  };
}

export async function endpointRoute(
  ctx: ManagementDeps,
  m: ManagementContext,
  rest: RestEndpoints,
  p: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  id: string | undefined,
): Promise<void> {
  const method = req.method ?? "GET";
  requireAccess(p, "endpoints", method !== "GET");
  const lookup = { template: (t: string) => ownTemplate(m, p, t), volume: (v: string) => ownVolume(m, p, v) };
  const own = (endpointId: string) => {
    const entry = rest.specs.get(endpointId);
    if (!entry || entry.userId !== p.userId) throw new HttpProblem(404, `No endpoint ${endpointId}`);
    return entry;
  };
  if (id === undefined) {
    if (method === "GET") {
      req.resume();
      // One list of all the user's endpoints, as users of the hosted service expect: REST-created ones and those
      // `svc deploy` made (with their app and environment).
      const created = [...rest.specs.entries()]
        .filter(([, e]) => e.userId === p.userId)
        .map(([eid]) => ({ ...withHealth(ctx, eid, rest.record(eid)), source: "rest" as const }));
      const deployed = [...ctx.endpoints.values()]
        .filter((e) => e.userId === p.userId && !rest.specs.has(e.id))
        .map((e) => withHealth(ctx, e.id, { ...deployedEndpointRecord(e, ctx.url), ...deployedGpuState(ctx, e.id) }));
      const all: Array<{ createdAt: number; id: string }> = [...created, ...deployed];
      return sendJson(
        res,
        all.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id)),
      );
    }
    if (method !== "POST") throw new HttpProblem(405, `${method} is not allowed here; use GET or POST`, { headers: { allow: "GET, POST" } });
    requireDeploy(p, "Creating an endpoint");
    const body = await readObjectBody(req);
    const plan = planEndpointSpec(body, undefined, lookup);
    if (!plan.spec) throw new HttpProblem(422, "The endpoint request is not valid", { errors: plan.errors });
    refuseBeyondHost(rest, plan.spec);
    const newEndpointId = newId(8);
    rest.specs.set(newEndpointId, { userId: p.userId, spec: plan.spec, generation: 0 });
    await m.store.putRestEndpoint(newEndpointId, p.userId, plan.spec, 0);
    await rest.lookUpImage(newEndpointId);
    await rest.apply(newEndpointId);
    await rest.checkPing(newEndpointId);
    return sendJson(res, withHealth(ctx, newEndpointId, rest.record(newEndpointId)), 201);
  }
  if (method === "GET") {
    req.resume();
    // An endpoint `svc deploy` made is read here too (changed through its app's deploys, not PATCH).
    const deployed = rest.specs.has(id) ? undefined : ctx.endpoints.get(id);
    if (deployed && deployed.userId === p.userId)
      return sendJson(res, withHealth(ctx, id, { ...deployedEndpointRecord(deployed, ctx.url), ...deployedGpuState(ctx, id) }));
    own(id);
    return sendJson(res, withHealth(ctx, id, rest.record(id)));
  }
  if (method === "PATCH") {
    const entry = own(id);
    const body = await readObjectBody(req);
    const chooses = CODE_SETTINGS.filter((k) => Object.hasOwn(body, k));
    if (chooses.length > 0) requireDeploy(p, `Changing an endpoint's ${chooses.join(", ")}`);
    const plan = planEndpointSpec(body, entry.spec, lookup);
    if (!plan.spec) throw new HttpProblem(422, "The endpoint update is not valid", { errors: plan.errors });
    if (["gpuTypeIds", "gpuCount", "computeType"].some((k) => k in body)) refuseBeyondHost(rest, plan.spec);
    const restart = needsRestart(entry.spec, plan.spec);
    const next = { userId: entry.userId, spec: plan.spec, generation: entry.generation + (restart ? 1 : 0) };
    rest.specs.set(id, next);
    await m.store.putRestEndpoint(id, p.userId, plan.spec, next.generation);
    await rest.lookUpImage(id);
    // A new check on every update: the image may have been rebuilt under the same name.
    rest.forgetPing(id);
    await rest.apply(id);
    await rest.checkPing(id);
    res.setHeader("svc-workers-restarted", restart ? "true" : "false");
    return sendJson(res, withHealth(ctx, id, rest.record(id)));
  }
  if (method === "DELETE") {
    req.resume();
    own(id);
    // Configuration, job history and logs go with it, and the scaler drains its workers.
    rest.specs.delete(id);
    rest.forgetPing(id);
    await m.store.deleteRestEndpoint(id);
    ctx.endpoints.remove(id);
    await ctx.engine.dropEndpoint(id);
    ctx.scaler()?.reconcile();
    res.writeHead(204);
    res.end();
    return;
  }
  throw new HttpProblem(405, `${method} is not allowed here; use GET, PATCH or DELETE`, { headers: { allow: "GET, PATCH, DELETE" } });
}
