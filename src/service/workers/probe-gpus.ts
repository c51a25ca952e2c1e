// GPUs for a release's probes on a host whose GPUs the service assigns: a probe gets a free GPU, else the GPUs
// of a worker of its endpoint drained for it (the release replaces in place), else it waits ahead of every
// worker; a waiting probe may take the GPUs of probes that already proved their code starts. What each live
// worker holds, for the endpoint's record; and what a probe waits for (a GPU, its models), for its release.

import type { EndpointRow } from "../store/types.js";
import { allocateGpus, gpuRequestOf } from "../../gpus/allocate.js";
import { gpuWaitMessage } from "../../gpus/host.js";
import type { ProbeWait } from "../releases/manager.js";
import type { ManagedWorker } from "./managed-worker.js";
import type { ScalerDeps } from "./scaler-deps.js";

/** What probe placement needs of the scaler that starts and stops the workers. */
export interface ProbeGpusHost {
  readonly deps: ScalerDeps;
  readonly managed: Map<string, ManagedWorker>;
  revisionOf(endpoint: EndpointRow): string;
  workerRevision(workerId: string): string | undefined;
  /** Start a release's probe of `endpoint` through the driver, on these GPUs (none: as the endpoint asks). */
  launch(endpoint: EndpointRow, workerId: string, gpus?: string[]): void;
  drain(workerId: string): void;
  /** Stop a worker through its driver after the drain grace. */
  stopThroughDriver(m: ManagedWorker, context: string): Promise<void>;
}

export class ProbeGpus {
  constructor(private readonly host: ProbeGpusHost) {}

  /** A release's probe of `endpoint` (its row in the new build): started now, or waiting for a GPU, said so. */
  start(endpoint: EndpointRow, workerId: string): void {
    const request = this.host.deps.gpus?.assigning ? gpuRequestOf(endpoint.resource) : undefined;
    if (!request) {
      this.host.launch(endpoint, workerId);
      return;
    }
    const allocation = this.host.deps.gpus!.allocate(request);
    if (allocation.kind === "allocated") {
      this.host.deps.gpus!.hold(workerId, endpoint.id, allocation.uuids, allocation.typeId);
      this.host.launch(endpoint, workerId, allocation.uuids);
      return;
    }
    // No free GPU. Where a worker of the endpoint holds GPUs that would do, the release replaces in place: that
    // worker drains and the probe starts on its GPUs (a probe that then fails frees them for the endpoint's
    // workers again). Otherwise the probe waits for a GPU, ahead of every worker (serveWaiting).
    const m: ManagedWorker = { id: workerId, endpointId: endpoint.id, stopping: false, probe: true };
    this.host.managed.set(workerId, m);
    this.host.deps.engine.manageWorker(workerId, endpoint.id, { revision: this.host.revisionOf(endpoint), standby: true });
    const victim = this.gpuVictim(endpoint, request);
    m.awaitingGpu = { endpoint, since: Date.now(), ...(victim ? { victimId: victim } : {}) };
    const how = victim ? `worker ${victim} drains and its GPUs go to the new worker ${workerId}` : `the new worker ${workerId} waits for one`;
    this.host.deps.onEvent?.(`no free GPU for the new release of endpoint ${endpoint.name} (${allocation.reason}): ${how}`);
    this.host.deps.onLog(endpoint.id, workerId, { ts: Date.now(), stream: "log", text: `waiting for a GPU (${allocation.reason})` });
    if (victim) this.host.drain(victim);
  }

  /**
   * A worker of `endpoint` (an old revision first, the idle before the busy) whose GPUs would serve `request`
   * once freed; undefined when none would.
   */
  private gpuVictim(endpoint: EndpointRow, request: NonNullable<ReturnType<typeof gpuRequestOf>>): string | undefined {
    const gpus = this.host.deps.gpus!;
    const revision = this.host.revisionOf(endpoint);
    const claimed = new Set([...this.host.managed.values()].map((w) => w.awaitingGpu?.victimId).filter(Boolean));
    const candidates = [...this.host.managed.values()]
      .filter((w) => w.endpointId === endpoint.id && !w.probe && !claimed.has(w.id) && gpus.heldBy(w.id).uuids.length > 0)
      .sort(
        (a, b) =>
          Number(this.host.workerRevision(a.id) === revision) - Number(this.host.workerRevision(b.id) === revision) ||
          Number(a.stopping) - Number(b.stopping) ||
          this.busyness(a.id) - this.busyness(b.id),
      );
    for (const w of candidates) {
      const holds = gpus.holds();
      for (const uuid of gpus.heldBy(w.id).uuids) holds.delete(uuid);
      if (allocateGpus(gpus.devices(), holds, request).kind === "allocated") return w.id;
    }
    return undefined;
  }

  private busyness(workerId: string): number {
    return this.host.deps.engine.workers.get(workerId)?.held.size ?? 0;
  }

