// The svc service: job API (/v2/{endpoint}), worker protocol (/_worker/v1), state and logs (/v1), over one
// SQLite file. `startService` is what `svc server`, `svc dev`, the tests and the benches call.

import { hostname } from "node:os";
import { existsSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { join } from "node:path";
import type { WorkerBucket, WorkerDriver, WorkerLogLine } from "../drivers/types.js";
import { sweepStaleTempDirs } from "../drivers/owned-temp.js";
import { UserError, errorMessage, errorStack } from "../errors.js";
import { QUIET_HEADER, type Manifest } from "svc/internal";
import { DEFAULT_USER, KeyRing, hashKey, newId, newKey } from "./keys/auth.js";
import { JobEngine, type LogLimits, type QueueQuotas } from "./engine/index.js";
import { quickRead, quickRun } from "./jobs/routes.js";
import { quickTake } from "./workers/routes.js";
import { quickProviderCall } from "./workers/provider-routes.js";
import { handleRequest, recordJson, type ApiContext } from "./api.js";
import { problemResponse, REFUSAL_STATUS, sendProblem } from "./http/problems.js";
import { ServiceMetrics } from "./metrics/index.js";
import { MAX_ARTIFACT_BYTES, sweepUploads } from "./deploy/upload.js";
import type { InspectLimits } from "../artifact/inspect.js";
import { Scaler } from "./workers/scaler.js";
import { appContainerAllowances } from "./workers/worker-kinds.js";
import { ModelCache } from "./models/cache.js";
import { DEFAULT_MODEL_HUB, Hub } from "./models/hub.js";
import { openServiceStorage, type ServiceStorage } from "./stores.js";
import { redactStoreUrl } from "./store/url.js";
import { startConfigSync } from "./cluster/config-sync.js";
import { createChangeFeed } from "./cluster/change-feed.js";
import { Webhooks } from "./webhooks/index.js";
import type { RetryPolicy } from "./webhooks/schedule.js";
import type { ServiceListener, WebhookLookup } from "./webhooks/address-policy.js";
import { JobsRole } from "./cluster/jobs-role.js";
import { HANDOFF_TOPIC } from "./store/postgres/index.js";

/** How long a key's answer is trusted on replicas sharing a database before it is looked up again. */
const KEY_RECHECK_MS = 500;
/** Replicas re-read the configuration this often besides when the change feed tells them to. */
const CONFIG_POLL_MS = 5_000;
/** The replica serving jobs looks for handed-off jobs this often besides when the change feed tells it. */
const HANDOFF_RESCAN_MS = 2_000;
import { Secrets } from "./secrets/index.js";
import { resealRegistryAuths } from "./management/registry-auths.js";
import { IdempotentSubmits } from "./idempotency/index.js";
import { SECRETS_KEY_FILE, SecretBox, loadSecretKeys } from "./secrets/box.js";
import { isS3Target, S3_PREFIX, S3_REGION, VolumeS3 } from "./volumes/s3.js";
import { listenS3Origin, S3ListenError, type S3Origin } from "./volumes/s3-origin.js";
import { GB_BYTES, VolumeUsage } from "./volumes/usage.js";
import { volumeStorage, type VolumeQuotaMode } from "./volumes/storage.js";
import type { VolumesApi } from "./volumes/index.js";
import { LargeOutputs } from "./volumes/large-outputs.js";
import { mintWorkerBucket, revokeWorkerBucket, type WorkerBucketDeps } from "./volumes/worker-bucket.js";
import { JobBuckets } from "./volumes/job-bucket.js";
import type { EndpointRow, Store, StoreOp } from "./store/types.js";
import type { Tracing } from "./tracing/index.js";
import type { Log, LogFields } from "./logging.js";
import { Management } from "./management/index.js";
import type { DataCenter } from "./management/datacenters.js";
import { DEFAULT_RATE_WINDOWS, type RateWindow } from "./keys/ratelimit.js";
import { LbFront } from "./lb/front.js";
import { LbRouter } from "./lb/index.js";
import { lockDataDir } from "./store/data-lock.js";
import { secureDataDir } from "./store/private-files.js";
import { clientGuards, DEFAULT_CLIENT_LIMITS, type ClientLimits } from "./http/slow-clients.js";
import { engineEndpoint } from "./endpoints/rows.js";
import { EndpointRegistry } from "./endpoints/registry.js";
import { HostGpus } from "../gpus/host.js";
import { readInventory, type GpuInventory } from "../gpus/inventory.js";
import { hostGpuTypes } from "./management/datacenters.js";

/**
 * How long a replica that takes over serving jobs waits before it starts workers: the workers the previous one
 * started retry with backoff up to 5 s (runtime/api.ts) and register here meanwhile, to be adopted, not doubled.
 */
const CLUSTER_ADOPT_SETTLE_MS = 6_000;

export { endpointId, engineEndpoint, planDeploy } from "./endpoints/rows.js";
import { ReleaseManager } from "./releases/manager.js";
import { describeStorage, storageCause } from "./store/faults.js";
import { StartFailures } from "./releases/start-failures.js";
import { Deployments } from "./deploy/deployments.js";
import { deployInProcess } from "./deploy/in-process.js";

export { ReleaseFailedError } from "./deploy/deployments.js";

export interface ServiceOptions {
  dataDir: string;
  /**
   * Why this service must serve one user only (`svc server` with process workers and no sandbox, unless the
   * operator says single-tenant): it refuses to start over a store holding keys of several users, and refuses
   * keys for a new user (409).
   */
  singleUser?: string;
  /** A PostgreSQL URL: the state goes there instead of the data directory's SQLite file (storage.ts). */
  storeUrl?: string;
  /**
   * This replica served jobs and lost the lease to (the database did not answer for a lease period): another
   * replica may serve them now, so this one must not go on. `svc server` exits (its supervisor restarts it as a
   * follower); without this hook it is only logged.
   */
  onJobsLeaseLost?(): void;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 = any free port (the default). */
  port?: number;
  /**
   * The S3 API's own port, apart from the console and the job API (volumes/s3-origin.ts): 0 = any free port (the
   * default), null = none (the API is then only under /s3 of `port`). `svc server`: defaultS3Port.
   */
  s3Port?: number | null;
  /**
   * `s3Port` is a default rule's, not the operator's: when another process holds it, the S3 API takes any free port
   * and the log says which (an operator's own port taken stays an error).
   */
  s3PortIsDefault?: boolean;
  /** The address S3 clients use, when it differs from the S3 listener's (default: publicUrl's host at the S3 port). */
  s3PublicUrl?: string;
  /** Where workers run; none => workers come from outside (tests acting as workers). */
  driver?: WorkerDriver;
  /**
   * The host's model cache (docs/models.md): the Hugging Face-compatible hub models are fetched from (default
   * https://huggingface.co), its token, and the size past which least recently used models are evicted (bytes;
   * unset: none). The cache is `<dataDir>/models`.
   */
  models?: { hub?: string; token?: string; cacheSizeBytes?: number; retryMs?: number };
  /** Accepted as admin keys of the default user (e.g. SVC_API_KEY). */
  apiKeys?: string[];
  /** The address clients use, when it differs from the listening one. */
  publicUrl?: string;
  /** Where the other replicas on the same database reach this one (default: the listening address). */
  replicaUrl?: string;
  /** The address of all replicas together (a load balancer in front of them): what workers are given. */
  clusterUrl?: string;
  /** Tell workers the replica serving jobs, to reach it straight (default true). */
  workersDirect?: boolean;
  /** Replicas that do not serve jobs write `/run` jobs themselves, for the one that does to adopt (default true). */
  handOffJobs?: boolean;
  /** A lease lapses this long after the last heartbeat (default 30 s). */
  leaseMs?: number;
  /** Workers heartbeat this often (default 5 s). */
  heartbeatMs?: number;
  /** Expired results, and logs past their retention, are deleted this often (default 10 s). */
  retentionSweepMs?: number;
  /** Quotas and retention of worker logs (default DEFAULT_LOG_LIMITS in engine/log-quota.ts; svc server: config.ts). */
  logLimits?: Partial<LogLimits>;
  /** How long a job's record stays as history after its result expired (default 7 days; 0: not kept). */
  jobHistoryMs?: number;
  /** Operator messages (worker starts, internal errors), with what they are about; the CLI sends them to stderr (logging.ts). */
  log?: Log;
  /** Every line a worker writes, as it comes (`svc dev` prints them in its terminal); the store keeps them too. */
  onWorkerLog?: (entry: { endpoint: string; endpointId: string; workerId: string; line: WorkerLogLine }) => void;
  /** Largest build artifact accepted (default 1.5 GB, or SVC_MAX_ARTIFACT_BYTES). */
  maxArtifactBytes?: number;
  /** How an uploaded archive may expand: entries, bytes, ratio, manifest size (default: a worker's limits). */
  uploadInspectLimits?: Partial<InspectLimits>;
  /** An upload that sends nothing for this long is cut off with 408 (default 60 s). */
  uploadIdleMs?: number;
  /** Data centers (default: one, "local"); the first (or hostDataCenter) is this machine. */
  dataCenters?: DataCenter[];
  hostDataCenter?: string;
  /** Per-user rate-limit windows (default DEFAULT_RATE_WINDOWS in src/service/ratelimit.ts). */
  rateLimits?: RateWindow[];
  /** Queued jobs and input bytes per user and endpoint (default DEFAULT_QUEUE_QUOTAS, engine/quotas.ts). */
  queueQuotas?: QueueQuotas;
  /** How long a request to a load-balanced endpoint waits for a ready worker (default 60 s). */
  lbWaitMs?: number;
  /**
   * Serve plain load-balanced requests and job `/run`s on the LB front (lb/front.ts) instead of node:http. Default on;
   * `SVC_LB_FRONT=off` in the environment turns it off (everything then goes through node:http, as before).
   */
  lbFront?: boolean;
  /**
   * Called once per request node:http answered, when its answer ends (finished or cut off): `svc dev`'s request
   * log. Requests the LB front serves itself are not seen: a caller that wants every one turns `lbFront` off.
   */
  onRequest?: (request: { method: string; path: string; status: number; ms: number; quiet: boolean }) => void;
  /**
   * The key that seals secrets at rest (base64 or hex of 32 bytes), and keys values may still be sealed with
   * (after a rotation). Without a current key: the key in `file` (outside the data directory, so its backups do not
   * hold it), else `<dataDir>/secrets-key`; either made on the first start.
   */
  secretsKeys?: { current?: string; previous?: string[]; file?: string };
  /** What a slow client may cost (send stall timeout, follower caps...); default DEFAULT_CLIENT_LIMITS (svc server parses them from its environment: config.ts). */
  clientLimits?: Partial<ClientLimits>;
  /** Probe workers tried per changed endpoint before a release fails (default 3, or SVC_RELEASE_ATTEMPTS). */
  releaseAttempts?: number;
  /** How long a release's new worker may take to come up (default 5 min, or SVC_RELEASE_START_TIMEOUT_MS). */
  releaseStartTimeoutMs?: number;
  /**
   * This host's GPUs, for a driver whose workers run here (process, Docker): how they are read (default
   * `nvidia-smi` on PATH) and how often utilization and memory are sampled (default 5 s). docs/gpus.md.
   */
  gpus?: { read?: () => Promise<GpuInventory>; sampleMs?: number };
  /**
   * Webhook delivery: the retry schedule (default 5 attempts over a few minutes), an attempt's time limit, how often
   * the outbox is read; where webhooks may go besides public addresses (`allow`: CIDRs, addresses, host names,
   * `*.domain`; default none), and the resolver that names are looked up with at connect time (default the system's).
   */
  webhooks?: { retry?: Partial<RetryPolicy>; timeoutMs?: number; intervalMs?: number; allow?: readonly string[]; lookup?: WebhookLookup };
  /**
   * Tests only: the bytes one "GB" of a network volume's `size` stands for (default 1 GiB), so a test can fill a
   * volume quickly. `svc server` reads it from SVC_TEST_VOLUME_GB_BYTES. docs/volumes.md.
   */
  volumeGbBytes?: number;
  /**
   * Whether a network volume's size binds what workers write to it: `loop`, a filesystem of its own per volume
   * (volumes/storage.ts; `svc server` checks the host can); `off` (default), its size binds S3 writes only.
   */
  volumeQuotas?: VolumeQuotaMode;
  /**
   * Spans of requests and jobs (tracing/index.ts loadTracing), when the operator configured traces; the caller made
   * it and shuts it down after the service closed. Absent: nothing is traced and no tracing code runs.
   */
  tracing?: Tracing;
  /** Prometheus' /metrics and the recent series behind the charts (default on; SVC_METRICS=off). Usage is always kept. */
  metrics?: boolean;
  /** How often running workers' time is written to usage (default a minute). */
  usageFlushMs?: number;
  /** How often queue depth and workers are sampled into the recent series (default 5 s; tests make it short). */
  metricsSampleMs?: number;
}

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

const SCOPE_PATTERN = /^(admin|metrics|jobs:\*|jobs:[a-z0-9]+|worker:[a-z0-9]+)$/;

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

/**
 * Read this host's GPUs (once now, then every few seconds for utilization and memory, and on demand). The host
 * data center offers the type ids its GPUs satisfy, unless the operator set them (SVC_GPU_TYPES, or the data
 * centers given): those stay, as an override.
 */
async function readHostGpus(management: Management, options: ServiceOptions, log: (message: string) => void): Promise<HostGpus> {
  const config = management.context.dataCenters;
  const override = hostGpuTypes(config);
  const offer = (gpus: HostGpus) => {
    if (override.length > 0) return;
    const typeIds = gpus.typeIds();
    config.dataCenters = config.dataCenters.map((d) => (d.id === config.host ? { ...d, gpuTypes: typeIds } : d));
  };
  const gpus: HostGpus = new HostGpus({
    read: options.gpus?.read ?? (() => readInventory()),
    override,
    sampleMs: options.gpus?.sampleMs,
    log,
    onChange: () => {
      // The first read is before the management API is attached: it plans REST endpoints with what it found.
      if (!started) return;
      offer(gpus);
      // REST endpoints waiting for a type this host now has (or no longer has) are planned again.
      void management.appChanged().catch((err: unknown) => log(`could not refresh REST endpoints after the GPUs changed: ${errorMessage(err)}`));
    },
  });
  let started = false;
  const inventory = await gpus.refresh();
  started = true;
  offer(gpus);
  if (inventory.gpus.length > 0) {
    log(`${inventory.gpus.length} GPU(s) on this host, each given to one worker at a time: ${inventory.gpus.map((g) => `${g.index} ${g.name}`).join(", ")}`);
  } else {
    // Said once at start: a GPU endpoint deployed here still runs, on the CPU (deploys and the endpoint page say so too).
    const why = gpus.readError ? `nvidia-smi failed: ${gpus.readError}` : "no nvidia-smi on PATH, or it lists none";
    log(`no GPU on this host (${why}): the workers of GPU endpoints run on its CPU`);
  }
  gpus.startSampling();
  return gpus;
}

/** At start, a data directory the service cannot write is a clear error naming it and what to do. */
function unwritable<T>(dataDir: string, open: () => T): T {
  try {
    return open();
  } catch (err) {
    throw unwritableError(dataDir, err);
  }
}

async function unwritableAsync<T>(dataDir: string, open: () => Promise<T>): Promise<T> {
  try {
    return await open();
  } catch (err) {
    throw unwritableError(dataDir, err);
  }
}

function unwritableError(dataDir: string, err: unknown): unknown {
  if (err instanceof UserError) return err;
  const cause = storageCause(err) ?? ((err as { code?: string }).code === "EACCES" ? "read-only" : undefined);
  if (cause === undefined) return err;
  return new UserError(
    `The service cannot write its data directory ${dataDir}: ${describeStorage(cause).replace("The service's storage", "it")} (${errorMessage(err)})`,
    {
      hint:
        cause === "full"
          ? "Free space on that filesystem, or pass another --data-dir."
          : "Make it writable by this user, or pass another --data-dir (SVC_DATA_DIR).",
      cause: err,
    },
  );
}

/** What the service keeps, opened: the storage, and the secrets readable with the current key. */
interface OpenedState {
  storage: ServiceStorage;
  secrets: Secrets;
  /** What seals secrets at rest (users' secrets, webhook signing secrets). */
  box: SecretBox;
  /** Close the storage and release the data directory's lock. */
  close(): Promise<void>;
}

/**
 * Make the data directory the service's own and lock it, open the storage and the secrets (resealing those under
 * an earlier key), and refuse a store of several users where one is required. What was opened is closed again,
 * and the lock released, when a later step fails.
 */
async function openState(options: ServiceOptions, log: (message: string) => void): Promise<OpenedState> {
  // Before anything is opened there: what the service keeps is its own (private-files.ts).
  await unwritableAsync(options.dataDir, () => secureDataDir(options.dataDir, { sqlite: !options.storeUrl }));
  const dataLock = unwritable(options.dataDir, () => lockDataDir(options.dataDir));
  let storage: ServiceStorage | undefined;
  try {
    storage = await unwritableAsync(options.dataDir, () => openServiceStorage({ dataDir: options.dataDir, storeUrl: options.storeUrl }));
    if (storage.kind === "postgres") log(`state kept in PostgreSQL at ${redactStoreUrl(options.storeUrl!)}`);
    // Uploads a crashed process left half-written: nothing refers to them.
    const swept = await sweepUploads(options.dataDir);
    if (swept > 0) log(`removed ${swept} unfinished upload(s) left by an earlier run`);
    const box = new SecretBox(loadSecretKeys(options.dataDir, options.secretsKeys));
    const secrets = new Secrets(storage.secrets, box, log);
    if (options.secretsKeys?.file && existsSync(join(options.dataDir, SECRETS_KEY_FILE))) {
      log(
        `the secrets key is read from ${options.secretsKeys.file}, but ${join(options.dataDir, SECRETS_KEY_FILE)} is still there: once it is no longer needed (its key is the file's, or SVC_SECRETS_KEY_PREVIOUS), remove it so copies of the data directory do not hold a key`,
      );
    }
    const resealed = await secrets.rotate();
    if (resealed > 0) log(`sealed ${resealed} secret(s) again under the current secrets key`);
    const resealedAuths = await resealRegistryAuths(storage.management, box, log);
    if (resealedAuths > 0) log(`sealed ${resealedAuths} registry auth(s) again under the current secrets key`);
    if (options.singleUser) {
      const users = (await storage.management.keyUsers?.()) ?? [];
      if (users.length > 1) {
        throw new UserError(
          `This service holds keys of ${users.length} users (${users.join(", ")}), and ${options.singleUser}: one tenant's worker could read another's data`,
          {
            hint: "Install bubblewrap (apt-get install bubblewrap) so that process workers run sandboxed (SVC_SANDBOX=auto), run Docker workers (--workers docker), or pass --single-tenant if every user here is the same tenant.",
          },
        );
      }
    }
    const opened = storage;
    return {
      storage,
      secrets,
      box,
      close: async () => {
        await opened.close();
        dataLock.release();
      },
    };
  } catch (err) {
    await storage?.close();
    dataLock.release();
    throw err;
  }
}

/** The operator's keys (SVC_API_KEY): admin keys of the default user, under ids derived from them (so a restart finds them again). */
async function seedOperatorKeys(engine: JobEngine, apiKeys: readonly string[]): Promise<void> {
  if (apiKeys.length === 0) return;
  const now = Date.now();
  await engine.write(
    apiKeys.map((key) => {
      const hash = hashKey(key);
      return {
        op: "insertKey",
        key: { id: `k${hash.slice(0, 15)}`, hash, userId: DEFAULT_USER, scopes: ["admin"], createdAt: now, revokedAt: null },
      } as StoreOp;
    }),
  );
}

/** Service.mintKey: a new key with these scopes (the tests' and `svc dev`'s way to keys without HTTP). */
function keyMinter(engine: JobEngine, keyring: KeyRing) {
  return async (opts: { scopes: string[]; userId?: string }): Promise<{ id: string; key: string }> => {
    const bad = opts.scopes.filter((s) => !SCOPE_PATTERN.test(s));
    if (opts.scopes.length === 0 || bad.length > 0) {
      throw new UserError("Invalid key scopes", {
        problems: bad.map((s) => `unknown scope "${s}"`),
        hint: "Scopes: admin, jobs:*, jobs:<endpointId>, worker:<endpointId>.",
      });
    }
    const worker = opts.scopes.some((s) => s.startsWith("worker:"));
    const id = newId(8);
    const key = newKey(worker ? "svcw" : "svc");
    await engine.write([
      { op: "insertKey", key: { id, hash: hashKey(key), userId: opts.userId ?? DEFAULT_USER, scopes: opts.scopes, createdAt: Date.now(), revokedAt: null } },
    ]);
    keyring.forget();
    return { id, key };
  };
}

/**
 * The keys a started worker gets, and their revocation when it ends: its worker token (its endpoint's protocol),
 * a jobs key of its owner (for calls to other endpoints), and an S3 key on its endpoint's network volume when it
 * has one (volumes/worker-bucket.ts). Kept under the worker's id, so that they can be revoked when the worker
 * ends, even one adopted after a restart.
 */
function workerKeyMinter(
  engine: JobEngine,
  keyring: KeyRing,
  volumes: {
    bucket: WorkerBucketDeps;
    jobBuckets: Pick<JobBuckets, "revoke">;
    volumeOf(endpoint: EndpointRow): { id: string } | undefined;
    /** The owner of an endpoint (whose keys a worker's job keys are). */
    userOf(endpointId: string): string | undefined;
  },
) {
  const minted = new Map<string, string[]>();
  return {
    async mint(endpoint: EndpointRow, workerId: string): Promise<{ workerToken: string; apiKey: string; bucket?: WorkerBucket }> {
      const volume = volumes.volumeOf(endpoint);
      const token = newKey("svcw");
      const apiKey = newKey("svc");
      const apiKeyId = `${workerId}-api`;
      const now = Date.now();
      await engine.write([
        {
          op: "insertKey",
          key: { id: workerId, hash: hashKey(token), userId: endpoint.userId, scopes: [`worker:${endpoint.id}`], createdAt: now, revokedAt: null },
        },
        { op: "insertKey", key: { id: apiKeyId, hash: hashKey(apiKey), userId: endpoint.userId, scopes: ["jobs:*"], createdAt: now, revokedAt: null } },
      ]);
      minted.set(workerId, [workerId, apiKeyId]);
      keyring.forget();
      const bucket = volume
        ? await mintWorkerBucket(volumes.bucket, { userId: endpoint.userId, workerId, endpointName: endpoint.name, volumeId: volume.id })
        : undefined;
      return { workerToken: token, apiKey, ...(bucket ? { bucket } : {}) };
    },
    async revoke(workerId: string, endpointId: string): Promise<void> {
      // A worker adopted after a restart has its keys under the same ids, minted by the earlier run.
      const ids = minted.get(workerId) ?? [workerId, `${workerId}-api`];
      minted.delete(workerId);
      await engine.write(ids.map((id) => ({ op: "deleteKey", id }) as StoreOp));
      keyring.forget();
      await revokeWorkerBucket(volumes.bucket, workerId);
      const userId = volumes.userOf(endpointId);
      if (userId) await volumes.jobBuckets.revoke(workerId, userId);
    },
  };
}

/**
 * Requests Node's parser refuses (headers over 16 KiB, a method it does not know, bad framing) get a
 * problem+json answer too, instead of Node's bare status line; so does CONNECT, which asks for a tunnel.
 */
function answerUnparsedRequests(server: Server): void {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex & { _httpMessage?: { headersSent?: boolean } }) => {
    // As Node's own handler: nothing to say on a reset socket or once an answer has started.
    if (!socket.writable || err.code === "ECONNRESET" || socket._httpMessage?.headersSent) {
      socket.destroy();
      return;
    }
    const status = err.code === "HPE_HEADER_OVERFLOW" ? 431 : err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400;
    const detail =
      status === 431
        ? "The request's headers are larger than the limit of 16 KiB"
        : status === 408
          ? "The request's headers did not arrive in time"
          : `The request is not valid HTTP (${err.code ?? err.message})`;
    socket.end(problemResponse(status, detail, "connection: close\r\n"));
  });
  // This service is no proxy. Node hands CONNECT only to a 'connect' listener and, without one, closes the
  // socket with no answer.
  server.on("connect", (_req: IncomingMessage, socket: Duplex) => {
    socket.on("error", () => socket.destroy()); // the client went away: nothing to answer
    socket.end(
      problemResponse(
        405,
        "CONNECT is not supported: this service is not a proxy",
        "allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\nconnection: close\r\n",
      ),
    );
  });
}

