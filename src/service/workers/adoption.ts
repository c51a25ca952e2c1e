// Taking over workers the scaler did not start: those an earlier run of the service left running (the driver
// finds them at start; those that ended meanwhile have their jobs queued again at once), and, while replicas share
// a database, those another replica started that call this one (ended by this one once they fall silent). An
// adopted worker is run as one the scaler started: its GPUs and models held again, its addresses given, its exit
// watched.

import type { AdoptedWorker, WorkerExit, WorkerHandle } from "../../drivers/types.js";
import type { EndpointRow } from "../store/types.js";
import { gpuRequestOf } from "../../gpus/allocate.js";
import { cardMatches } from "svc/internal";
import { errorMessage } from "../../errors.js";
import type { ManagedWorker } from "./managed-worker.js";
import type { ScalerDeps } from "./scaler-deps.js";

/** What adoption needs of the scaler that runs the workers it adopts. */
export interface AdoptionHost {
  readonly deps: ScalerDeps;
  readonly managed: Map<string, ManagedWorker>;
  readonly closed: boolean;
  revisionOf(endpoint: EndpointRow): string;
  /** Usage counts it from now on. */
  lifeStarted(m: ManagedWorker, userId: string | undefined): void;
  /** The load balancer reaches it where its driver says. */
  offerAddresses(workerId: string, handle: WorkerHandle): void;
  /** Its end is handled as any worker's. */
  watchExit(m: ManagedWorker): void;
}

export class WorkerAdoption {
  constructor(private readonly host: AdoptionHost) {}

  /** The workers an earlier run of the service left, as the driver finds them. */
  async leftovers(): Promise<void> {
    let found: AdoptedWorker[] = [];
    try {
      found = (await this.host.deps.driver.adopt?.((endpointId, workerId, line) => this.host.deps.onLog(endpointId, workerId, line))) ?? [];
    } catch (err) {
      this.host.deps.onEvent?.(`could not look for workers an earlier run left: ${errorMessage(err)}`);
    }
    const endpoints = new Map([...this.host.deps.endpoints()].map((e) => [e.id, e]));
    for (const adopted of found) {
      const endpoint = endpoints.get(adopted.endpointId);
      if (adopted.ended) {
        this.goneWhileDown(adopted, endpoint?.name ?? adopted.endpointId);
        continue;
      }
      const m: ManagedWorker = {
        id: adopted.handle.workerId,
        endpointId: adopted.endpointId,
        handle: adopted.handle,
        stopping: false,
        probe: false,
        adopted: true,
        startedAt: Date.now(),
      };
      this.host.managed.set(m.id, m);
      this.host.deps.engine.manageWorker(m.id, m.endpointId, { revision: adopted.revision ?? "" });
      this.holdAdopted(m.id, adopted.endpointId, adopted.gpus ?? [], endpoint);
      // The models its endpoint names stay in the host's cache while it runs, as for a worker this run started: the
      // earlier run mounted the cache into it, and an eviction now would pull files out from under a running model.
      const models = endpoint?.resource.models ?? [];
      if (models.length > 0) this.host.deps.models?.hold(m.id, models);
      this.host.lifeStarted(m, endpoint?.userId);
      // Where the driver says it is reachable, as for a worker it starts: the address it registers again may be
      // its own view (a Pod's or a container's loopback), not one the service reaches.
      this.host.offerAddresses(m.id, adopted.handle);
      this.host.watchExit(m);
      this.host.deps.onEvent?.(`adopted worker ${m.id} of endpoint ${endpoint?.name ?? m.endpointId}, left running by an earlier run of the service`, {
        endpoint: m.endpointId,
        worker: m.id,
      });
      // Its endpoint is gone: it drains like any worker of a removed endpoint (reconcile does that).
    }
  }

