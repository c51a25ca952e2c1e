// Keeps each endpoint's workers between workersMin and workersMax through a WorkerDriver: starts workers when
// jobs wait (from zero on the first job), drains idle ones after idleTimeout, replaces workers of an old
// revision (rolling release) and workers that exit unexpectedly (with backoff). The decision is a pure
// function (planScaling, scaling-plan.ts); `Scaler` applies it. What kind of worker an endpoint runs is
// worker-kinds.ts; a worker's own state is the engine's worker registry's.

import type { WorkerBucket, WorkerDriver, WorkerExit, WorkerHandle } from "../../drivers/types.js";
import { isImagePullError } from "../../drivers/registry-auth.js";
import type { WorkerEntry } from "../engine/index.js";
import { workerState } from "../engine/index.js";
import type { EndpointRow } from "../store/types.js";
import type { ProbeWait } from "../releases/manager.js";
import { type PingCheck } from "../lb/ping.js";
import { gpuRequestOf } from "../../gpus/allocate.js";
import { type GpuWait, type GpuWant } from "../../gpus/host.js";
import { defaultPolicy } from "./scaling-policy.js";
import { errorMessage } from "../../errors.js";
import { afterDeath, type CrashLoop, type CrashLoopPolicy, crashLoopOf, DEFAULT_CRASH_LOOP, deathOf, deathReason, type EndpointDeaths } from "./crash-loop.js";
import { planScaling } from "./scaling-plan.js";
import { imageNotice, prebuiltImageOf, providerImageOf, snapshotNotice } from "./worker-kinds.js";

export { deathOf } from "./crash-loop.js";
export type { LaunchInfo, ScalerDeps } from "./scaler-deps.js";
import type { ScalerDeps } from "./scaler-deps.js";
import { DRAIN_GRACE_MS, type ManagedWorker, newWorkerId } from "./managed-worker.js";
import { ProbeGpus } from "./probe-gpus.js";
import { checkImage } from "./image-check.js";
import { workerLaunch } from "./launch-spec.js";
import { WorkerAdoption } from "./adoption.js";
import { ColdStarts } from "./cold-starts.js";
import { DriverStops } from "./driver-stops.js";