/** The service's clocks: the engine's tick, the hand-off rescan and the retention sweep. Unref'd: they keep no process alive. */
function startTimers(t: {
  engine: JobEngine;
  leaseMs: number;
  retentionSweepMs: number;
  idempotency: Pick<IdempotentSubmits, "sweep">;
  servesJobs(): boolean;
  adoptHandedOff(): void;
  log(message: string): void;
}): NodeJS.Timeout[] {
  const { engine, leaseMs } = t;
  const ticker = setInterval(
    () => {
      engine.tick();
      // Outside workers that stopped talking to us no longer count in /health.
      const now = Date.now();
      for (const w of engine.workers.values()) {
        if (!w.managed && w.polling === 0 && w.held.size === 0 && now - w.lastSeen > Math.max(3 * leaseMs, 60_000)) engine.workerGone(w.id);
      }
    },
    Math.max(20, Math.min(250, Math.floor(leaseMs / 4))),
  );
  // A notice is a hint (lost while the listener reconnects, or sent before this replica listened): rescan.
  const handoffRescan = setInterval(() => {
    if (t.servesJobs()) t.adoptHandedOff();
  }, HANDOFF_RESCAN_MS);
  const sweeper = setInterval(() => {
    // Replicas on one database: the one serving jobs sweeps for all (the others' deletes would only repeat it).
    if (!t.servesJobs()) return;
    engine.sweep().catch((err: unknown) => t.log(`retention sweep failed: ${errorMessage(err)}`));
    engine.sweepJobHistory().catch((err: unknown) => t.log(`job history sweep failed: ${errorMessage(err)}`));
    engine.sweepLogs().catch((err: unknown) => t.log(`log retention sweep failed: ${errorMessage(err)}`));
    t.idempotency.sweep().catch((err: unknown) => t.log(`idempotency key sweep failed: ${errorMessage(err)}`));
  }, t.retentionSweepMs);
  const timers = [ticker, handoffRescan, sweeper];
  for (const timer of timers) timer.unref();
  return timers;
}