  /** The GPUs an adopted worker was given by the earlier run: held again, so no new worker is put on them. */
  private holdAdopted(workerId: string, endpointId: string, uuids: readonly string[], endpoint: EndpointRow | undefined): void {
    const gpus = this.host.deps.gpus;
    if (!gpus || uuids.length === 0) return;
    const names = new Map(gpus.devices().map((g) => [g.uuid, g]));
    const request = endpoint ? gpuRequestOf(endpoint.resource) : undefined;
    const first = names.get(uuids[0]!);
    const typeId = (first && request?.typeIds.find((t) => cardMatches(t, first.name) || first.typeIds.includes(t))) ?? null;
    try {
      gpus.hold(workerId, endpointId, uuids, typeId);
    } catch (err) {
      this.host.deps.onEvent?.(`adopted worker ${workerId} says it holds GPUs another adopted worker holds: ${errorMessage(err)}`);
    }
  }

  /**
   * A worker of the earlier run that is gone (it died while no service watched, or the driver removed it): it
   * neither counts nor needs stopping, but the jobs it held go back to the queue now, as any worker's would,
   * instead of a lease period after the restart.
   */
  private goneWhileDown(adopted: AdoptedWorker, endpointName: string): void {
    const id = adopted.handle.workerId;
    this.host.deps.engine.manageWorker(id, adopted.endpointId);
    this.host.deps.engine.workerGone(id);
    void this.host.deps
      .revokeWorkerKeys(id, adopted.endpointId)
      .catch((err: unknown) => this.host.deps.onEvent?.(`could not revoke the keys of worker ${id}: ${errorMessage(err)}`));
    this.host.deps.onEvent?.(`worker ${id} of endpoint ${endpointName}, started by an earlier run of the service, is gone; the jobs it held are queued again`, {
      endpoint: adopted.endpointId,
      worker: id,
    });
  }

  /**
   * A worker this replica does not manage called it (a take or heartbeat may come before any register: the
   * service answers those for a worker it does not know yet). While replicas share a database it was started by
   * another one: adopt it, as of the revision it says it runs, else the endpoint's current one.
   */
  noticed(endpointId: string, workerId: string, revision?: string): void {
    if (!this.host.deps.adoptRegistered || this.host.closed || this.host.managed.has(workerId)) return;
    const endpoint = [...this.host.deps.endpoints()].find((e) => e.id === endpointId);
    if (!endpoint || endpoint.type !== "queue") return;
    this.adoptRemote(endpoint, workerId, revision ?? this.host.revisionOf(endpoint));
  }

  private adoptRemote(endpoint: EndpointRow, workerId: string, revision: string): void {
    let gone!: (exit: WorkerExit) => void;
    const exited = new Promise<WorkerExit>((resolve) => (gone = resolve));
    const drain = () => this.host.deps.engine.drain(workerId);
    const handle: WorkerHandle = {
      workerId,
      exited,
      stop: (graceMs) => {
        drain();
        return Promise.race([exited, new Promise<WorkerExit>((resolve) => setTimeout(() => resolve({ code: null, signal: null }), graceMs).unref())]);
      },
      // Another machine's process: the protocol's drain is all this replica can do.
      kill: drain,
    };
    const m: ManagedWorker = {
      id: workerId,
      endpointId: endpoint.id,
      handle,
      stopping: false,
      probe: false,
      adopted: true,
      startedAt: Date.now(),
      remoteGone: gone,
    };
    this.host.managed.set(workerId, m);
    this.host.deps.engine.manageWorker(workerId, endpoint.id, { revision });
    // Its usage is this replica's from now on (the one that started it accounted it up to its last flush).
    this.host.lifeStarted(m, endpoint.userId);
    this.host.watchExit(m);
    this.host.deps.onEvent?.(`adopted worker ${workerId} of endpoint ${endpoint.name}, started by another replica`, {
      endpoint: endpoint.id,
      worker: workerId,
    });
  }

  /** Adopted workers of other replicas that stopped talking to the service: gone (their jobs requeue). */
  endSilentRemotes(now: number): void {
    const silentMs = this.host.deps.adoptRegistered?.silentMs;
    if (silentMs === undefined) return;
    for (const m of this.host.managed.values()) {
      if (!m.remoteGone) continue;
      const entry = this.host.deps.engine.workers.get(m.id);
      if (!entry || (entry.polling === 0 && now - entry.lastSeen > silentMs)) m.remoteGone({ code: null, signal: null });
    }
  }
}
