// Keeps each endpoint's workers between workersMin and workersMax through a WorkerDriver: starts workers when
// jobs wait (from zero on the first job), drains idle ones after idleTimeout, replaces workers of an old
// revision (rolling release) and workers that exit unexpectedly (with backoff). The decision is a pure
// function (planScaling, scaling-plan.ts); `Scaler` applies it. What kind of worker an endpoint runs is
// worker-kinds.ts; a worker's own state is the engine's worker registry's.

import type { WorkerTraceExport } from "../tracing/index.js";
import type { LogFields } from "../logging.js";
import type { AdoptedWorker, ContainerAllowances, WorkerBucket, WorkerDriver, WorkerExit, WorkerHandle, WorkerLogLine } from "../../drivers/types.js";
import { placementOf } from "../../drivers/placement.js";
import { isImagePullError, type RegistryCredentials } from "../../drivers/registry-auth.js";
import type { JobEngine, WorkerEntry } from "../engine/index.js";
import { workerState } from "../engine/index.js";
import type { EndpointRow } from "../store/types.js";
import type { ProbeWait } from "../releases/manager.js";
import { checkPingPath, type PingCheck } from "../lb/ping.js";
import { artifactUrl } from "../artifacts/route.js";
import { allocateGpus, gpuRequestOf } from "../../gpus/allocate.js";
import { gpuWaitMessage, type GpuWait, type GpuWant, type HostGpus } from "../../gpus/host.js";
import { cardMatches } from "svc/internal";
import { defaultPolicy } from "./scaling-policy.js";
import { errorMessage } from "../../errors.js";
import {
  afterDeath,
  type CrashLoop,
  type CrashLoopPolicy,
  crashLoopOf,
  DEFAULT_CRASH_LOOP,
  type DeathReason,
  deathOf,
  deathReason,
  type EndpointDeaths,
} from "./crash-loop.js";
import { planScaling } from "./scaling-plan.js";
import { imageNotice, prebuiltImageOf, providerImageOf, snapshotNotice } from "./worker-kinds.js";

export { deathOf } from "./crash-loop.js";

export interface LaunchInfo {
  endpoint: EndpointRow;
  workerId: string;
  workerToken: string;
  apiKey: string;
}

export interface ScalerDeps {
  engine: JobEngine;
  driver: WorkerDriver;
  apiUrl: string;
  /** Mint the worker's token and a key for cross-endpoint calls (revoked when the worker ends). */
  /** What an endpoint's image is allowed beyond the sandbox's defaults (its /dev/shm size, its writable root). */
  containerAllowances?(endpoint: EndpointRow): ContainerAllowances;
  /** The registry credentials an endpoint's image is pulled with (its template's registry auth), opened. */
  registryAuth?(endpoint: EndpointRow): RegistryCredentials | undefined;
  /** The heartbeat period workers are told (a provider worker's ping period). */
  heartbeatMs?: number;
  /** Where svc's workers send their runtime's spans, when the service traces (tracing/index.ts). */
  traces?: WorkerTraceExport;
  /** `bucket`: an S3 key on the endpoint's network volume, when it has one (BUCKET_* in the worker). */
  mintWorkerKeys(endpoint: EndpointRow, workerId: string): Promise<{ workerToken: string; apiKey: string; bucket?: WorkerBucket }>;
  revokeWorkerKeys(workerId: string, endpointId: string): Promise<void>;
  endpoints(): Iterable<EndpointRow>;
  /** The secrets an endpoint's workers get, and a digest that changes with their values (which rolls them). */
  secrets?(endpoint: EndpointRow): { env: Record<string, string>; digest: string };
  volume?(endpoint: EndpointRow): { id: string; sizeGb: number; path: string } | undefined;
  /**
   * The host's model cache (models/cache.ts): an endpoint that names models gets workers once every one is in it
   * (fetched now if not, outside any worker's time); its workers get it read-only, and a model a worker uses
   * stays in it while the worker runs.
   */
  models?: {
    readonly root: string;
    ready(models: readonly string[]): boolean;
    ensure(model: string): Promise<void>;
    hold(workerId: string, models: readonly string[]): void;
    release(workerId: string): void;
    /** Why workers wait for these models (being fetched, or failed), in one line; undefined: they do not. */
    reason(models: readonly string[]): string | undefined;
    /** Whether any of these is being downloaded right now (not failed, not waiting to be tried again). */
    fetching(models: readonly string[]): boolean;
  };
  /** The hub and token a driver's nodes fetch models from (drivers with `nodeModelCache`). */
  modelHub?: { url: string; token?: string };
  /** The data center of the endpoint's network volume (its workers must run there). */
  dataCenterOf?(endpoint: EndpointRow): string | undefined;
  /** A path on this machine holding the artifact recorded as `path` (another replica may have received it). */
  localArtifact?(path: string): Promise<string>;
  onLog(endpointId: string, workerId: string, line: WorkerLogLine): void;
  /** An operator message, with the endpoint and worker it is about (logging.ts). */
  onEvent?(message: string, fields?: LogFields): void;
  /**
   * The GPUs of the host the driver's workers run on (process and Docker drivers): each GPU worker is given whole
   * GPUs no other worker holds, and waits while there are none. Absent (Swarm, Kubernetes: their schedulers
   * place GPUs), or a host without GPUs: GPU workers start unassigned.
   */
  gpus?: HostGpus;
  /** Whether a release's probe has proved its code starts (its endpoint counts ready in its release). */
  probeReady?(workerId: string): boolean;
  /** A release's probe worker ended (or could not be started) before it was promoted. */
  onProbeExit?(workerId: string, exit: WorkerExit | { error: string }): void;
  /** A worker failed to start: exited before it registered, or the driver could not start it. */
  onStartFailure?(endpointId: string, workerId: string, message: string): void;
  /**
   * A worker's life, for usage records: it runs (the driver started it, or it was adopted), with the host GPUs it
   * holds; it ended. A worker the driver never started has no life.
   */
  onWorkerLife?(
    event:
      | { type: "started"; workerId: string; endpointId: string; userId?: string; gpus: { typeId: string | null; count: number } }
      | { type: "stopped"; workerId: string },
  ): void;
  /** An endpoint's first job taken by a worker started for it from none: the cold start, in ms. */
  onColdStart?(endpointId: string, ms: number): void;
  /** A worker ended unasked (or could not be started), and why. */
  onWorkerDeath?(endpointId: string, reason: DeathReason): void;
  /** When an endpoint whose workers keep dying counts as crash-looping, and how its restarts back off. */
  crashLoop?: Partial<CrashLoopPolicy>;
  /**
   * Replicas on one database: a worker that registers here though this replica did not start it (another
   * replica did, and died or stepped down) is adopted, so workersMax holds across the cluster. It is stopped by
   * draining it through the protocol, and counted gone once it stays silent `silentMs`.
   */
  adoptRegistered?: { silentMs: number };
  /** Load-balanced endpoints scale on their proxy's requests (waiting ones and in-flight ones). */
  lb?: {
    load(endpointId: string): { queued: number; inProgress: number };
    busy(workerId: string): boolean;
    /** Workers of this endpoint may take traffic now (probes promoted): serve what waits. */
    wake?(endpointId: string): void;
  };
}