/**
 * Close the service: its clocks first, then what starts and stops workers, the engine (its writes settled), the
 * log followers and the server (idle connections at once, the others after 200 ms), the webhook deliveries, the
 * jobs lease, and last the storage and the data directory's lock.
 */
async function shutdown(s: {
  timers: NodeJS.Timeout[];
  releases: ReleaseManager;
  lb: LbRouter;
  hostGpus?: HostGpus;
  scaler?: Scaler;
  engine: JobEngine;
  followers: Set<ServerResponse>;
  server: Server;
  s3Origin?: S3Origin;
  front?: LbFront;
  webhooks: Pick<Webhooks, "close">;
  jobsRole?: JobsRole;
  metrics: Pick<ServiceMetrics, "close">;
  releaseStorage(): Promise<void>;
}): Promise<void> {
  for (const timer of s.timers) clearInterval(timer);
  s.releases.close();
  s.lb.close();
  s.hostGpus?.close();
  await s.scaler?.close();
  await s.engine.close();
  for (const res of s.followers) res.end();
  await new Promise<void>((resolve) => {
    s.server.close(() => resolve());
    s.front?.close();
    s.server.closeIdleConnections();
    setTimeout(() => {
      s.front?.destroy();
      s.server.closeAllConnections();
    }, 200).unref();
  });
  await s.s3Origin?.close();
  await s.webhooks.close();
  await s.jobsRole?.stop();
  // After the workers stopped: their time up to now is written.
  await s.metrics.close();
  await s.releaseStorage();
}

