// The svc service: job API (/v2/{endpoint}), worker protocol (/_worker/v1), state and logs (/v1), over one
// SQLite file. `startService` is what `svc server`, `svc dev`, the tests and the benches call: the composition
// root, where every part is made and wired. Its options are options.ts; opening what it keeps, open-state.ts;
// its key policy, service-keys.ts; the listener's edges, listening.ts; its clocks and shutdown, lifecycle.ts;
// following other replicas, follow-replicas.ts.

import { hostname } from "node:os";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { sweepStaleTempDirs } from "../drivers/owned-temp.js";
import { errorMessage, errorStack } from "../errors.js";
import { QUIET_HEADER, type Manifest } from "svc/internal";
import { DEFAULT_USER, KeyRing, newId } from "./keys/auth.js";
import { JobEngine } from "./engine/index.js";
import { quickRead, quickRun } from "./jobs/routes.js";
import { quickTake } from "./workers/routes.js";
import { quickProviderCall } from "./workers/provider-routes.js";
import { handleRequest, recordJson, type ApiContext } from "./api.js";
import { REFUSAL_STATUS, sendProblem } from "./http/problems.js";
import { ServiceMetrics } from "./metrics/index.js";
import { MAX_ARTIFACT_BYTES } from "./deploy/upload.js";
import { Scaler } from "./workers/scaler.js";
import { appContainerAllowances } from "./workers/worker-kinds.js";
import { ModelCache } from "./models/cache.js";
import { DEFAULT_MODEL_HUB, Hub } from "./models/hub.js";
import { Webhooks } from "./webhooks/index.js";
import type { ServiceListener } from "./webhooks/address-policy.js";
import { JobsRole } from "./cluster/jobs-role.js";
import { HANDOFF_TOPIC } from "./store/postgres/index.js";

import { IdempotentSubmits } from "./idempotency/index.js";
import { isS3Target, S3_PREFIX, S3_REGION, VolumeS3 } from "./volumes/s3.js";
import { listenS3Origin, S3ListenError, type S3Origin } from "./volumes/s3-origin.js";
import { GB_BYTES, VolumeUsage } from "./volumes/usage.js";
import { volumeStorage } from "./volumes/storage.js";
import type { VolumesApi } from "./volumes/index.js";
import { LargeOutputs } from "./volumes/large-outputs.js";
import { JobBuckets } from "./volumes/job-bucket.js";
import type { Store } from "./store/types.js";
import { Management } from "./management/index.js";
import { DEFAULT_RATE_WINDOWS } from "./keys/ratelimit.js";
import { LbFront } from "./lb/front.js";
import { LbRouter } from "./lb/index.js";
import { clientGuards, DEFAULT_CLIENT_LIMITS } from "./http/slow-clients.js";
import { engineEndpoint } from "./endpoints/rows.js";
import { EndpointRegistry } from "./endpoints/registry.js";
import { ReleaseManager } from "./releases/manager.js";
import { describeStorage } from "./store/faults.js";
import { StartFailures } from "./releases/start-failures.js";
import { Deployments } from "./deploy/deployments.js";
import { deployInProcess } from "./deploy/in-process.js";

/**
 * How long a replica that takes over serving jobs waits before it starts workers: the workers the previous one
 * started retry with backoff up to 5 s (runtime/api.ts) and register here meanwhile, to be adopted, not doubled.
 */
const CLUSTER_ADOPT_SETTLE_MS = 6_000;

export { endpointId, engineEndpoint, planDeploy } from "./endpoints/rows.js";

export { ReleaseFailedError } from "./deploy/deployments.js";

import type { ServiceOptions } from "./options.js";
import { openState, readHostGpus } from "./open-state.js";
import { KEY_RECHECK_MS, keyMinter, seedOperatorKeys, workerKeyMinter } from "./service-keys.js";
import { answerUnparsedRequests, listen, requestFields, timedRead } from "./listening.js";
import { shutdown, startTimers } from "./lifecycle.js";
import { followReplicas } from "./follow-replicas.js";