/**
 * What the scaler holds for a worker it runs through its driver: the driver's handle and what the start waits for.
 * The worker's own state (revision, registered, ready, draining, addresses) is the engine's worker registry's.
 */
interface ManagedWorker {
  id: string;
  endpointId: string;
  handle?: WorkerHandle;
  stopping: boolean;
  /**
   * A release's probe: it runs the new revision and takes no job until the release switches; the scaling plan
   * neither counts nor drains it.
   */
  probe: boolean;
  /** Started by an earlier run of the service (found by the driver after a restart), or by another replica. */
  adopted?: boolean;
  /** When the driver started it (or it was adopted); unset while it starts. */
  startedAt?: number;
  /** Started by another replica: no driver handle; ended by this when it falls silent. */
  remoteGone?: (exit: WorkerExit) => void;
  /**
   * A release's probe waiting for a GPU (not started yet): for the GPUs of a worker of its endpoint drained for it
   * (`victimId`: the release replaces in place), or for any that frees.
   */
  awaitingGpu?: { endpoint: EndpointRow; since: number; victimId?: string };
  /** The models it waits for in the host's cache before it starts (fetched now); unset once they are there. */
  awaitingModels?: readonly string[];
  /** When its driver start began, after its waits (for GPUs, models): a release times its start from here. */
  launchedAt?: number;
  /** A probe that proved its code starts, stopped to give its GPU to another probe of a release. */
  handingOver?: boolean;
}

function newWorkerId(): string {
  return `w${Math.random().toString(36).slice(2, 10)}${Date.now().toString(36)}`;
}

/** A draining worker that still runs this long after it holds no job is stopped by the driver. */
const DRAIN_GRACE_MS = 5_000;

export class Scaler {
  private readonly managed = new Map<string, ManagedWorker>();
  /** Endpoints whose workers died unasked since they last proved they run (crash-loop.ts). */
  private readonly failures = new Map<string, EndpointDeaths>();
  private readonly crashPolicy: CrashLoopPolicy;
  /** Why the last start of an endpoint's worker could not pull its image, until a start does (pullFailure). */
  private readonly pullFailures = new Map<string, string>();
  private readonly coldStartPending = new Map<string, number>();
  readonly coldStarts = new Map<string, { count: number; lastMs: number | null }>();
  /** Workers the driver failed to stop, per endpoint (each also said through onEvent): they may still run. */
  readonly stopFailures = new Map<string, { count: number; lastError: string }>();
  private timer?: NodeJS.Timeout;
  private closed = false;
  private planning = false;
  private adopting = true;
  private kickPending = false;

  constructor(
    private readonly deps: ScalerDeps,
    private readonly intervalMs = 250,
  ) {
    this.crashPolicy = { ...DEFAULT_CRASH_LOOP, ...deps.crashLoop };
    // A worker of it connected, so its image was pulled: the endpoint no longer waits on a pull. Its deaths still
    // count: a worker that registers and dies at once is crash looping too; one that stays up stableMs, or a
    // completed job, ends the count.
    deps.engine.workerEvents.on("registered", ({ worker }) => this.pullFailures.delete(worker.endpointId));
  }

  /**
   * Adopt the workers an earlier process of the service left running (the driver finds them), then plan every
   * interval. Until they are counted nothing is planned: a restart never starts workers beside ones that run.
   */
  async start(settleMs = 0): Promise<void> {
    await this.adoptLeftovers();
    const begin = () => {
      if (this.closed) return;
      this.adopting = false;
      this.timer = setInterval(() => this.reconcile(), this.intervalMs);
      this.timer.unref();
      this.reconcile();
    };
    // A replica taking over a cluster first lets the workers another replica started find it and register
    // (they are adopted then): planning before would start workers beside them.
    if (settleMs > 0) setTimeout(begin, settleMs).unref();
    else begin();
  }