/** What a request's log line says of it: the id a proxy or client gave it (x-request-id), when there is one. */
function requestFields(req: IncomingMessage): LogFields | undefined {
  const id = req.headers["x-request-id"];
  return typeof id === "string" && id !== "" ? { requestId: id } : undefined;
}

/** A job API read the LB front answers itself, counted as the dispatcher counts it (one it gives up is counted there). */
function timedRead(
  metrics: ServiceMetrics,
  endpointId: string,
  jobId: string | undefined,
  answer: string | Promise<string | undefined> | undefined,
): string | Promise<string | undefined> | undefined {
  if (answer === undefined || !metrics.prometheus) return answer;
  const started = performance.now();
  const route = jobId === undefined ? "/v2/:endpoint/health" : "/v2/:endpoint/status/:job";
  if (typeof answer === "string") {
    metrics.request("GET", route, 200, started, endpointId);
    return answer;
  }
  return answer.then((text) => {
    if (text !== undefined) metrics.request("GET", route, 200, started, endpointId);
    return text;
  });
}

/** Listen on host:port; a failure (the port taken) leaves the server not listening. */
function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/**
 * Replicas on one database (PostgreSQL): what the others change reaches this one within a second (the change
 * feed's notices, polling where they are lost), and `/run` jobs they write are adopted by the replica serving
 * jobs. On SQLite there is no other replica: nothing to follow, and adopting finds nothing.
 */