  /**
   * Start the probes waiting for a GPU that one is free for, those waiting for the GPUs of `freedBy` first, then
   * the longest waiting. A probe still without one, while other probes have proved their code starts (their release
   * counts their endpoints ready) on GPUs it could use: those stop and hand them over (several together where it
   * needs the GPUs of several); their endpoints get workers like any once the release switches. So the probes of one
   * release never block each other on a full host.
   */
  serveWaiting(freedBy?: string): void {
    const gpus = this.host.deps.gpus;
    if (!gpus) return;
    const waiting = [...this.host.managed.values()]
      .filter((w) => w.awaitingGpu && !w.stopping)
      .sort((a, b) => Number(b.awaitingGpu!.victimId === freedBy) - Number(a.awaitingGpu!.victimId === freedBy) || a.awaitingGpu!.since - b.awaitingGpu!.since);
    for (const p of waiting) {
      const { endpoint, victimId } = p.awaitingGpu!;
      const request = gpuRequestOf(endpoint.resource)!;
      const allocation = gpus.allocate(request);
      if (allocation.kind === "allocated") {
        p.awaitingGpu = undefined;
        this.host.managed.delete(p.id);
        gpus.hold(p.id, endpoint.id, allocation.uuids, allocation.typeId);
        this.host.launch(endpoint, p.id, allocation.uuids);
        continue;
      }
      // Its victim is still on its way out: its GPUs come.
      if (victimId && this.host.managed.has(victimId)) continue;
      for (const proven of this.handOverSet(request)) {
        proven.handingOver = true;
        this.host.deps.onEvent?.(`worker ${proven.id} (a release's, ready) stops to give its GPU to the new worker ${p.id} of endpoint ${endpoint.name}`);
        void this.host.stopThroughDriver(proven, " (to hand over its GPU)");
      }
    }
  }

  /**
   * The probes that proved their code starts and whose GPUs, freed together, would serve `request`: one where one
   * is enough, else as few as found (a two-GPU probe may need the GPUs of two one-GPU probes); none when even all
   * of them would not do. Pure of I/O.
   */
  private handOverSet(request: NonNullable<ReturnType<typeof gpuRequestOf>>): ManagedWorker[] {
    const gpus = this.host.deps.gpus!;
    const proven = [...this.host.managed.values()].filter(
      (w) => w.probe && !w.handingOver && w.handle && this.host.deps.probeReady?.(w.id) && gpus.heldBy(w.id).uuids.length > 0,
    );
    const fits = (set: readonly ManagedWorker[]) => {
      const holds = gpus.holds();
      for (const w of set) for (const uuid of gpus.heldBy(w.id).uuids) holds.delete(uuid);
      return allocateGpus(gpus.devices(), holds, request).kind === "allocated";
    };
    const one = proven.find((w) => fits([w]));
    if (one) return [one];
    if (!fits(proven)) return [];
    // All of them would do: drop each one the rest do without.
    const chosen = [...proven];
    for (const w of [...chosen].reverse()) {
      const without = chosen.filter((c) => c !== w);
      if (fits(without)) chosen.splice(chosen.indexOf(w), 1);
    }
    return chosen;
  }

  /** Each live worker of an endpoint that holds GPUs: which, and as which type of its list. */
  workerGpus(endpointId: string): Array<{ workerId: string; gpuType: string | null; gpus: string[] }> {
    const gpus = this.host.deps.gpus;
    if (!gpus) return [];
    return [...this.host.managed.values()]
      .filter((m) => m.endpointId === endpointId)
      .map((m) => ({ workerId: m.id, ...gpus.heldBy(m.id) }))
      .filter((w) => w.uuids.length > 0)
      .map((w) => ({ workerId: w.workerId, gpuType: w.typeId, gpus: w.uuids }));
  }

  /**
   * What a release's new worker of this endpoint waits for before it starts: a GPU (its probe holds none yet), or
   * the models its revision names (being fetched into the host's cache, or failing to be). `fetching`: the wait is
   * a download under way, which a release's start timeout does not cut short. Undefined: it waits for nothing.
   */
  probeWait(endpointId: string): ProbeWait | undefined {
    const probes = [...this.host.managed.values()].filter((w) => w.endpointId === endpointId && w.probe && !w.stopping);
    const onGpu = probes.find((w) => w.awaitingGpu);
    const request = onGpu && gpuRequestOf(onGpu.awaitingGpu!.endpoint.resource);
    if (this.host.deps.gpus && request) {
      const allocation = this.host.deps.gpus.allocate(request);
      if (allocation.kind !== "allocated") return { text: gpuWaitMessage(allocation), fetching: false };
    }
    const onModels = probes.find((w) => w.awaitingModels);
    const text = onModels && this.host.deps.models?.reason(onModels.awaitingModels!);
    return text ? { text, fetching: this.host.deps.models!.fetching(onModels!.awaitingModels!) } : undefined;
  }
}