export class Scaler {
  private readonly managed = new Map<string, ManagedWorker>();
  private readonly adoption: WorkerAdoption;
  private readonly probeGpus: ProbeGpus;
  /** Endpoints whose workers died unasked since they last proved they run (crash-loop.ts). */
  private readonly failures = new Map<string, EndpointDeaths>();
  private readonly crashPolicy: CrashLoopPolicy;
  /** Why the last start of an endpoint's worker could not pull its image, until a start does (pullFailure). */
  private readonly pullFailures = new Map<string, string>();
  private readonly cold = new ColdStarts();
  private readonly stops: DriverStops;
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
    this.stops = new DriverStops(deps);
    // A worker of it connected, so its image was pulled: the endpoint no longer waits on a pull. Its deaths still
    // count: a worker that registers and dies at once is crash looping too; one that stays up stableMs, or a
    // completed job, ends the count.
    deps.engine.workerEvents.on("registered", ({ worker }) => this.pullFailures.delete(worker.endpointId));
    const scaler = this;
    this.adoption = new WorkerAdoption({
      deps,
      managed: this.managed,
      get closed() {
        return scaler.closed;
      },
      revisionOf: (endpoint) => this.revisionOf(endpoint),
      lifeStarted: (m, userId) => this.lifeStarted(m, userId),
      offerAddresses: (workerId, handle) => this.offerAddresses(workerId, handle),
      watchExit: (m) => this.watchExit(m),
    });
    this.probeGpus = new ProbeGpus({
      deps,
      managed: this.managed,
      revisionOf: (endpoint) => this.revisionOf(endpoint),
      workerRevision: (workerId) => this.workerRevision(workerId),
      launch: (endpoint, workerId, gpus) => void this.launch(endpoint, workerId, true, gpus),
      drain: (workerId) => this.drain(workerId),
      stopThroughDriver: (m, context) => this.stops.stop(m.id, m.endpointId, m.handle!, DRAIN_GRACE_MS, context),
    });
  }

  /**
   * A worker this replica does not manage called it: while replicas share a database, adopted as one another
   * replica started (adoption.ts).
   */
  noticed(endpointId: string, workerId: string, revision?: string): void {
    this.adoption.noticed(endpointId, workerId, revision);
  }

  /**
   * Adopt the workers an earlier process of the service left running (the driver finds them), then plan every
   * interval. Until they are counted nothing is planned: a restart never starts workers beside ones that run.
   */
  async start(settleMs = 0): Promise<void> {
    await this.adoption.leftovers();
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
    const ms = this.cold.taken(endpointId, Date.now());
    if (ms !== undefined) this.deps.onColdStart?.(endpointId, ms);
  }

  /** Workers the driver failed to stop, per endpoint (each also said through onEvent): they may still run. */
  get stopFailures(): ReadonlyMap<string, { count: number; lastError: string }> {
    return this.stops.failures;
  }

  /** Per endpoint: its cold starts, and the last one's ms. */
  get coldStarts(): ReadonlyMap<string, { count: number; lastMs: number | null }> {
    return this.cold.counts;
  }

  reconcile(): void {
    if (this.closed || this.planning || this.adopting) return;
    this.planning = true;
    try {
      const now = Date.now();
      const { engine } = this.deps;
      const liveEndpoints = new Set<string>();
      this.probeGpus.serveWaiting();
      const gpuWants: Array<GpuWant & { endpoint: EndpointRow }> = [];
      const assigning = this.deps.gpus?.assigning ?? false;
      for (const endpoint of this.deps.endpoints()) {
        liveEndpoints.add(endpoint.id);
        if (endpoint.type !== "queue" && !this.deps.lb) continue;
        const cannot = imageNotice(this.deps.driver, endpoint);
        if (cannot) {
          // Its jobs wait in the queue.
          this.noticeOnce(`image ${endpoint.id}`, endpoint.id, "svc", cannot);
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
        if (plan.start > 0 && workers.length === 0 && engine.queuedCount(endpoint.id) > 0) this.cold.began(endpoint.id, now);
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
      this.adoption.endSilentRemotes(now);
      this.forgetStableDeaths(now);
    } finally {
      this.planning = false;
    }
  }

  private drainedSince = new Map<string, number>();
  /** What endpoints were told once ("image <id>": their driver runs no images; "snapshot <id>": restores none). */
  private readonly told = new Set<string>();

  /** Said once per `key`, where the endpoint's owner looks (its logs) and in the service's log. */
  private noticeOnce(key: string, endpointId: string, workerId: string, text: string): void {
    if (this.told.has(key)) return;
    this.told.add(key);
    this.deps.onEvent?.(text, { endpoint: endpointId });
    this.deps.onLog(endpointId, workerId, { ts: Date.now(), stream: "log", text });
  }

  private drain(workerId: string): void {
    const m = this.managed.get(workerId);
    if (!m || m.stopping) return;
    m.stopping = true;
    this.drainedSince.set(workerId, Date.now());
    this.deps.engine.ensureWorker(workerId, m.endpointId, true);
    this.deps.engine.drain(workerId);
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
        void this.stops.stop(m.id, m.endpointId, m.handle, DRAIN_GRACE_MS);
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
    this.probeGpus.start(endpoint, workerId);
    return workerId;
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
    const notice = snapshotNotice(this.deps.driver, endpoint);
    if (notice) this.noticeOnce(`snapshot ${endpoint.id}`, endpoint.id, workerId, notice);
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
      const _r = endpoint.resource;
      const artifactPath = image || !this.deps.localArtifact ? endpoint.artifactPath : await this.deps.localArtifact(endpoint.artifactPath);
      m.launchedAt = Date.now();
      m.handle = await this.deps.driver.start(
        workerLaunch(this.deps, endpoint, {
          workerId,
          revision: entry.revision ?? "",
          keys,
          artifactPath,
          secrets,
          gpus,
          models,
          nodeModels,
          image,
          providerImage,
          onLog: (line) => this.deps.onLog(endpoint.id, workerId, line),
        }),
      );
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
    // Stopped while the driver was starting it (a probe whose release ended meanwhile), or the scaler closed
    // meanwhile (its close stopped the workers that had a handle then): killed, not left running.
    if ((m.stopping && m.probe) || this.closed) m.handle.kill();
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
      this.probeGpus.serveWaiting(m.id);
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

  /** Why the endpoint's image could not be pulled at its last worker's start; undefined once one started. */
  pullFailure(endpointId: string): string | undefined {
    return this.pullFailures.get(endpointId);
  }

  /** Why an endpoint's workers wait for a GPU, and how many; undefined when none waits. */
  gpuWait(endpointId: string): GpuWait | undefined {
    return this.deps.gpus?.waiting(endpointId);
  }

  /** What a release's new worker of this endpoint waits for before it starts (probe-gpus.ts); undefined: nothing. */
  probeWait(endpointId: string): ProbeWait | undefined {
    return this.probeGpus.probeWait(endpointId);
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
    return this.probeGpus.workerGpus(endpointId);
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
          void this.stops.stop(m.id, m.endpointId, m.handle, DRAIN_GRACE_MS);
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
   * The check a prebuilt image goes through before its endpoint gets traffic (image-check.ts): one worker of it,
   * started outside the pool, asked for /ping, then stopped. Never throws.
   */
  checkImage(endpoint: EndpointRow, waitMs: number): Promise<PingCheck> {
    return checkImage(this.deps, endpoint, waitMs, {
      stop: (workerId, handle, context) => this.stops.stop(workerId, endpoint.id, handle, 2000, context),
      kick: () => this.kick(endpoint.id),
    });
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
    await Promise.all(handles.map((m) => m.handle && this.stops.stop(m.id, m.endpointId, m.handle, 3000, " (the service stops)")));
    await this.deps.driver
      .close()
      .catch((err: unknown) => this.deps.onEvent?.(`the ${this.deps.driver.name} driver failed to close: ${errorMessage(err) ?? String(err)}`));
  }
}