export type { ServiceOptions } from "./options.js";

export interface DeployedEndpoint {
  id: string;
  name: string;
  app: string;
  env: string;
  /** `${service url}/v2/${id}` */
  url: string;
  type: "queue" | "lb";
  /** This deploy replaced its workers: its code or settings changed (false: it keeps its workers, or is new). */
  changed?: boolean;
}

export interface Service {
  url: string;
  port: number;
  /** The S3 API's own origin, when it listens on one (ServiceOptions.s3Port). */
  s3?: { url: string; port: number };
  close(): Promise<void>;
  deploy(input: { app: string; env: string; manifest: Manifest; artifactPath: string; ownerKey?: string }): Promise<DeployedEndpoint[]>;
  mintKey(opts: { scopes: string[]; userId?: string }): Promise<{ id: string; key: string }>;
  /** Requests the LB front served itself and connections it handed to node:http (lb/front.ts); for tests. */
  lbFrontStats(): { served: number; takes: number; providerCalls: number; handedOver: number } | undefined;
}

export async function startService(options: ServiceOptions): Promise<Service> {
  const leaseMs = options.leaseMs ?? 30_000;
  const heartbeatMs = options.heartbeatMs ?? Math.max(50, Math.min(5_000, Math.floor(leaseMs / 3)));
  const log = options.log ?? (() => undefined);
  // What processes killed before their clean-up left in the temporary directory (each name carries its owner's
  // pid): removed when the owner is gone. A failure to look costs nothing but the space.
  try {
    const swept = sweepStaleTempDirs({ failed: (name, err) => log(`could not remove the stale temporary directory ${name}: ${err.message}`) });
    if (swept.length > 0) log(`removed ${swept.length} temporary director${swept.length === 1 ? "y" : "ies"} of processes that are gone: ${swept.join(", ")}`);
  } catch (err) {
    log(`could not look for stale temporary directories: ${errorMessage(err)}`);
  }
  const state = await openState(options, log);
  const { storage, secrets, box } = state;
  const store: Store = storage.store;
  // Replicas on one database: another replica's revocation is seen at the next recheck (cluster/config-sync.ts).
  const keyring = new KeyRing(store, storage.kind === "postgres" ? KEY_RECHECK_MS : Infinity);
  const sharedLimiter = storage.sharedLimiter?.(options.rateLimits ?? DEFAULT_RATE_WINDOWS, (err) =>
    log(`rate-limit counts could not be shared: ${errorMessage(err)}`),
  );
  // Volumes' files: their filesystems mounted before any worker or S3 request can use them.
  const volumeFiles = volumeStorage(options.volumeQuotas ?? "off", options.dataDir, options.volumeGbBytes ?? GB_BYTES, log);
  await volumeFiles.attachAll(storage.management.allVolumes());
  // The management API's state (its own connection to the same, already migrated, file).
  const management = new Management({
    volumeStorage: volumeFiles,
    dataDir: options.dataDir,
    store: storage.management,
    limiter: sharedLimiter,
    dataCenters: options.dataCenters,
    hostDataCenter: options.hostDataCenter,
    rateLimits: options.rateLimits,
    operatorUser: DEFAULT_USER,
    engineEndpoint,
    singleUser: options.singleUser,
    box,
  });

  // The host's GPUs, where the workers run on this host: each GPU worker gets GPUs of its own (docs/gpus.md).
  // Swarm and Kubernetes place workers on other machines; their schedulers hand out GPUs.
  const hostGpus =
    options.driver && (options.driver.name === "process" || options.driver.name === "docker") ? await readHostGpus(management, options, log) : undefined;

  let scaler: Scaler | undefined;
  let modelCache: ModelCache | undefined;
  // What the service tells of itself (metrics/): fed by the hooks below, read at scrape time from the engine.
  const metrics = new ServiceMetrics({
    enabled: options.metrics ?? true,
    storeKind: storage.kind,
    usage: storage.usage,
    ownerOf: (endpointId) => endpoints.get(endpointId)?.userId,
    log,
    usageFlushMs: options.usageFlushMs,
    sampleMs: options.metricsSampleMs,
    sources: {
      endpointIds: () => endpoints.keys(),
      queueDepth: (id) => engine.queuedCount(id),
      workers: (id) => engine.health(id).workers,
      gpus: () => hostGpus?.view() ?? [],
      volumeQuotasEnforced: () => volumeFiles.enforced,
    },
  });
  const startFailures = new StartFailures();
  const releases = new ReleaseManager({
    write: (ops) => engine.write(ops),
    runner: () => scaler,
    log,
    attempts: options.releaseAttempts ?? 3,
    startTimeoutMs: options.releaseStartTimeoutMs ?? 5 * 60_000,
    onStartFailure: (endpointId, workerId, message) => startFailures.record(endpointId, workerId, message),
  });
  // Webhooks: written with each job's change they tell of, delivered from there (webhooks/index.ts), never to the
  // service's own listener (known once it listens, below).
  let webhooks: Webhooks | undefined;
  let listener: ServiceListener | undefined;
  // Nothing is delivered before the service knows whether it serves jobs.
  let wired = false;
  const engine = new JobEngine(
    store,
    { leaseMs, heartbeatMs, logLimits: options.logLimits, queueQuotas: options.queueQuotas, jobHistoryMs: options.jobHistoryMs },
    {
      onDemand: (id) => scaler?.kick(id),
      onTaken: (id) => scaler?.taken(id),
      onFinal: (row) => {
        metrics.jobFinal(row);
        // A completed job proves the endpoint's code runs: a crash loop it was in ends.
        if (row.status === "COMPLETED") scaler?.jobCompleted(row.endpointId);
        options.tracing?.jobs.final(row);
      },
      onRetry: (row) => metrics.retry(row),
      onQuotaRefused: (endpointId, limit) => metrics.quotaRefused(endpointId, limit),
      onCommit: (seconds) => metrics.committed(seconds),
      onLogsDropped: (reason, count) => metrics.logsDropped(reason, count),
      onLogsRemoved: (reason, count) => metrics.logsRemoved(reason, count),
      onStorage: (state) => {
        if (!state.ok)
          log(`storage refuses writes: ${describeStorage(state.cause!)} (${state.message}); requests that write get 503 until it takes them again`);
        else log("storage takes writes again; the service resumes");
      },
      webhookOps: (row, event, output) => webhooks?.ops(row, event, Date.now(), output) ?? [],
      onWebhook: () => webhooks?.outbox.kick(),
      // Followers' hand-offs (engine/handoff.ts sends at most one every few ms; the feed coalesces per tick).
      onHandedOff: () => feed?.publish(HANDOFF_TOPIC, []),
      onWorkerEventError: (event, err) => log(`a subscriber of the worker event "${event}" failed: ${errorMessage(err)}`),
    },
  );
  // A release's probe has come up when the worker registry says it is ready (registered, or /ping 200).
  engine.workerEvents.on("ready", ({ worker }) => releases.ready(worker.id));
  const endpoints = new EndpointRegistry(engine);
  for (const row of await store.endpoints()) endpoints.upsert(row);
  // Replicas on one database would each adopt the same settings; there the operator redeploys instead.
  if (storage.kind !== "postgres") await management.adoptLegacyVolumes(endpoints.values(), log);
  // A removed endpoint's start failures go with it.
  endpoints.onChange((change) => {
    if (change.type === "remove") {
      startFailures.forget(change.row.id);
      metrics.forget(change.row.id);
    }
  });
  await engine.load([...endpoints.values()]);
  webhooks = new Webhooks({
    store,
    box,
    write: (ops) => engine.write(ops),
    log,
    // Replicas on one database: the one serving jobs delivers (known once the service listens, below).
    active: () => wired && servesJobs(),
    recordJson,
    retry: options.webhooks?.retry,
    timeoutMs: options.webhooks?.timeoutMs,
    intervalMs: options.webhooks?.intervalMs,
    onAttempt: (outcome) => metrics.webhookAttempt(outcome),
    addresses: { allow: options.webhooks?.allow, lookup: options.webhooks?.lookup, self: () => listener },
    onRefused: (rule, stage) => metrics.webhookRefused(rule, stage),
  });
  await webhooks.settings.refresh();
  const resealedHooks = await webhooks.settings.reseal();
  if (resealedHooks > 0) log(`sealed ${resealedHooks} webhook signing secret(s) again under the current secrets key`);
  const { configSync, feed, adoptHandedOff } = followReplicas({ options, storage, secrets, webhooks, keyring, engine, endpoints, log });
  /** What uses the storage in the background, then the storage itself and the data directory's lock. */
  const releaseStorage = async () => {
    await sharedLimiter?.stop();
    await configSync?.stop();
    await feed?.close();
    await state.close();
  };

  await seedOperatorKeys(engine, options.apiKeys ?? []);
  const mintKey = keyMinter(engine, keyring);

  const server: Server = createServer();
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 70_000;
  const host = options.host ?? "127.0.0.1";
  try {
    await listen(server, options.port ?? 0, host);
  } catch (err) {
    // Port taken (the caller may retry on another): leave nothing open behind.
    await webhooks.close(0);
    await engine.close();
    await releaseStorage();
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  const localHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  const localUrl = `http://${localHost}:${port}`;
  const url = (options.publicUrl ?? localUrl).replace(/\/+$/, "");
  // The S3 API's own origin (its requests are served once the API is made, below, before any can arrive).
  let s3: VolumeS3 | undefined;
  let s3Origin: S3Origin | undefined;
  if (options.s3Port !== null) {
    try {
      const listenOn = (port: number) =>
        listenS3Origin({ host, port, publicUrl: options.publicUrl, s3PublicUrl: options.s3PublicUrl, keepAliveMs: server.keepAliveTimeout }, (req, res) =>
          serveS3(req, res, false),
        );
      const wanted = options.s3Port ?? 0;
      s3Origin = await listenOn(wanted).catch((err: unknown) => {
        if (!(options.s3PortIsDefault && err instanceof S3ListenError && err.code === "EADDRINUSE")) throw err;
        log(`the S3 API's default port ${wanted} is taken: it listens on a free port instead (set --s3-port to choose one)`);
        return listenOn(0);
      });
    } catch (err) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await webhooks.close(0);
      await engine.close();
      await releaseStorage();
      throw err;
    }
  }
  const serveS3 = (req: IncomingMessage, res: ServerResponse, shared: boolean) => {
    s3!.serve(req, res, shared).catch((err: unknown) => {
      log(`internal error on S3 ${req.method} ${req.url}: ${errorStack(err)}`);
      res.destroy();
    });
  };
  listener = { host, port, urls: [localUrl, url, ...(options.replicaUrl ? [options.replicaUrl] : []), ...(options.clusterUrl ? [options.clusterUrl] : [])] };

  // Replicas on one database: one serves jobs, the others pass job traffic to it (cluster/jobs-role.ts).
  const replicaName = `${hostname()}:${process.pid}:${newId(6)}`;
  const jobsRole = storage.coordination
    ? new JobsRole({
        db: storage.coordination,
        holder: replicaName,
        // Not the public URL, which may be an address in front of all replicas (forwarding there could come back
        // to a follower).
        address: options.replicaUrl ?? localUrl,
        adoptsHandoffs: engine.handsOff,
        log,
        onLost: options.onJobsLeaseLost,
      })
    : undefined;
  await jobsRole?.start();
  const servesJobs = () => jobsRole?.servedBy === undefined;
  // Followers write `/run` jobs themselves only where the replica serving jobs hears of them at once (the feed).
  const handOffAs = jobsRole && feed && engine.handsOff && (options.handOffJobs ?? true) ? replicaName : undefined;
  // Serving jobs from the start: adopt from now on (a failure is said, and the next rescan adopts).
  if (jobsRole && servesJobs()) adoptHandedOff(() => engine.acceptHandoffs());

  // Load-balanced endpoints: worker pool by /ping, proxy, scaling on in-flight requests
  const lb = new LbRouter({
    engine,
    endpoints,
    kick: (id) => scaler?.kick(id),
    log,
    noWorkersReason: (id) => management.statusReason(id),
    waitMs: options.lbWaitMs,
    onAnswered: (endpointId, answer, ms) => metrics.lbAnswered(endpointId, typeof answer === "number" ? answer : REFUSAL_STATUS[answer.kind], ms),
  });
  // On the S3 API's own origin where it has one: tenant files never share the console's.
  const workerBucketDeps = { keys: storage.volumeKeys, box, s3Endpoint: s3Origin?.url ?? `${url}${S3_PREFIX}` };
  // A job whose submission named a bucket (`s3Config`) carries a key of its worker's own on it.
  const jobBuckets = new JobBuckets({ ...workerBucketDeps, log });
  if (options.driver) {
    // Workers of endpoints with a network volume get an S3 key of their own on it (BUCKET_*), on the public address.
    const workerKeys = workerKeyMinter(engine, keyring, {
      bucket: workerBucketDeps,
      jobBuckets,
      volumeOf: (endpoint) => management.volumeOf(endpoint),
      userOf: (endpointId) => endpoints.get(endpointId)?.userId,
    });
    const models = new ModelCache({
      root: join(options.dataDir, "models"),
      hub: new Hub({ url: options.models?.hub ?? DEFAULT_MODEL_HUB, token: options.models?.token }),
      limitBytes: options.models?.cacheSizeBytes,
      retryMs: options.models?.retryMs,
      onEvent: log,
      // A fetch ended: the workers waiting for it start now (or their endpoint says why not).
      onChange: () => scaler?.reconcile(),
    });
    modelCache = models;
    scaler = new Scaler({
      models,
      modelHub: { url: models.hubUrl, ...(options.models?.token ? { token: options.models.token } : {}) },
      engine,
      driver: options.driver,
      // Workers talk to the cluster's address when there is one (any replica passes their traffic on), so a
      // replica that goes away does not take its workers' connection to the service with it.
      apiUrl: options.clusterUrl ?? localUrl,
      endpoints: () => endpoints.values(),
      secrets: (endpoint) => secrets.resolve(endpoint.userId, endpoint.app, endpoint.env, endpoint.resource.secrets ?? []),
      heartbeatMs,
      traces: options.tracing?.export,
      // A REST endpoint's template says them; an app's image endpoint says its own.
      containerAllowances: (endpoint) => management.containerAllowances(endpoint.id) ?? appContainerAllowances(endpoint.resource),
      registryAuth: (endpoint) => management.registryCredentials(endpoint.id),
      mintWorkerKeys: workerKeys.mint,
      revokeWorkerKeys: workerKeys.revoke,
      localArtifact: (path) => storage.artifacts.local(path),
      dataCenterOf: (endpoint) => management.volumeDataCenter(endpoint),
      // A network volume of the endpoint's owner, by id or name (never another user's, never a bare folder).
      volume: (endpoint) => management.volumeOf(endpoint),
      onLog: (endpointId, workerId, line) => {
        releases.line(workerId, line.stream, line.text);
        void engine.appendLogs([{ ts: line.ts, endpointId, workerId, jobId: line.jobId ?? null, stream: line.stream, text: line.text }]);
        const endpoint = endpoints.get(endpointId);
        if (endpoint) options.onWorkerLog?.({ endpoint: endpoint.name, endpointId, workerId, line });
      },
      onEvent: log,
      gpus: hostGpus,
      probeReady: (workerId) => releases.proven(workerId),
      onProbeExit: (workerId, exit) => releases.exited(workerId, exit),
      onStartFailure: (endpointId, workerId, message) => startFailures.record(endpointId, workerId, message),
      onWorkerLife: (event) =>
        event.type === "started" ? metrics.workerStarted(event.workerId, event.endpointId, event.gpus, event.userId) : metrics.workerStopped(event.workerId),
      onColdStart: (endpointId, ms) => metrics.coldStarted(endpointId, ms),
      onWorkerDeath: (endpointId, reason) => metrics.workerDied(endpointId, reason),
      lb,
      // A worker keeps an events long poll open while it lives: silent for this long, it is gone.
      adoptRegistered: storage.coordination ? { silentMs: 3 * heartbeatMs + 5_000 } : undefined,
    });
    // A replica that does not serve jobs starts its workers when it takes over.
    if (servesJobs()) await scaler.start();
  }

  const deployments = new Deployments({
    store,
    write: (ops) => engine.write(ops),
    dropEndpoint: (id) => engine.dropEndpoint(id),
    endpoints,
    dataDir: options.dataDir,
    artifacts: storage.artifacts,
    releases,
    scaler: () => scaler,
    management,
    secrets,
    gpus: () => hostGpus,
    log,
  });
  // The S3 API on network volumes (volumes/s3.ts), and what the management API needs of it.
  const volumeUsage = new VolumeUsage(options.volumeGbBytes, undefined, (id) => storage.management.volume(id)?.size);
  // S3 clients are given the API's own origin; the /s3 prefix of this port stays for those configured with it.
  const volumes: VolumesApi = { keys: storage.volumeKeys, box, usage: volumeUsage, endpoint: s3Origin?.url ?? `${url}${S3_PREFIX}`, region: S3_REGION };
  s3 = new VolumeS3({
    dataDir: options.dataDir,
    volumes: storage.management,
    keys: storage.volumeKeys,
    box,
    authenticateApiKey: (key) => keyring.authenticate(key),
    usage: volumeUsage,
    log,
    ownOrigin: s3Origin?.url,
  });

  const followers = new Set<ServerResponse>();
  const context: ApiContext = {
    engine,
    keyring,
    endpoints,
    url,
    scaler: () => scaler,
    followers,
    log,
    leaseMs,
    heartbeatMs,
    clusterVolumes: () => options.driver,
    clients: clientGuards({ ...DEFAULT_CLIENT_LIMITS, ...options.clientLimits }),
    // apps, environments, builds (deploy/routes.ts)
    store,
    dataDir: options.dataDir,
    artifacts: storage.artifacts,
    jobsServedBy: () => jobsRole?.servedBy,
    jobsReplicaAdopts: () => jobsRole?.servedByAdopter ?? false,
    workersDirect: options.workersDirect ?? true,
    handOffAs,
    maxArtifactBytes: options.maxArtifactBytes ?? MAX_ARTIFACT_BYTES,
    uploadInspectLimits: options.uploadInspectLimits,
    uploadIdleMs: options.uploadIdleMs,
    // network volumes, templates, REST endpoints, keys (management/)
    management,
    secrets,
    webhooks,
    volumes,
    ownVolumeIds: (userId) => storage.management.volumes(userId).map((v) => v.id),
    jobBuckets,
    largeOutputs: new LargeOutputs({
      dataDir: options.dataDir,
      s3Endpoint: workerBucketDeps.s3Endpoint,
      keys: storage.volumeKeys,
      box,
      endpoint: (id) => endpoints.get(id),
      volumeOf: (endpoint) => management.volumeOf(endpoint),
      log,
    }),
    // load-balanced endpoints (lb/)
    lb,
    releases,
    deployments,
    startFailures,
    gpus: () => hostGpus,
    models: () => modelCache,
    idempotency: new IdempotentSubmits({ store: storage.idempotency, now: Date.now }),
    tracing: options.tracing,
    metrics,
  };
  // The LB front takes each connection first and serves plain LB requests and job /runs itself (lb/front.ts)
  const frontWanted = options.lbFront ?? true;
  const front = !frontWanted
    ? undefined
    : LbFront.install(server, {
        lb,
        principal: (key) => keyring.known(key),
        authenticate: (key) => keyring.authenticate(key),
        rateLimit: (principal) => {
          const d = management.rateDecision(principal);
          if (!d) return "";
          return d.allowed ? `RateLimit: ${d.rateLimit}\r\nRateLimit-Policy: ${d.policy}\r\n` : undefined;
        },
        run: (principal, endpointId, body, contentType) => quickRun(context, principal, endpointId, body, contentType),
        // Counted in the HTTP metrics as the dispatcher counts a /run it answers.
        ranRun: metrics.prometheus ? (endpointId, status, startedAt) => metrics.request("POST", "/v2/:endpoint/run", status, startedAt, endpointId) : undefined,
        read: (principal, endpointId, jobId) => timedRead(metrics, endpointId, jobId, quickRead(context, principal, endpointId, jobId)),
        // With traces on, workers' takes and results keep node:http's path, whose request spans the traces show.
        take: options.tracing ? undefined : (principal, body, contentType) => quickTake(context, principal, body, contentType),
        providerCall: options.tracing ? undefined : (principal, call, body) => quickProviderCall(context, principal, call, body),
        tookWorkerCall: metrics.prometheus ? (method, route, status, startedAt) => metrics.request(method, route, status, startedAt, undefined) : undefined,
        relayTo: () => context.jobsServedBy?.(),
        keepAliveMs: server.keepAliveTimeout,
        log,
      });
  await management.attach(context, servesJobs());
  answerUnparsedRequests(server);
  wired = true;
  webhooks.outbox.kick();
  jobsRole?.ready({
    // The jobs as the database has them (the previous holder's running jobs lapse and requeue unless their
    // workers heartbeat here); then this replica serves job traffic, and starts its workers.
    load: async () => {
      await engine.load([...endpoints.values()]);
      // Jobs handed off to the replica that is gone: the load found them (their marks go, they are not queued
      // twice); later ones come on notices. A failure must not stop the takeover: the next rescan adopts.
      adoptHandedOff(() => engine.acceptHandoffs());
    },
    start: async () => {
      // REST endpoints are re-planned by the replica serving jobs; a failure there must not keep its workers down.
      await management.appChanged().catch((err: unknown) => log(`could not refresh REST endpoints: ${errorMessage(err)}`));
      await scaler?.start(CLUSTER_ADOPT_SETTLE_MS);
      webhooks?.outbox.kick();
    },
  });
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    if (options.onRequest) {
      const started = performance.now();
      const report = options.onRequest;
      res.once("close", () =>
        report({
          method: req.method ?? "GET",
          path: (req.url ?? "/").split("?")[0]!,
          status: res.statusCode,
          ms: performance.now() - started,
          // Asked with `x-svc-quiet` (svc dev's own reads, as the failed-job stack's): not a caller's request.
          quiet: req.headers[QUIET_HEADER] !== undefined,
        }),
      );
    }
    // S3 clients sign their own way and want XML errors: the S3 API answers its whole prefix itself.
    if (isS3Target(req.url)) {
      serveS3(req, res, true);
      return;
    }
    handleRequest(context, req, res).catch((err: unknown) => {
      log(`internal error on ${req.method} ${req.url}: ${errorStack(err)}`, requestFields(req));
      sendProblem(res, 500, "The service failed to handle this request");
    });
  });

  metrics.start();
  const timers = startTimers({
    engine,
    leaseMs,
    retentionSweepMs: options.retentionSweepMs ?? 10_000,
    idempotency: context.idempotency,
    servesJobs,
    adoptHandedOff,
    log,
  });

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= shutdown({ timers, releases, lb, hostGpus, scaler, engine, followers, server, s3Origin, front, webhooks, jobsRole, metrics, releaseStorage }));

  return {
    url,
    port,
    s3: s3Origin ? { url: s3Origin.url, port: s3Origin.port } : undefined,
    close,
    mintKey,
    lbFrontStats: () => (front ? { ...front.stats } : undefined),
    async deploy(input) {
      const { endpoints: rows, changed } = await deployInProcess(deployments, keyring, input);
      return rows.map((row) => ({
        id: row.id,
        name: row.name,
        app: row.app,
        env: row.env,
        url: `${url}/v2/${row.id}`,
        type: row.type,
        changed: changed.includes(row.id),
      }));
    },
  };
}