  private async adoptLeftovers(): Promise<void> {
    let found: AdoptedWorker[] = [];
    try {
      found = (await this.deps.driver.adopt?.((endpointId, workerId, line) => this.deps.onLog(endpointId, workerId, line))) ?? [];
    } catch (err) {
      this.deps.onEvent?.(`could not look for workers an earlier run left: ${errorMessage(err)}`);
    }
    const endpoints = new Map([...this.deps.endpoints()].map((e) => [e.id, e]));
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
      this.managed.set(m.id, m);
      this.deps.engine.manageWorker(m.id, m.endpointId, { revision: adopted.revision ?? "" });
      this.holdAdopted(m.id, adopted.endpointId, adopted.gpus ?? [], endpoint);
      // The models its endpoint names stay in the host's cache while it runs, as for a worker this run started: the
      // earlier run mounted the cache into it, and an eviction now would pull files out from under a running model.
      const models = endpoint?.resource.models ?? [];
      if (models.length > 0) this.deps.models?.hold(m.id, models);
      this.lifeStarted(m, endpoint?.userId);
      // Where the driver says it is reachable, as for a worker it starts: the address it registers again may be
      // its own view (a Pod's or a container's loopback), not one the service reaches.
      this.offerAddresses(m.id, adopted.handle);
      this.watchExit(m);
      this.deps.onEvent?.(`adopted worker ${m.id} of endpoint ${endpoint?.name ?? m.endpointId}, left running by an earlier run of the service`, {
        endpoint: m.endpointId,
        worker: m.id,
      });
      // Its endpoint is gone: it drains like any worker of a removed endpoint (reconcile does that).
    }
  }

  /** The GPUs an adopted worker was given by the earlier run: held again, so no new worker is put on them. */
  private holdAdopted(workerId: string, endpointId: string, uuids: readonly string[], endpoint: EndpointRow | undefined): void {
    const gpus = this.deps.gpus;
    if (!gpus || uuids.length === 0) return;
    const names = new Map(gpus.devices().map((g) => [g.uuid, g]));
    const request = endpoint ? gpuRequestOf(endpoint.resource) : undefined;
    const first = names.get(uuids[0]!);
    const typeId = (first && request?.typeIds.find((t) => cardMatches(t, first.name) || first.typeIds.includes(t))) ?? null;
    try {
      gpus.hold(workerId, endpointId, uuids, typeId);
    } catch (err) {
      this.deps.onEvent?.(`adopted worker ${workerId} says it holds GPUs another adopted worker holds: ${errorMessage(err)}`);
    }
  }

  /**
   * A worker of the earlier run that is gone (it died while no service watched, or the driver removed it): it
   * neither counts nor needs stopping, but the jobs it held go back to the queue now, as any worker's would,
   * instead of a lease period after the restart.
   */
  private goneWhileDown(adopted: AdoptedWorker, endpointName: string): void {
    const id = adopted.handle.workerId;
    this.deps.engine.manageWorker(id, adopted.endpointId);
    this.deps.engine.workerGone(id);
    void this.deps
      .revokeWorkerKeys(id, adopted.endpointId)
      .catch((err: unknown) => this.deps.onEvent?.(`could not revoke the keys of worker ${id}: ${errorMessage(err)}`));
    this.deps.onEvent?.(`worker ${id} of endpoint ${endpointName}, started by an earlier run of the service, is gone; the jobs it held are queued again`, {
      endpoint: adopted.endpointId,
      worker: id,
    });
  }

  /** Jobs wait on this endpoint: plan now rather than at the next interval. */
  kick(_endpointId: string): void {
    // Coalesced: a burst of submissions costs one plan, not one per job.
    if (this.kickPending || this.closed) return;
    this.kickPending = true;
    setImmediate(() => {
      this.kickPending = false;
      this.reconcile();
    });
  }

  /** The first job of an endpoint with no worker was taken: that was a cold start. */
  taken(endpointId: string): void {
    const since = this.coldStartPending.get(endpointId);
    if (since === undefined) return;
    this.coldStartPending.delete(endpointId);
    const entry = this.coldStarts.get(endpointId) ?? { count: 0, lastMs: null };
    entry.count++;
    entry.lastMs = Date.now() - since;
    this.coldStarts.set(endpointId, entry);
    this.deps.onColdStart?.(endpointId, entry.lastMs);
  }

  reconcile(): void {
    if (this.closed || this.planning || this.adopting) return;
    this.planning = true;
    try {
      const now = Date.now();
      const { engine } = this.deps;
      const liveEndpoints = new Set<string>();
      this.serveWaitingProbes();
      const gpuWants: Array<GpuWant & { endpoint: EndpointRow }> = [];
      const assigning = this.deps.gpus?.assigning ?? false;
      for (const endpoint of this.deps.endpoints()) {
        liveEndpoints.add(endpoint.id);
        if (endpoint.type !== "queue" && !this.deps.lb) continue;
        const cannot = imageNotice(this.deps.driver, endpoint);
        if (cannot) {
          // Its jobs wait in the queue; said once, where its owner looks (the endpoint's logs) and in the service's log.
          if (!this.imageNoticed.has(endpoint.id)) {
            this.imageNoticed.add(endpoint.id);
            this.deps.onEvent?.(cannot, { endpoint: endpoint.id });
            this.deps.onLog(endpoint.id, "svc", { ts: now, stream: "log", text: cannot });
          }
          continue;
        }
        const lbLoad = endpoint.type === "lb" ? this.deps.lb!.load(endpoint.id) : undefined;
        const workers = [...this.managed.values()].filter((m) => m.endpointId === endpoint.id && !m.stopping && !m.probe);
        const r = endpoint.resource;
        // A load-balanced endpoint's proxy counts requests, not how long each waited: it scales by the count.
        const policy = lbLoad ? defaultPolicy(r.maxConcurrency) : (r.scaler ?? defaultPolicy(r.maxConcurrency));
        // Past workersMax workers' worth, more waiting jobs change nothing.
        const waiting = lbLoad ? undefined : engine.waiting(endpoint.id, r.workersMax * Math.max(policy.value, r.maxConcurrency, 1) + 1);
        const plan = planScaling({
          workersMin: r.workersMin,
          workersMax: r.workersMax,
          maxConcurrency: r.maxConcurrency,
          idleTimeoutMs: r.idleTimeout * 1000,
          queued: lbLoad?.queued ?? waiting!.normal,
          lowQueued: waiting?.low ?? 0,
          waitingSince: waiting?.waitingSince ?? [],
          policy,
          inProgress: lbLoad?.inProgress ?? engine.runningCount(endpoint.id),
          revision: this.revisionOf(endpoint),
          workers: workers.map((m) => {
            const entry = engine.workers.get(m.id);
            return {
              id: m.id,
              revision: entry?.revision ?? "",
              state: entry ? (lbLoad && this.deps.lb!.busy(m.id) ? "running" : workerState(entry)) : "initializing",
              idleSince: entry?.idleSince ?? now,
            };
          }),
          now,
          backoffUntil: this.failures.get(endpoint.id)?.until ?? 0,
        });
        if (plan.start > 0 && workers.length === 0 && engine.queuedCount(endpoint.id) > 0 && !this.coldStartPending.has(endpoint.id)) {
          this.coldStartPending.set(endpoint.id, now);
        }
        // Its models first: no worker starts (nor takes a GPU) before they are all in the host's cache (where the
        // driver's nodes fetch them, each worker's node does so before it runs).
        const models = r.models ?? [];
        if (plan.start > 0 && models.length > 0 && this.deps.models && !this.deps.driver.nodeModelCache && !this.deps.models.ready(models)) plan.start = 0;
        const request = assigning ? gpuRequestOf(endpoint.resource) : undefined;
        // A GPU worker starts once GPUs are given to it (below, all endpoints together, in turn).
        if (request && plan.start > 0)
          gpuWants.push({ endpointId: endpoint.id, endpoint, request, workers: plan.start, belowMin: workers.length < endpoint.resource.workersMin });
        else for (let i = 0; i < plan.start; i++) void this.launch(endpoint);
        for (const id of plan.drain) this.drain(id);
      }
      if (this.deps.gpus) {
        const byId = new Map(gpuWants.map((w) => [w.endpointId, w.endpoint]));
        for (const grant of this.deps.gpus.assign(gpuWants, now, newWorkerId))
          void this.launch(byId.get(grant.endpointId)!, grant.workerId, false, grant.uuids);
      }
      // Workers of deleted endpoints.
      for (const m of this.managed.values()) if (!m.probe && !liveEndpoints.has(m.endpointId)) this.drain(m.id);
      for (const id of this.failures.keys()) if (!liveEndpoints.has(id)) this.failures.delete(id);
      this.stopDrainedWorkers(now);
      this.endSilentRemotes(now);
      this.forgetStableDeaths(now);
    } finally {
      this.planning = false;
    }
  }

  private drainedSince = new Map<string, number>();
  /** Endpoints told their driver cannot restore snapshots. */
  private readonly snapshotNoticed = new Set<string>();
  /** Image endpoints told their driver runs no images. */
  private readonly imageNoticed = new Set<string>();

  private drain(workerId: string): void {
    const m = this.managed.get(workerId);
    if (!m || m.stopping) return;
    m.stopping = true;
    this.drainedSince.set(workerId, Date.now());
    this.deps.engine.ensureWorker(workerId, m.endpointId, true);
    this.deps.engine.drain(workerId);
  }

  /**
   * Ask the driver to stop a worker. A driver that fails to (a container runtime that does not answer, a process
   * it cannot signal) leaves a worker that may still run and hold its GPU: said, with the worker and the error,
   * and counted per endpoint.
   */
  private stopThroughDriver(workerId: string, endpointId: string, handle: WorkerHandle, graceMs: number, context = ""): Promise<void> {
    return handle.stop(graceMs).then(
      () => undefined,
      (err: unknown) => {
        const message = errorMessage(err) ?? String(err);
        const entry = this.stopFailures.get(endpointId) ?? { count: 0, lastError: "" };
        entry.count++;
        entry.lastError = message;
        this.stopFailures.set(endpointId, entry);
        this.deps.onEvent?.(`the ${this.deps.driver.name} driver failed to stop worker ${workerId} of endpoint ${endpointId}${context}: ${message}`, {
          endpoint: endpointId,
          worker: workerId,
        });
      },
    );
  }

  /**
   * A worker asked to be replaced once its job is done (the provider's `refresh_worker`): it takes no more jobs,
   * its exit is expected (no backoff), and the scaler starts another in its place. False: not a worker it started.
   */
  replace(workerId: string): boolean {
    if (!this.managed.has(workerId)) return false;
    this.drain(workerId);
    this.reconcile();
    return true;
  }

  /** Draining workers that hold nothing are stopped through the driver after a grace period. */
  private stopDrainedWorkers(now: number): void {
    for (const [id, since] of this.drainedSince) {
      const m = this.managed.get(id);
      if (!m) {
        this.drainedSince.delete(id);
        continue;
      }
      const entry = this.deps.engine.workers.get(id);
      const busy = entry !== undefined && entry.held.size > 0;
      if (!busy && now - since >= DRAIN_GRACE_MS && m.handle) {
        this.drainedSince.delete(id);
        void this.stopThroughDriver(m.id, m.endpointId, m.handle, DRAIN_GRACE_MS);
      }
    }
  }

  /** What a worker runs: the endpoint's code and configuration, and the values of its secrets. */
  private revisionOf(endpoint: EndpointRow, secrets = this.deps.secrets?.(endpoint)): string {
    return secrets?.digest ? `${endpoint.revision}+${secrets.digest}` : endpoint.revision;
  }

  /** Whether its driver can start workers of `endpoint`: one that runs no images cannot start an image endpoint's. */
  runs(endpoint: EndpointRow): boolean {
    return imageNotice(this.deps.driver, endpoint) === undefined;
  }

  /** A release's probe of `endpoint` (its row in the new build): started now, kept out of the plan until promoted. */
  startProbe(endpoint: EndpointRow): string {
    const workerId = newWorkerId();
    const request = this.deps.gpus?.assigning ? gpuRequestOf(endpoint.resource) : undefined;
    if (!request) {
      void this.launch(endpoint, workerId, true);
      return workerId;
    }
    const allocation = this.deps.gpus!.allocate(request);
    if (allocation.kind === "allocated") {
      this.deps.gpus!.hold(workerId, endpoint.id, allocation.uuids, allocation.typeId);
      void this.launch(endpoint, workerId, true, allocation.uuids);
      return workerId;
    }
    // No free GPU. Where a worker of the endpoint holds GPUs that would do, the release replaces in place: that
    // worker drains and the probe starts on its GPUs (a probe that then fails frees them for the endpoint's
    // workers again). Otherwise the probe waits for a GPU, ahead of every worker (serveWaitingProbes).
    const m: ManagedWorker = { id: workerId, endpointId: endpoint.id, stopping: false, probe: true };
    this.managed.set(workerId, m);
    this.deps.engine.manageWorker(workerId, endpoint.id, { revision: this.revisionOf(endpoint), standby: true });
    const victim = this.gpuVictim(endpoint, request);
    m.awaitingGpu = { endpoint, since: Date.now(), ...(victim ? { victimId: victim } : {}) };
    const how = victim ? `worker ${victim} drains and its GPUs go to the new worker ${workerId}` : `the new worker ${workerId} waits for one`;
    this.deps.onEvent?.(`no free GPU for the new release of endpoint ${endpoint.name} (${allocation.reason}): ${how}`);
    this.deps.onLog(endpoint.id, workerId, { ts: Date.now(), stream: "log", text: `waiting for a GPU (${allocation.reason})` });
    if (victim) this.drain(victim);
    return workerId;
  }

  /**
   * A worker of `endpoint` (an old revision first, the idle before the busy) whose GPUs would serve `request`
   * once freed; undefined when none would.
   */
  private gpuVictim(endpoint: EndpointRow, request: NonNullable<ReturnType<typeof gpuRequestOf>>): string | undefined {
    const gpus = this.deps.gpus!;
    const revision = this.revisionOf(endpoint);
    const claimed = new Set([...this.managed.values()].map((w) => w.awaitingGpu?.victimId).filter(Boolean));
    const candidates = [...this.managed.values()]
      .filter((w) => w.endpointId === endpoint.id && !w.probe && !claimed.has(w.id) && gpus.heldBy(w.id).uuids.length > 0)
      .sort(
        (a, b) =>
          Number(this.workerRevision(a.id) === revision) - Number(this.workerRevision(b.id) === revision) ||
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
    return this.deps.engine.workers.get(workerId)?.held.size ?? 0;
  }

  /** Stop a probe at once: it failed to come up, or its release is over. */
  stopProbe(workerId: string): void {
    const m = this.managed.get(workerId);
    if (!m || !m.probe) return;
    if (m.awaitingGpu) {
      // Never started: nothing runs, the worker it waited for is gone or going.
      this.exited(m, true);
      return;
    }
    m.stopping = true;
    this.deps.engine.drain(workerId);
    m.handle?.kill();
  }

  /** The release switched: its probes are workers of their endpoints from now on (they may take jobs). */
  promote(workerIds: string[]): void {
    for (const id of workerIds) {
      const m = this.managed.get(id);
      if (!m || !m.probe) continue;
      m.probe = false;
      this.deps.engine.promote(id);
      this.deps.lb?.wake?.(m.endpointId);
    }
    this.reconcile();
  }

  private async launch(endpoint: EndpointRow, workerId = newWorkerId(), probe = false, gpus?: string[]): Promise<void> {
    const secrets = this.deps.secrets?.(endpoint);
    const m: ManagedWorker = { id: workerId, endpointId: endpoint.id, stopping: false, probe };
    this.managed.set(workerId, m);
    const entry: WorkerEntry = this.deps.engine.manageWorker(workerId, endpoint.id, { revision: this.revisionOf(endpoint, secrets), standby: probe });
    const providerImage = providerImageOf(endpoint);
    const image = prebuiltImageOf(endpoint) ?? providerImage;
    const notice = this.snapshotNoticed.has(endpoint.id) ? undefined : snapshotNotice(this.deps.driver, endpoint);
    if (notice) {
      // Once per endpoint, where its owner looks (the endpoint's logs) and in the service's log.
      this.snapshotNoticed.add(endpoint.id);
      this.deps.onEvent?.(notice);
      this.deps.onLog(endpoint.id, workerId, { ts: Date.now(), stream: "log", text: notice });
    }
    // Fetched by the node the worker lands on (the driver's node caches), or else on this host, before it starts.
    const nodeModels = this.deps.driver.nodeModelCache && (endpoint.resource.models ?? []).length > 0 ? endpoint.resource.models! : undefined;
    const models = !nodeModels && this.deps.models && (endpoint.resource.models ?? []).length > 0 ? endpoint.resource.models! : undefined;
    // Held from now: the models cannot leave the cache while this worker starts or runs.
    if (models) this.deps.models!.hold(workerId, models);
    try {
      // A release's probe may name models not fetched yet: it starts once they are in the cache.
      if (models) {
        m.awaitingModels = models;
        await Promise.all(models.map((model) => this.deps.models!.ensure(model)));
        m.awaitingModels = undefined;
      }
      // A load-balanced prebuilt image does not speak a worker protocol: it gets no credentials of the service. A
      // provider image does: its token is minted (and revoked) as for svc's own workers.
      const keys: { workerToken: string; apiKey?: string; bucket?: WorkerBucket } =
        image && !providerImage ? { workerToken: "" } : await this.deps.mintWorkerKeys(endpoint, workerId);
      const r = endpoint.resource;
      const artifactPath = image || !this.deps.localArtifact ? endpoint.artifactPath : await this.deps.localArtifact(endpoint.artifactPath);
      m.launchedAt = Date.now();
      m.handle = await this.deps.driver.start({
        workerId,
        endpointId: endpoint.id,
        endpointName: endpoint.name,
        app: endpoint.app,
        env: endpoint.env,
        artifactPath,
        artifactUrl: artifactUrl(this.deps.apiUrl, endpoint.artifactPath),
        apiUrl: this.deps.apiUrl,
        workerToken: keys.workerToken,
        apiKey: keys.apiKey,
        bucket: keys.bucket,
        // Secrets after the plain variables: a secret of the same name is the value the user keeps secret.
        environment: { ...r.env, ...secrets?.env },
        secretNames: Object.keys(secrets?.env ?? {}),
        maxConcurrency: r.maxConcurrency,
        revision: entry.revision ?? "",
        computeType: r.computeType,
        gpuTypeIds: r.gpuTypeIds,
        // Exactly the GPUs it holds; a CPU worker none. Unassigned (no GPU inventory here): the driver's default.
        gpus: r.computeType === "CPU" ? [] : gpus,
        ...launchVolume(this.deps.volume?.(endpoint)),
        ...(models ? { modelCache: this.deps.models!.root } : {}),
        ...(nodeModels ? { models: nodeModels, ...(this.deps.modelHub ? { modelHub: this.deps.modelHub } : {}) } : {}),
        placement: placementOf(r, this.deps.dataCenterOf?.(endpoint)),
        loadBalanced: endpoint.type === "lb",
        image,
        ...(providerImage ? { protocol: "provider" as const, heartbeatMs: this.deps.heartbeatMs } : {}),
        ...(image ? this.deps.containerAllowances?.(endpoint) : {}),
        ...(image ? { registryAuth: this.deps.registryAuth?.(endpoint) } : {}),
        ...(r.snapshot ? { snapshot: true } : {}),
        ...(this.deps.traces && !image ? { traces: this.deps.traces } : {}),
        onLog: (line) => this.deps.onLog(endpoint.id, workerId, line),
      });
      // Where the node pulls after the start returned, the failure stays until a worker of it registers.
      if (!this.deps.driver.pullsImages) this.pullFailures.delete(endpoint.id);
      m.startedAt = Date.now();
      this.offerAddresses(workerId, m.handle);
      this.lifeStarted(m, endpoint.userId);
      if (image && !providerImage && m.handle.address) {
        // It cannot register itself: the service does, and the pool's /ping probes decide when it gets traffic.
        this.deps.engine.register(workerId, endpoint.id, 1, "image", { address: m.handle.address });
      }
      this.deps.onEvent?.(`worker ${workerId} started for endpoint ${endpoint.name} (${endpoint.id})`, { endpoint: endpoint.id, worker: workerId });
    } catch (err) {
      // Its jobs stay queued; the endpoint says why it waits until a start pulls the image (after the backoff).
      if (isImagePullError(err)) this.pullFailures.set(endpoint.id, err.message);
      this.deps.onLog(endpoint.id, workerId, { ts: Date.now(), stream: "stderr", text: `worker failed to start: ${errorMessage(err)}` });
      const wasProbe = m.probe;
      this.exited(m, wasProbe, `the worker could not be started: ${errorMessage(err)}`);
      if (wasProbe) this.deps.onProbeExit?.(workerId, { error: `the worker could not be started: ${errorMessage(err)}` });
      return;
    }
    // Stopped while the driver was starting it (a probe whose release ended meanwhile).
    if (m.stopping && m.probe) m.handle.kill();
    this.watchExit(m);
  }

  /** The load balancer reaches a worker where its driver says, when the driver knows (started or adopted). */
  private offerAddresses(workerId: string, handle: WorkerHandle): void {
    this.deps.engine.workerAddressed(workerId, { address: handle.address, socket: handle.localSocket, direct: handle.directAddress });
  }

  /** When the worker ends: its jobs go back to the queue at once, and an unexpected end backs the endpoint off. */
  private watchExit(m: ManagedWorker): void {
    void m.handle!.exited.then((exit) => {
      if (m.probe) {
        this.exited(m, true);
        this.deps.onProbeExit?.(m.id, exit);
        return;
      }
      const expected = m.stopping || this.closed;
      // Its node could not pull the image: the endpoint says why it waits, as when the start itself failed.
      if (exit.pullFailure && !expected) this.pullFailures.set(m.endpointId, exit.pullFailure);
      if (!expected) {
        this.deps.onLog(m.endpointId, m.id, {
          ts: Date.now(),
          stream: "stderr",
          text: m.remoteGone
            ? "worker stopped talking to the service (started by another replica)"
            : exit.pullFailure || exit.startFailure
              ? `worker failed to start: ${exit.pullFailure ?? exit.startFailure}`
              : `worker exited unexpectedly (code ${exit.code}, signal ${exit.signal})`,
        });
      }
      // A worker of another replica that fell silent went with its replica, or stopped answering: like a lapsed
      // lease, not the job's doing, so its jobs go back without an attempt counted.
      this.exited(m, expected, exit.startFailure, expected || m.remoteGone ? undefined : deathOf(exit), exit);
    });
  }

  /**
   * Tell usage that a started worker runs, with the host GPUs it holds, and whose it is (a release's probe runs
   * before its endpoint is served).
   */
  private lifeStarted(m: ManagedWorker, userId: string | undefined): void {
    const held = this.deps.gpus?.heldBy(m.id);
    this.deps.onWorkerLife?.({
      type: "started",
      workerId: m.id,
      endpointId: m.endpointId,
      userId,
      gpus: { typeId: held?.typeId ?? null, count: held?.uuids.length ?? 0 },
    });
  }

  /**
   * `died`: how a worker that ended unasked ended, for the jobs it was running (each counts it as an attempt);
   * `exit`: how it ended (absent: the driver could not start it).
   */
  private exited(m: ManagedWorker, expected: boolean, why?: string, died?: string, exit?: WorkerExit): void {
    if (m.handle) this.deps.onWorkerLife?.({ type: "stopped", workerId: m.id });
    this.managed.delete(m.id);
    this.deps.models?.release(m.id);
    this.drainedSince.delete(m.id);
    if (this.deps.gpus && this.deps.gpus.release(m.id).length > 0 && !this.closed) {
      // Its GPUs are free: probes waiting for one first (the one it made way for before all), then endpoints.
      this.serveWaitingProbes(m.id);
      this.kick(m.endpointId);
    }
    const entry = this.deps.engine.workers.get(m.id);
    const registered = entry?.registered ?? false;
    this.deps.engine.workerGone(m.id, died);
    // A key left valid would let a gone worker's token in: say so (the next start of the service does not retry it).
    void this.deps
      .revokeWorkerKeys(m.id, m.endpointId)
      .catch((err: unknown) => this.deps.onEvent?.(`could not revoke the keys of worker ${m.id}: ${errorMessage(err)}`));
    if (expected) return;
    // A worker adopted after a restart may end before it re-registers: that is no failure to start.
    if (!registered && !m.adopted) this.deps.onStartFailure?.(m.endpointId, m.id, why ?? "the worker exited before it registered");
    // Every death in a row waits longer before the next start, whether the worker registered or not: one that
    // registers and then dies at once (its handler's start kills it) is as much a crash loop as one that never
    // comes up. A worker that lived stableMs proved the code runs, and the count starts again.
    const now = Date.now();
    const reason = deathReason(exit);
    const before = this.failures.get(m.endpointId);
    const after = afterDeath(
      before ?? { streak: 0, recent: [], until: 0 },
      { at: now, reason, text: died ?? (exit ? deathOf(exit) : (why ?? "the worker could not be started")) },
      m.startedAt === undefined ? undefined : now - m.startedAt,
      this.crashPolicy,
    );
    this.failures.set(m.endpointId, after);
    this.deps.onWorkerDeath?.(m.endpointId, reason);
    const loop = crashLoopOf(after, now, this.crashPolicy);
    if (loop && !crashLoopOf(before, now, this.crashPolicy))
      this.deps.onEvent?.(
        `endpoint ${m.endpointId} is crash-looping: its workers keep dying (${loop.deaths} within ${loop.windowMs / 1000} s, last: ${loop.lastDeath.message}); restarts back off`,
        {
          endpoint: m.endpointId,
          worker: m.id,
        },
      );
  }

  /** The crash loop an endpoint is in (its workers keep dying), or undefined. */
  crashLoop(endpointId: string): CrashLoop | undefined {
    return crashLoopOf(this.failures.get(endpointId), Date.now(), this.crashPolicy);
  }

  /** A job of the endpoint completed: its code runs, the deaths before no longer count. */
  jobCompleted(endpointId: string): void {
    if (this.failures.delete(endpointId)) this.kick(endpointId);
  }

  /** Endpoints with a worker up stableMs: the deaths before no longer count. */
  private forgetStableDeaths(now: number): void {
    if (this.failures.size === 0) return;
    for (const m of this.managed.values()) {
      if (m.startedAt === undefined || m.stopping || now - m.startedAt < this.crashPolicy.stableMs || !this.failures.has(m.endpointId)) continue;
      if (this.deps.engine.workers.get(m.id)?.registered) this.failures.delete(m.endpointId);
    }
  }

  /**
   * Start the probes waiting for a GPU that one is free for, those waiting for the GPUs of `freedBy` first, then
   * the longest waiting. A probe still without one, while other probes have proved their code starts (their release
   * counts their endpoints ready) on GPUs it could use: those stop and hand them over (several together where it
   * needs the GPUs of several); their endpoints get workers like any once the release switches. So the probes of one
   * release never block each other on a full host.
   */
  private serveWaitingProbes(freedBy?: string): void {
    const gpus = this.deps.gpus;
    if (!gpus) return;
    const waiting = [...this.managed.values()]
      .filter((w) => w.awaitingGpu && !w.stopping)
      .sort((a, b) => Number(b.awaitingGpu!.victimId === freedBy) - Number(a.awaitingGpu!.victimId === freedBy) || a.awaitingGpu!.since - b.awaitingGpu!.since);
    for (const p of waiting) {
      const { endpoint, victimId } = p.awaitingGpu!;
      const request = gpuRequestOf(endpoint.resource)!;
      const allocation = gpus.allocate(request);
      if (allocation.kind === "allocated") {
        p.awaitingGpu = undefined;
        this.managed.delete(p.id);
        gpus.hold(p.id, endpoint.id, allocation.uuids, allocation.typeId);
        void this.launch(endpoint, p.id, true, allocation.uuids);
        continue;
      }
      // Its victim is still on its way out: its GPUs come.
      if (victimId && this.managed.has(victimId)) continue;
      for (const proven of this.handOverSet(request)) {
        proven.handingOver = true;
        this.deps.onEvent?.(`worker ${proven.id} (a release's, ready) stops to give its GPU to the new worker ${p.id} of endpoint ${endpoint.name}`);
        void this.stopThroughDriver(proven.id, proven.endpointId, proven.handle!, DRAIN_GRACE_MS, " (to hand over its GPU)");
      }
    }
  }

  /**
   * The probes that proved their code starts and whose GPUs, freed together, would serve `request`: one where one
   * is enough, else as few as found (a two-GPU probe may need the GPUs of two one-GPU probes); none when even all
   * of them would not do. Pure of I/O.
   */
  private handOverSet(request: NonNullable<ReturnType<typeof gpuRequestOf>>): ManagedWorker[] {
    const gpus = this.deps.gpus!;
    const proven = [...this.managed.values()].filter(
      (w) => w.probe && !w.handingOver && w.handle && this.deps.probeReady?.(w.id) && gpus.heldBy(w.id).uuids.length > 0,
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

  /** Why the endpoint's image could not be pulled at its last worker's start; undefined once one started. */
  pullFailure(endpointId: string): string | undefined {
    return this.pullFailures.get(endpointId);
  }

  /** Why an endpoint's workers wait for a GPU, and how many; undefined when none waits. */
  gpuWait(endpointId: string): GpuWait | undefined {
    return this.deps.gpus?.waiting(endpointId);
  }

  /**
   * What a release's new worker of this endpoint waits for before it starts: a GPU (its probe holds none yet), or
   * the models its revision names (being fetched into the host's cache, or failing to be). `fetching`: the wait is
   * a download under way, which a release's start timeout does not cut short. Undefined: it waits for nothing.
   */
  probeWait(endpointId: string): ProbeWait | undefined {
    const probes = [...this.managed.values()].filter((w) => w.endpointId === endpointId && w.probe && !w.stopping);
    const onGpu = probes.find((w) => w.awaitingGpu);
    const request = onGpu && gpuRequestOf(onGpu.awaitingGpu!.endpoint.resource);
    if (this.deps.gpus && request) {
      const allocation = this.deps.gpus.allocate(request);
      if (allocation.kind !== "allocated") return { text: gpuWaitMessage(allocation), fetching: false };
    }
    const onModels = probes.find((w) => w.awaitingModels);
    const text = onModels && this.deps.models?.reason(onModels.awaitingModels!);
    return text ? { text, fetching: this.deps.models!.fetching(onModels!.awaitingModels!) } : undefined;
  }

  /** When a release's new worker began to start after what it waited for; undefined while it still waits. */
  probeLaunchedAt(workerId: string): number | undefined {
    return this.managed.get(workerId)?.launchedAt;
  }

  /** Why an endpoint's workers wait for its models ("fetching model org/name@main: 120 of 200 MB"); undefined: they do not. */
  modelWait(endpoint: EndpointRow): string | undefined {
    const models = endpoint.resource.models ?? [];
    return models.length > 0 ? this.deps.models?.reason(models) : undefined;
  }

  /** Each live worker of an endpoint that holds GPUs: which, and as which type of its list. */
  workerGpus(endpointId: string): Array<{ workerId: string; gpuType: string | null; gpus: string[] }> {
    const gpus = this.deps.gpus;
    if (!gpus) return [];
    return [...this.managed.values()]
      .filter((m) => m.endpointId === endpointId)
      .map((m) => ({ workerId: m.id, ...gpus.heldBy(m.id) }))
      .filter((w) => w.uuids.length > 0)
      .map((w) => ({ workerId: w.workerId, gpuType: w.typeId, gpus: w.uuids }));
  }

  /**
   * A worker this replica does not manage called it (a take or heartbeat may come before any register: the
   * service answers those for a worker it does not know yet). While replicas share a database it was started by
   * another one: adopt it, as of the revision it says it runs, else the endpoint's current one.
   */
  noticed(endpointId: string, workerId: string, revision?: string): void {
    if (!this.deps.adoptRegistered || this.closed || this.managed.has(workerId)) return;
    const endpoint = [...this.deps.endpoints()].find((e) => e.id === endpointId);
    if (!endpoint || endpoint.type !== "queue") return;
    this.adoptRemote(endpoint, workerId, revision ?? this.revisionOf(endpoint));
  }

  private adoptRemote(endpoint: EndpointRow, workerId: string, revision: string): void {
    let gone!: (exit: WorkerExit) => void;
    const exited = new Promise<WorkerExit>((resolve) => (gone = resolve));
    const drain = () => this.deps.engine.drain(workerId);
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
    this.managed.set(workerId, m);
    this.deps.engine.manageWorker(workerId, endpoint.id, { revision });
    // Its usage is this replica's from now on (the one that started it accounted it up to its last flush).
    this.lifeStarted(m, endpoint.userId);
    this.watchExit(m);
    this.deps.onEvent?.(`adopted worker ${workerId} of endpoint ${endpoint.name}, started by another replica`, { endpoint: endpoint.id, worker: workerId });
  }

  /** Adopted workers of other replicas that stopped talking to the service: gone (their jobs requeue). */
  private endSilentRemotes(now: number): void {
    const silentMs = this.deps.adoptRegistered?.silentMs;
    if (silentMs === undefined) return;
    for (const m of this.managed.values()) {
      if (!m.remoteGone) continue;
      const entry = this.deps.engine.workers.get(m.id);
      if (!entry || (entry.polling === 0 && now - entry.lastSeen > silentMs)) m.remoteGone({ code: null, signal: null });
    }
  }

  /**
   * Stop every worker of these (removed) endpoints now; true once all have exited, false when some
   * still run after `timeoutMs`.
   */
  async stopWorkersOf(endpointIds: ReadonlySet<string>, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    const asked = new Set<string>();
    for (;;) {
      const left = [...this.managed.values()].filter((m) => endpointIds.has(m.endpointId));
      if (left.length === 0) return true;
      if (Date.now() > deadline) return false;
      for (const m of left) {
        this.drain(m.id);
        // A worker still starting has no handle yet: asked again on the next round.
        if (m.handle && !asked.has(m.id)) {
          asked.add(m.id);
          void this.stopThroughDriver(m.id, m.endpointId, m.handle, DRAIN_GRACE_MS);
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Whether the driver runs prebuilt images (the Docker driver does). */
  get runsImages(): boolean {
    return typeof this.deps.driver.hasImage === "function";
  }

  /** Whether the driver's cluster pulls images itself (provider worker images run without a look-up). */
  get pullsImages(): boolean {
    return this.deps.driver.pullsImages === true;
  }

  /** The driver's name, for what the service says about what it can run. */
  get driverName(): WorkerDriver["name"] {
    return this.deps.driver.name;
  }

  hasImage(name: string): Promise<boolean> {
    return this.deps.driver.hasImage?.(name) ?? Promise.resolve(false);
  }

  /**
   * The check a prebuilt image goes through before its endpoint gets traffic: one worker of it, started outside
   * the pool, asked for /ping (waiting up to `waitMs` while it starts), then stopped. Never throws.
   */
  async checkImage(endpoint: EndpointRow, waitMs: number): Promise<PingCheck> {
    const image = prebuiltImageOf(endpoint);
    const workerId = `wcheck${Math.random().toString(36).slice(2, 8)}${Date.now().toString(36)}`;
    let handle: WorkerHandle | undefined;
    // Its own GPU where one is free (held for the check); otherwise it runs without one rather than on a GPU
    // another worker holds.
    const request = this.deps.gpus?.assigning ? gpuRequestOf(endpoint.resource) : undefined;
    const allocation = request ? this.deps.gpus!.allocate(request) : undefined;
    if (allocation?.kind === "allocated") this.deps.gpus!.hold(workerId, endpoint.id, allocation.uuids, allocation.typeId);
    const gpus = !request ? undefined : allocation?.kind === "allocated" ? allocation.uuids : [];
    try {
      if (!image) throw new Error(`endpoint ${endpoint.name} runs no prebuilt image`);
      handle = await this.deps.driver.start({
        workerId,
        endpointId: endpoint.id,
        endpointName: endpoint.name,
        app: endpoint.app,
        env: endpoint.env,
        artifactPath: "",
        apiUrl: this.deps.apiUrl,
        workerToken: "",
        environment: { ...endpoint.resource.env },
        maxConcurrency: 1,
        computeType: gpus?.length === 0 ? "CPU" : endpoint.resource.computeType,
        gpuTypeIds: endpoint.resource.gpuTypeIds,
        gpus: endpoint.resource.computeType === "CPU" ? [] : gpus,
        loadBalanced: true,
        image,
        onLog: (line) => this.deps.onLog(endpoint.id, workerId, line),
      });
      if (!handle.address) throw new Error("the driver gave no address for the image's HTTP server");
      return await checkPingPath(handle.address, { waitMs });
    } catch (err) {
      return { ok: false, state: "unreachable", message: `could not start image "${image}" to check its /ping: ${errorMessage(err)}` };
    } finally {
      if (handle) await this.stopThroughDriver(workerId, endpoint.id, handle, 2000, " (its image's /ping check)");
      if (this.deps.gpus?.release(workerId).length) this.kick(endpoint.id);
    }
  }

  /** The revision a worker it runs was started with (the registry's record). */
  workerRevision(workerId: string): string | undefined {
    return this.managed.has(workerId) ? this.deps.engine.workers.get(workerId)?.revision : undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    const handles = [...this.managed.values()];
    for (const m of handles) {
      m.stopping = true;
      this.deps.engine.drain(m.id);
    }
    await Promise.all(handles.map((m) => m.handle && this.stopThroughDriver(m.id, m.endpointId, m.handle, 3000, " (the service stops)")));
    await this.deps.driver
      .close()
      .catch((err: unknown) => this.deps.onEvent?.(`the ${this.deps.driver.name} driver failed to close: ${errorMessage(err) ?? String(err)}`));
  }
}

/** A network volume as a launch carries it: the host directory, and its id and size for cluster drivers. Pure. */
function launchVolume(volume: { id: string; sizeGb: number; path: string } | undefined): { volumePath?: string; volume?: { id: string; sizeGb: number } } {
  return volume ? { volumePath: volume.path, volume: { id: volume.id, sizeGb: volume.sizeGb } } : {};
}
