// REST endpoints' settings and generations (restart counters), kept in memory and loaded from the store at start,
// and what their plans need to know from the rest of the service: the host's GPUs, the driver's images and each
// prebuilt image's /ping check. Applying a plan writes the endpoint's row where the engine and scaler see it. REST
// endpoints are stored in the endpoints table with app "" and env "" (never part of an app) plus their settings as
// given in `rest_endpoints`.

import type { EndpointRow } from "../store/types.js";
import type { ManagementContext, ManagementDeps } from "./context.js";
import type { ContainerAllowances } from "../../drivers/types.js";
import type { RegistryAuthRecord, RestEndpointSpec, TemplateRecord } from "./store.js";
import { ownRegistryAuth } from "./registry-auths.js";
import type { PingCheck } from "../lb/ping.js";
import { lbEndpointUrl } from "../lb/address.js";
import type { GpuRequest } from "../../gpus/allocate.js";
import { gpuWaitMessage } from "../../gpus/host.js";
import { CODE_IMAGE_PREFIX, type EndpointRecord, IMAGE_PING_WAIT_MS, type ImageSupport, planEndpointRow } from "./endpoint-plan.js";

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