function followReplicas(r: {
  options: ServiceOptions;
  storage: ServiceStorage;
  secrets: Secrets;
  webhooks: Pick<Webhooks, "settings">;
  keyring: KeyRing;
  engine: JobEngine;
  endpoints: EndpointRegistry;
  log(message: string): void;
}) {
  const { options, storage, secrets, webhooks, keyring, engine, endpoints, log } = r;
  // What other replicas on the same database change reaches this one within a second.
  const configSync =
    storage.kind === "postgres"
      ? startConfigSync({
          endpoints,
          storedEndpoints: () => storage.store.endpoints(),
          localWritesSettled: () => engine.settled(),
          dropped: (id) => engine.dropEndpoint(id),
          reload: async () => {
            await storage.reload();
            secrets.refresh();
            await webhooks.settings.refresh();
          },
          onError: (err) => log(`could not read what other replicas changed: ${errorMessage(err)}`),
          // The change feed below says when; this only covers notices lost while its listener reconnected.
          intervalMs: CONFIG_POLL_MS,
        })
      : undefined;
  // Configuration and key changes, told at their commit by the database (schema.ts's triggers): read at once.
  let feedFailing = false;
  const feed =
    configSync && options.storeUrl && storage.coordination
      ? createChangeFeed({
          url: options.storeUrl,
          db: storage.coordination,
          onError: (err) => {
            // Said once per outage: the listener retries every 2 s at most, and polling covers it meanwhile.
            if (!feedFailing)
              log(
                `not hearing of other replicas' changes at once (${errorMessage(err)}); reading them every ${CONFIG_POLL_MS / 1000} s until the database answers`,
              );
            feedFailing = true;
          },
        })
      : undefined;
  feed?.subscribe("config", () => void configSync?.round());
  feed?.subscribe("keys", () => keyring.forget());
  // `/run` jobs another replica wrote, told after their commit: the replica serving jobs adopts them
  // (engine/handoff.ts; a no-op on the others).
  let adoptFailing = false;
  const adoptHandedOff = (adopt: () => Promise<number> = () => engine.adoptHandedOff()) =>
    void adopt().then(
      () => (adoptFailing = false),
      (err: unknown) => {
        // Said once per outage: the jobs stay in the database, marked, and the next notice or rescan adopts them.
        if (!adoptFailing) log(`could not take the jobs other replicas handed off: ${errorMessage(err)}`);
        adoptFailing = true;
      },
    );
  feed?.subscribe(HANDOFF_TOPIC, () => adoptHandedOff(() => engine.adoptHandedOff({ announced: true })));
  // Notices sent while the listener was away are lost: read everything again once it is back.
  feed?.onResync(() => {
    feedFailing = false;
    keyring.forget();
    void configSync?.round();
    adoptHandedOff();
  });
  return { configSync, feed, adoptHandedOff };
}
