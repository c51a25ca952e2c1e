// The GPUs of the service's own host and who holds them: the inventory (read at start, sampled every few seconds
// for utilization and memory, and again on demand), the holds (GPU UUID -> the worker given it), and the
// endpoints waiting for a GPU, with why. The scaler asks it which waiting endpoint starts a worker next and on
// which GPUs (allocate.ts decides; this keeps the state), and tells it when a worker ends.
// Only drivers whose workers run on this host use it (process, Docker); Swarm and Kubernetes schedulers place GPUs.

import { allocateGpus, gpuRequestOf, pickWaiting, type Allocation, type GpuRequest, type WaitingEndpoint } from "./allocate.js";
import { hostGpuTypeIds, type GpuDevice, type GpuInventory } from "./inventory.js";
import { cardMatches } from "svc/internal";
import { errorMessage } from "../errors.js";

export const NO_GPUS: GpuInventory = { gpus: [], driverVersion: null, cudaVersion: null, source: "none" };

export interface GpuHolder {
  workerId: string;
  endpointId: string;
  /** The type of the endpoint's list it was allocated as (null: rebuilt after a restart without it). */
  typeId: string | null;
}

export interface GpuWait {
  /** When it started waiting, or was last served (so endpoints take turns). */
  since: number;
  /** "HOPPER_141: 2 of 2 in use; ADA_24: none on this host". */
  reason: string;
  /** Workers it wants and could not start. */
  workers: number;
  /** False: this host never has enough GPUs of its types. */
  satisfiable: boolean;
}

/** An endpoint that wants to start `workers` workers that each need `request`. */
export interface GpuWant {
  endpointId: string;
  request: GpuRequest;
  workers: number;
  /** It has fewer workers than its workersMin: it goes first. */
  belowMin: boolean;
}

export interface GpuGrant {
  endpointId: string;
  workerId: string;
  typeId: string;
  uuids: string[];
}

/** One GPU as the read route and /health show it. */
export interface GpuView {
  index: number;
  uuid: string;
  name: string;
  typeIds: string[];
  memoryTotalMiB: number;
  memoryUsedMiB: number | null;
  utilizationPercent: number | null;
  migMode: string | null;
  holder: GpuHolder | null;
}

export interface HostGpusOptions {
  /** Read the inventory (nvidia-smi on PATH by default: readInventory). */
  read(): Promise<GpuInventory>;
  /** SVC_GPU_TYPES: the ids this host offers, when the operator says so. */
  override?: readonly string[];
  /** How often the inventory is read again for utilization and memory (default 5 s; 0: never). */
  sampleMs?: number;
  log?(message: string): void;
  /** The GPUs (or their type ids) changed after a read. */
  onChange?(inventory: GpuInventory): void;
}

export class HostGpus {
  private current: GpuInventory = NO_GPUS;
  private lastError: string | undefined;
  private readonly holders = new Map<string, GpuHolder>();
  private readonly waits = new Map<string, GpuWait>();
  private sampler?: NodeJS.Timeout;
  private reading?: Promise<GpuInventory>;

  constructor(private readonly options: HostGpusOptions) {}

  get inventory(): GpuInventory {
    return this.current;
  }

  /** Why the last read failed (nvidia-smi without a driver, a GPU fallen off the bus); undefined when it worked. */
  get readError(): string | undefined {
    return this.lastError;
  }

  /**
   * Whether GPU workers get GPUs of their own: the host has GPUs nvidia-smi lists. Without (a laptop, a host whose
   * nvidia-smi fails), GPU endpoints' workers start as before, unassigned.
   */
  get assigning(): boolean {
    return this.current.gpus.length > 0;
  }

  /** Read the inventory now (one read at a time); a failed read keeps the last one and says why. */
  refresh(): Promise<GpuInventory> {
    this.reading ??= this.options
      .read()
      .then(
        (inventory) => {
          const before = this.current;
          this.current = inventory;
          if (this.lastError) this.options.log?.("nvidia-smi answers again");
          this.lastError = undefined;
          const ids = (inv: GpuInventory) => JSON.stringify(inv.gpus.map((g) => [g.uuid, g.name, g.migMode]));
          if (ids(before) !== ids(inventory)) this.options.onChange?.(inventory);
          return inventory;
        },
        (err: unknown) => {
          const message = errorMessage(err);
          if (this.lastError !== message) this.options.log?.(`could not read this host's GPUs: ${message}`);
          this.lastError = message;
          return this.current;
        },
      )
      .finally(() => (this.reading = undefined));
    return this.reading;
  }

  /** Sample utilization and memory every `sampleMs` (only on a host with GPUs: elsewhere there is nothing to see). */
  startSampling(): void {
    const every = this.options.sampleMs ?? 5_000;
    if (every <= 0 || this.sampler) return;
    this.sampler = setInterval(() => {
      if (this.assigning || this.lastError) void this.refresh();
    }, every);
    this.sampler.unref();
  }

  close(): void {
    if (this.sampler) clearInterval(this.sampler);
    this.sampler = undefined;
  }

  /**
   * The GPUs as the allocator matches them: each with the ids it satisfies, plus the operator's override ids that
   * none of them satisfies by its card (nvidia-smi names the card in a way no list knows): those apply to all.
   */
  devices(): Array<GpuDevice & { typeIds: string[] }> {
    const gpus = this.current.gpus;
    const extra = (this.options.override ?? []).filter((id) => !gpus.some((g) => cardMatches(id, g.name)));
    return gpus.map((g) => ({ ...g, typeIds: [...g.typeIds, ...extra.filter((id) => !g.typeIds.includes(id))] }));
  }

  /** The type ids this host offers (the host data center's list): the override when set, else what its GPUs are. */
  typeIds(): string[] {
    return hostGpuTypeIds(this.current, this.options.override);
  }

  holds(): Map<string, string> {
    return new Map([...this.holders].map(([uuid, h]) => [uuid, h.workerId]));
  }

  /** Give `uuids` to a worker. A GPU another worker holds is never given twice: that throws. */
  hold(workerId: string, endpointId: string, uuids: readonly string[], typeId: string | null): void {
    const taken = uuids.filter((u) => this.holders.has(u) && this.holders.get(u)!.workerId !== workerId);
    if (taken.length > 0) throw new Error(`GPU ${taken.join(", ")} is held by worker ${this.holders.get(taken[0]!)!.workerId}`);
    for (const uuid of uuids) this.holders.set(uuid, { workerId, endpointId, typeId });
  }

  /** The worker ended: its GPUs are free. */
  release(workerId: string): string[] {
    const freed: string[] = [];
    for (const [uuid, h] of this.holders) {
      if (h.workerId === workerId) {
        this.holders.delete(uuid);
        freed.push(uuid);
      }
    }
    return freed;
  }

  /** The GPUs a worker holds, in index order, and the type they were allocated as. */
  heldBy(workerId: string): { uuids: string[]; typeId: string | null } {
    const uuids = this.devices()
      .filter((g) => this.holders.get(g.uuid)?.workerId === workerId)
      .map((g) => g.uuid);
    // A held GPU the inventory no longer lists (it fell off the bus) still counts as the worker's.
    for (const [uuid, h] of this.holders) if (h.workerId === workerId && !uuids.includes(uuid)) uuids.push(uuid);
    const typeId = uuids.length > 0 ? this.holders.get(uuids[0]!)!.typeId : null;
    return { uuids, typeId };
  }

  /** What one worker of `request` would get now, against the current holds (no fairness: a release's probe). */
  allocate(request: GpuRequest): Allocation {
    return allocateGpus(this.devices(), this.holds(), request);
  }

  /** Whether the host could ever serve `request` (it has enough GPUs of one of its types), and what it has. */
  capacity(request: GpuRequest): { satisfiable: boolean; reason: string } {
    const a = allocateGpus(this.devices(), new Map(), request);
    return a.kind === "allocated" ? { satisfiable: true, reason: "" } : { satisfiable: a.satisfiable, reason: a.reason };
  }

  /**
   * Which of the endpoints that want GPU workers start them now, each worker with its GPUs (held from here on
   * under the worker id `newWorkerId` gives); the others wait, with the reason. Endpoints below workersMin first,
   * then the one waiting longest; an endpoint that got a worker goes to the back of the line, so none starves.
   * Endpoints absent from `wants` wait no longer.
   */
  assign(wants: readonly GpuWant[], now: number, newWorkerId: () => string): GpuGrant[] {
    const grants: GpuGrant[] = [];
    if (!this.assigning) return grants;
    const left = new Map(wants.map((w) => [w.endpointId, w.workers]));
    const since = new Map(wants.map((w) => [w.endpointId, this.waits.get(w.endpointId)?.since ?? now]));
    const devices = this.devices();
    for (;;) {
      const waiting: WaitingEndpoint[] = wants
        .filter((w) => left.get(w.endpointId)! > 0)
        .map((w) => ({ endpointId: w.endpointId, request: w.request, since: since.get(w.endpointId)!, belowMin: w.belowMin }));
      const pick = pickWaiting(waiting, devices, this.holds());
      if (!pick) break;
      const workerId = newWorkerId();
      this.hold(workerId, pick.endpointId, pick.allocation.uuids, pick.allocation.typeId);
      grants.push({ endpointId: pick.endpointId, workerId, typeId: pick.allocation.typeId, uuids: pick.allocation.uuids });
      left.set(pick.endpointId, left.get(pick.endpointId)! - 1);
      // Served: the others' turn next (its own wait starts again from now).
      since.set(pick.endpointId, now + grants.length / 1000);
    }
    const wanting = new Set<string>();
    for (const w of wants) {
      const count = left.get(w.endpointId)!;
      if (count <= 0) continue;
      wanting.add(w.endpointId);
      const a = allocateGpus(devices, this.holds(), w.request);
      const reason = a.kind === "waiting" ? a.reason : "the free GPUs are kept for an endpoint that waited longer";
      this.waits.set(w.endpointId, { since: since.get(w.endpointId)!, reason, workers: count, satisfiable: a.kind === "allocated" || a.satisfiable });
    }
    for (const id of this.waits.keys()) if (!wanting.has(id)) this.waits.delete(id);
    return grants;
  }

  /** Why an endpoint's workers wait for a GPU, and how many; undefined when none waits. */
  waiting(endpointId: string): GpuWait | undefined {
    return this.waits.get(endpointId);
  }

  /** Every GPU of the host with its holder, utilization and memory as last sampled. */
  view(): GpuView[] {
    const views: GpuView[] = this.devices().map((g) => ({
      index: g.index,
      uuid: g.uuid,
      name: g.name,
      typeIds: g.typeIds,
      memoryTotalMiB: g.memoryTotalMiB,
      memoryUsedMiB: g.memoryUsedMiB,
      utilizationPercent: g.utilizationPercent,
      migMode: g.migMode,
      holder: this.holders.get(g.uuid) ?? null,
    }));
    return views;
  }
}

/** "waiting for a GPU (HOPPER_141: 2 of 2 in use)": what an endpoint's record and /health say. Pure. */
export function gpuWaitMessage(wait: Pick<GpuWait, "reason" | "satisfiable">): string {
  return wait.satisfiable ? `waiting for a GPU (${wait.reason})` : `waiting for a GPU this host does not have (${wait.reason})`;
}

/**
 * The endpoints of a build whose workers this host can never give their GPUs (more than it has of every listed
 * type, or none of them), each with what the host has; none where the service does not assign GPUs here.
 */
export function gpuShortfalls(
  gpus: HostGpus | undefined,
  resources: Record<string, { computeType: "GPU" | "CPU"; gpuTypeIds: readonly string[]; gpuCount?: number }>,
): string[] {
  if (!gpus?.assigning) return [];
  return Object.entries(resources).flatMap(([name, r]) => {
    const request = gpuRequestOf(r);
    if (!request) return [];
    const c = gpus.capacity(request);
    return c.satisfiable
      ? []
      : [`endpoint "${name}" asks for ${request.count} GPU(s) of ${request.typeIds.join(", ")} per worker, more than this host has (${c.reason})`];
  });
}
