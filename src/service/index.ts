// The svc service: job API (/v2/{endpoint}), worker protocol (/_worker/v1), state and logs (/v1), over one
// SQLite file. `startService` is what `svc server`, `svc dev`, the tests and the benches call.

import { createHash } from "node:crypto";
import { hostname } from "node:os";
import { createReadStream, existsSync } from "node:fs";
import { chmod, copyFile, mkdir, rename, stat } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { join } from "node:path";
import type { WorkerDriver, WorkerLogLine } from "../drivers/types.js";
import { UserError } from "../errors.js";
import type { Manifest, ManifestResource } from "../sdk/manifest.js";
import { DEFAULT_USER, KeyRing, hashKey, newId, newKey } from "./auth.js";
import { JobEngine, type EngineEndpoint } from "./engine.js";
import { quickRead, quickRun } from "./job-routes.js";
import { handleRequest, recordJson, type ApiContext } from "./api.js";
import { problemResponse, sendProblem } from "./http.js";
import { MAX_ARTIFACT_BYTES, sweepUploads } from "./deploy/upload.js";
import type { InspectLimits } from "../artifact/inspect.js";
import { Scaler } from "./scaler.js";
import { openServiceStorage, type ServiceStorage } from "./storage.js";
import { redactStoreUrl } from "./store-url.js";
import { startConfigSync } from "./cluster/config-sync.js";
import { createChangeFeed } from "./cluster/change-feed.js";
import { WebhookOutbox } from "./webhook-outbox.js";
import { JobsRole } from "./cluster/jobs-role.js";
import { HANDOFF_TOPIC } from "./store/postgres/index.js";

/** How long a key's answer is trusted on replicas sharing a database before it is looked up again. */
const KEY_RECHECK_MS = 500;
/** Replicas re-read the configuration this often besides when the change feed tells them to. */
const CONFIG_POLL_MS = 5_000;
/** The replica serving jobs looks for handed-off jobs this often besides when the change feed tells it. */
const HANDOFF_RESCAN_MS = 2_000;
import { Secrets } from "./secrets/index.js";
import { SECRETS_KEY_FILE, SecretBox, loadSecretKeys } from "./secrets/box.js";
import { isS3Target, S3_PREFIX, S3_REGION, VolumeS3 } from "./volumes/s3.js";
import { VolumeUsage } from "./volumes/usage.js";
import type { VolumesApi } from "./volumes/index.js";
import { missingSecrets } from "./secrets/check.js";
import { reservedEnvInResources } from "./deploy/resource-rules.js";
import type { EndpointRow, Store, StoreOp } from "./store/types.js";
import { Management } from "./management/index.js";
import type { DataCenter } from "./management/datacenters.js";
import { DEFAULT_RATE_WINDOWS, type RateWindow } from "./ratelimit.js";
import { LbFront } from "./lb/front.js";
import { LbRouter } from "./lb/index.js";
import { lockDataDir } from "./data-lock.js";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, secureDataDir } from "./private-files.js";
import { clientGuards, DEFAULT_CLIENT_LIMITS, type ClientLimits } from "./slow-clients.js";
import { engineEndpoint, planDeploy } from "./endpoint-rows.js";
import { EndpointRegistry } from "./endpoint-registry.js";
import { HostGpus, gpuShortfalls } from "../gpus/host.js";
import { readInventory, type GpuInventory } from "../gpus/inventory.js";
import { hostGpuTypes } from "./management/datacenters.js";

/**
 * How long a replica that takes over serving jobs waits before it starts workers: the workers the previous one
 * started retry with backoff up to 5 s (runtime/api.ts) and register here meanwhile, to be adopted, not doubled.
 */
const CLUSTER_ADOPT_SETTLE_MS = 6_000;

export { endpointId, engineEndpoint, planDeploy } from "./endpoint-rows.js";
import { ReleaseManager } from "./releases/manager.js";
import { describeStorage, storageCause } from "./store/faults.js";
import { StartFailures } from "./releases/start-failures.js";
import type { ReleaseRow } from "./deploy/types.js";

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
  /** Where workers run; none => workers come from outside (tests acting as workers). */
  driver?: WorkerDriver;
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
  /** Expired results are deleted this often (default 10 s). */
  retentionSweepMs?: number;
  /** Operator messages (worker starts, internal errors); the CLI sends them to stderr. */
  log?: (message: string) => void;
  /** Every line a worker writes, as it comes (`svc dev` prints them in its terminal); the store keeps them too. */
  onWorkerLog?: (entry: { endpoint: string; endpointId: string; workerId: string; line: WorkerLogLine }) => void;
  /** issue 5: largest build artifact accepted (default 1.5 GB, or SVC_MAX_ARTIFACT_BYTES). */
  maxArtifactBytes?: number;
  /** How an uploaded archive may expand: entries, bytes, ratio, manifest size (default: a worker's limits). */
  uploadInspectLimits?: Partial<InspectLimits>;
  /** An upload that sends nothing for this long is cut off with 408 (default 60 s). */
  uploadIdleMs?: number;
  /** issue 4: data centers (default: one, "local"); the first (or hostDataCenter) is this machine. */
  dataCenters?: DataCenter[];
  hostDataCenter?: string;
  /** issue 4: per-user rate-limit windows (default DEFAULT_RATE_WINDOWS in src/service/ratelimit.ts). */
  rateLimits?: RateWindow[];
  /** issue 7: how long a request to a load-balanced endpoint waits for a ready worker (default 60 s). */
  lbWaitMs?: number;
  /**
   * issue 7: serve plain load-balanced requests and job `/run`s on the LB front (lb/front.ts) instead of node:http. Default on;
   * `SVC_LB_FRONT=off` in the environment turns it off (everything then goes through node:http, as before).
   */
  lbFront?: boolean;
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
   * Tests only: the bytes one "GB" of a network volume's `size` stands for (default 1 GiB), so a test can fill a
   * volume quickly. `svc server` reads it from SVC_TEST_VOLUME_GB_BYTES. docs/volumes.md.
   */
  volumeGbBytes?: number;
}

export interface DeployedEndpoint {
  id: string;
  name: string;
  app: string;
  env: string;
  /** `${service url}/v2/${id}` */
  url: string;
  type: "queue" | "lb";
}

export interface Service {
  url: string;
  port: number;
  close(): Promise<void>;
  deploy(input: { app: string; env: string; manifest: Manifest; artifactPath: string; ownerKey?: string }): Promise<DeployedEndpoint[]>;
  mintKey(opts: { scopes: string[]; userId?: string }): Promise<{ id: string; key: string }>;
  /** Requests the LB front served itself and connections it handed to node:http (lb/front.ts); for tests. */
  lbFrontStats(): { served: number; handedOver: number } | undefined;
}

const SCOPE_PATTERN = /^(admin|jobs:\*|jobs:[a-z0-9]+|worker:[a-z0-9]+)$/;

function hashFile(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", reject)
      .on("end", () => resolve(hash.digest("hex")));
  });
}

export async function startService(options: ServiceOptions): Promise<Service> {
  const leaseMs = options.leaseMs ?? 30_000;
  const heartbeatMs = options.heartbeatMs ?? Math.max(50, Math.min(5_000, Math.floor(leaseMs / 3)));
  const log = options.log ?? (() => undefined);
  // Before anything is opened there: what the service keeps is its own (private-files.ts).
  await unwritableAsync(options.dataDir, () => secureDataDir(options.dataDir, { sqlite: !options.storeUrl }));
  const dataLock = unwritable(options.dataDir, () => lockDataDir(options.dataDir));
  let storage: ServiceStorage;
  try {
    storage = await unwritableAsync(options.dataDir, () => openServiceStorage({ dataDir: options.dataDir, storeUrl: options.storeUrl }));
  } catch (err) {
    dataLock.release();
    throw err;
  }
  const store: Store = storage.store;
  if (storage.kind === "postgres") log(`state kept in PostgreSQL at ${redactStoreUrl(options.storeUrl!)}`);
  // Uploads a crashed process left half-written: nothing refers to them.
  const swept = await sweepUploads(options.dataDir);
  if (swept > 0) log(`removed ${swept} unfinished upload(s) left by an earlier run`);
  // Replicas on one database: another replica's revocation is seen at the next recheck (cluster/config-sync.ts).
  const keyring = new KeyRing(store, storage.kind === "postgres" ? KEY_RECHECK_MS : Infinity);
  let secrets: Secrets;
  let secretBox: SecretBox;
  try {
    secretBox = new SecretBox(loadSecretKeys(options.dataDir, options.secretsKeys));
    secrets = new Secrets(storage.secrets, secretBox, log);
  } catch (err) {
    await storage.close();
    dataLock.release();
    throw err;
  }
  if (options.secretsKeys?.file && existsSync(join(options.dataDir, SECRETS_KEY_FILE))) {
    log(`the secrets key is read from ${options.secretsKeys.file}, but ${join(options.dataDir, SECRETS_KEY_FILE)} is still there: once it is no longer needed (its key is the file's, or SVC_SECRETS_KEY_PREVIOUS), remove it so copies of the data directory do not hold a key`);
  }
  const resealed = await secrets.rotate();
  if (resealed > 0) log(`sealed ${resealed} secret(s) again under the current secrets key`);
  const sharedLimiter = storage.sharedLimiter?.(options.rateLimits ?? DEFAULT_RATE_WINDOWS, (err) => log(`rate-limit counts could not be shared: ${(err as Error).message}`));
  // issue 4: management API state (its own connection to the same, already migrated, file)
  const management = new Management({
    dataDir: options.dataDir,
    store: storage.management,
    limiter: sharedLimiter,
    dataCenters: options.dataCenters,
    hostDataCenter: options.hostDataCenter,
    rateLimits: options.rateLimits,
    operatorUser: DEFAULT_USER,
    engineEndpoint,
    singleUser: options.singleUser,
  });
  if (options.singleUser) {
    const users = (await storage.management.keyUsers?.()) ?? [];
    if (users.length > 1) {
      await storage.close();
      dataLock.release();
      throw new UserError(`This service holds keys of ${users.length} users (${users.join(", ")}), and ${options.singleUser}: one tenant's worker could read another's data`, {
        hint: "Install bubblewrap (apt-get install bubblewrap) so that process workers run sandboxed (SVC_SANDBOX=auto), run Docker workers (--workers docker), or pass --single-tenant if every user here is the same tenant.",
      });
    }
  }

  // The host's GPUs, where the workers run on this host: each GPU worker gets GPUs of its own (docs/gpus.md).
  // Swarm and Kubernetes place workers on other machines; their schedulers hand out GPUs.
  const hostGpus = options.driver && (options.driver.name === "process" || options.driver.name === "docker") ? await readHostGpus(management, options, log) : undefined;

  let scaler: Scaler | undefined;
  const startFailures = new StartFailures();
  const releases = new ReleaseManager({
    write: (ops) => engine.write(ops),
    runner: () => scaler,
    log,
    attempts: options.releaseAttempts ?? 3,
    startTimeoutMs: options.releaseStartTimeoutMs ?? 5 * 60_000,
    onStartFailure: (endpointId, workerId, message) => startFailures.record(endpointId, workerId, message),
  });
  // Webhooks: written with each job's final state, delivered from there (webhook-outbox.ts).
  let outbox: WebhookOutbox | undefined;
  // Nothing is delivered before the service knows whether it serves jobs.
  let wired = false;
  const engine = new JobEngine(
    store,
    { leaseMs, heartbeatMs },
    {
      onDemand: (id) => scaler?.kick(id),
      onTaken: (id) => scaler?.taken(id),
      onStorage: (state) => {
        if (!state.ok) log(`storage refuses writes: ${describeStorage(state.cause!)} (${state.message}); requests that write get 503 until it takes them again`);
        else log("storage takes writes again; the service resumes");
      },
      webhookBody: (row) => recordJson(row, Date.now()),
      onWebhook: () => outbox?.kick(),
      // Followers' hand-offs (engine/handoff.ts sends at most one every few ms; the feed coalesces per tick).
      onHandedOff: () => feed?.publish(HANDOFF_TOPIC, []),
    },
  );
  const endpoints = new EndpointRegistry(engine);
  for (const row of await store.endpoints()) endpoints.upsert(row);
  // Replicas on one database would each adopt the same settings; there the operator redeploys instead.
  if (storage.kind !== "postgres") await management.adoptLegacyVolumes(endpoints.values(), log);
  // A removed endpoint's start failures go with it.
  endpoints.onChange((change) => {
    if (change.type === "remove") startFailures.forget(change.row.id);
  });
  await engine.load([...endpoints.values()]);
  outbox = new WebhookOutbox({
    due: (now, limit) => store.dueWebhooks(now, limit),
    write: (ops) => engine.write(ops),
    log,
    // Replicas on one database: the one serving jobs delivers (known once the service listens, below).
    active: () => wired && servesJobs(),
  });
  // What other replicas on the same database change reaches this one within a second.
  const configSync =
    storage.kind === "postgres"
      ? startConfigSync({
          endpoints,
          storedEndpoints: () => store.endpoints(),
          localWritesSettled: () => engine.settled(),
          dropped: (id) => engine.dropEndpoint(id),
          reload: async () => {
            await storage.reload();
            secrets.refresh();
          },
          onError: (err) => log(`could not read what other replicas changed: ${(err as Error).message}`),
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
            if (!feedFailing) log(`not hearing of other replicas' changes at once (${(err as Error).message}); reading them every ${CONFIG_POLL_MS / 1000} s until the database answers`);
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
        if (!adoptFailing) log(`could not take the jobs other replicas handed off: ${(err as Error).message}`);
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
  /** What uses the storage in the background, then the storage itself and the data directory's lock. */
  const releaseStorage = async () => {
    await sharedLimiter?.stop();
    await configSync?.stop();
    await feed?.close();
    await storage.close();
    dataLock.release();
  };

  if (options.apiKeys?.length) {
    const now = Date.now();
    await engine.write(
      options.apiKeys.map((key) => {
        const hash = hashKey(key);
        return { op: "insertKey", key: { id: `k${hash.slice(0, 15)}`, hash, userId: DEFAULT_USER, scopes: ["admin"], createdAt: now, revokedAt: null } } as StoreOp;
      }),
    );
  }

  const mintKey = async (opts: { scopes: string[]; userId?: string }) => {
    const bad = opts.scopes.filter((s) => !SCOPE_PATTERN.test(s));
    if (opts.scopes.length === 0 || bad.length > 0) {
      throw new UserError("Invalid key scopes", { problems: bad.map((s) => `unknown scope "${s}"`), hint: "Scopes: admin, jobs:*, jobs:<endpointId>, worker:<endpointId>." });
    }
    const worker = opts.scopes.some((s) => s.startsWith("worker:"));
    const id = newId(8);
    const key = newKey(worker ? "svcw" : "svc");
    await engine.write([{ op: "insertKey", key: { id, hash: hashKey(key), userId: opts.userId ?? DEFAULT_USER, scopes: opts.scopes, createdAt: Date.now(), revokedAt: null } }]);
    keyring.forget();
    return { id, key };
  };

  const server: Server = createServer();
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 70_000;
  const host = options.host ?? "127.0.0.1";
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port ?? 0, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    // Port taken (the caller may retry on another): leave nothing open behind.
    await outbox.close(0);
    await engine.close();
    await releaseStorage();
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  const localHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  const localUrl = `http://${localHost}:${port}`;
  const url = (options.publicUrl ?? localUrl).replace(/\/+$/, "");

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

  // issue 7: load-balanced endpoints: worker pool by /ping, proxy, scaling on in-flight requests
  const lb = new LbRouter({
    engine,
    endpoints,
    kick: (id) => scaler?.kick(id),
    log,
    noWorkersReason: (id) => management.statusReason(id),
    waitMs: options.lbWaitMs,
    onReady: (workerId) => releases.ready(workerId),
  });
  if (options.driver) {
    // Worker keys are keyed by the worker id so they can be revoked when the worker ends.
    const workerKeys = new Map<string, string[]>();
    scaler = new Scaler({
      engine,
      driver: options.driver,
      // Workers talk to the cluster's address when there is one (any replica passes their traffic on), so a
      // replica that goes away does not take its workers' connection to the service with it.
      apiUrl: options.clusterUrl ?? localUrl,
      endpoints: () => endpoints.values(),
      secrets: (endpoint) => secrets.resolve(endpoint.userId, endpoint.app, endpoint.env, endpoint.resource.secrets ?? []),
      mintWorkerKeys: async (endpoint, workerId) => {
        const token = newKey("svcw");
        const apiKey = newKey("svc");
        const apiKeyId = `${workerId}-api`;
        const now = Date.now();
        await engine.write([
          { op: "insertKey", key: { id: workerId, hash: hashKey(token), userId: endpoint.userId, scopes: [`worker:${endpoint.id}`], createdAt: now, revokedAt: null } },
          { op: "insertKey", key: { id: apiKeyId, hash: hashKey(apiKey), userId: endpoint.userId, scopes: ["jobs:*"], createdAt: now, revokedAt: null } },
        ]);
        workerKeys.set(workerId, [workerId, apiKeyId]);
        keyring.forget();
        return { workerToken: token, apiKey };
      },
      revokeWorkerKeys: async (workerId) => {
        // A worker adopted after a restart has its keys under the same ids, minted by the earlier run.
        const ids = workerKeys.get(workerId) ?? [workerId, `${workerId}-api`];
        workerKeys.delete(workerId);
        await engine.write(ids.map((id) => ({ op: "deleteKey", id }) as StoreOp));
        keyring.forget();
      },
      localArtifact: (path) => storage.artifacts.local(path),
      dataCenterOf: (endpoint) => management.volumeDataCenter(endpoint),
      // A network volume of the endpoint's owner, by id or name (never another user's, never a bare folder).
      volumePath: (endpoint) => management.volumePath(endpoint),
      onLog: (endpointId, workerId, line) => {
        releases.line(workerId, line.stream, line.text);
        void engine.appendLogs([{ ts: line.ts, endpointId, workerId, jobId: line.jobId ?? null, stream: line.stream, text: line.text.slice(0, 64 * 1024) }]);
        const endpoint = endpoints.get(endpointId);
        if (endpoint) options.onWorkerLog?.({ endpoint: endpoint.name, endpointId, workerId, line });
      },
      onEvent: log,
      gpus: hostGpus,
      probeReady: (workerId) => releases.proven(workerId),
      onProbeExit: (workerId, exit) => releases.exited(workerId, exit),
      onStartFailure: (endpointId, workerId, message) => startFailures.record(endpointId, workerId, message),
      lb,
      // A worker keeps an events long poll open while it lives: silent for this long, it is gone.
      adoptRegistered: storage.coordination ? { silentMs: 3 * heartbeatMs + 5_000 } : undefined,
    });
    // A replica that does not serve jobs starts its workers when it takes over.
    if (servesJobs()) await scaler.start();
  }

  // The S3 API on network volumes (volumes/s3.ts), and what the management API needs of it.
  const volumeUsage = new VolumeUsage(options.volumeGbBytes);
  const volumes: VolumesApi = { keys: storage.volumeKeys, box: secretBox, usage: volumeUsage, endpoint: `${url}${S3_PREFIX}`, region: S3_REGION };
  const s3 = new VolumeS3({
    dataDir: options.dataDir,
    volumes: storage.management,
    keys: storage.volumeKeys,
    box: secretBox,
    authenticateApiKey: (key) => keyring.authenticate(key),
    usage: volumeUsage,
    log,
  });

  const followers = new Set<ServerResponse>();
  const context: ApiContext = {
    engine, keyring, endpoints, url, scaler: () => scaler, followers, log, leaseMs, heartbeatMs,
    clients: clientGuards({ ...DEFAULT_CLIENT_LIMITS, ...options.clientLimits }),
    // issue 5: apps, environments, builds
    store, dataDir: options.dataDir, artifacts: storage.artifacts, jobsServedBy: () => jobsRole?.servedBy, jobsReplicaAdopts: () => jobsRole?.servedByAdopter ?? false, workersDirect: options.workersDirect ?? true, handOffAs, maxArtifactBytes: options.maxArtifactBytes ?? MAX_ARTIFACT_BYTES, uploadInspectLimits: options.uploadInspectLimits, uploadIdleMs: options.uploadIdleMs,
    // issue 4
    management,
    secrets,
    volumes,
    // issue 7
    lb,
    releases,
    startFailures,
    gpus: () => hostGpus,
  };
  // issue 7: the LB front takes each connection first and serves plain LB requests and job /runs itself (lb/front.ts)
  const frontWanted = options.lbFront ?? true;
  const front = !frontWanted ? undefined : LbFront.install(server, {
    lb,
    principal: (key) => keyring.known(key),
    authenticate: (key) => keyring.authenticate(key),
    rateLimit: (principal) => {
      const d = management.rateDecision(principal);
      if (!d) return "";
      return d.allowed ? `RateLimit: ${d.rateLimit}\r\nRateLimit-Policy: ${d.policy}\r\n` : undefined;
    },
    run: (principal, endpointId, body, contentType) => quickRun(context, principal, endpointId, body, contentType),
    read: (principal, endpointId, jobId) => quickRead(context, principal, endpointId, jobId),
    relayTo: () => context.jobsServedBy?.(),
    keepAliveMs: server.keepAliveTimeout,
    log,
  });
  await management.attach(context, servesJobs());
  // Requests Node's parser refuses (headers over 16 KiB, a method it does not know, bad framing) get a
  // problem+json answer too, instead of Node's bare status line.
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex & { _httpMessage?: { headersSent?: boolean } }) => {
    // As Node's own handler: nothing to say on a reset socket or once an answer has started.
    if (!socket.writable || err.code === "ECONNRESET" || socket._httpMessage?.headersSent) {
      socket.destroy();
      return;
    }
    const status = err.code === "HPE_HEADER_OVERFLOW" ? 431 : err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400;
    const detail =
      status === 431 ? "The request's headers are larger than the limit of 16 KiB" : status === 408 ? "The request's headers did not arrive in time" : `The request is not valid HTTP (${err.code ?? err.message})`;
    socket.end(problemResponse(status, detail, "connection: close\r\n"));
  });
  // CONNECT asks for a tunnel; this service is no proxy. Node hands CONNECT only to a 'connect' listener and,
  // without one, closes the socket with no answer.
  server.on("connect", (_req: IncomingMessage, socket: Duplex) => {
    socket.on("error", () => socket.destroy()); // the client went away: nothing to answer
    socket.end(problemResponse(405, "CONNECT is not supported: this service is not a proxy", "allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\nconnection: close\r\n"));
  });
  wired = true;
  outbox.kick();
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
      await management.appChanged().catch((err: unknown) => log(`could not refresh REST endpoints: ${(err as Error).message}`));
      await scaler?.start(CLUSTER_ADOPT_SETTLE_MS);
      outbox?.kick();
    },
  });
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    // S3 clients sign their own way and want XML errors: the S3 API answers its whole prefix itself.
    if (isS3Target(req.url)) {
      s3.serve(req, res).catch((err: unknown) => {
        log(`internal error on S3 ${req.method} ${req.url}: ${(err as Error).stack ?? String(err)}`);
        res.destroy();
      });
      return;
    }
    handleRequest(context, req, res).catch((err: unknown) => {
      log(`internal error on ${req.method} ${req.url}: ${(err as Error).stack ?? String(err)}`);
      sendProblem(res, 500, "The service failed to handle this request");
    });
  });

  const tickMs = Math.max(20, Math.min(250, Math.floor(leaseMs / 4)));
  const ticker = setInterval(() => {
    engine.tick();
    // Outside workers that stopped talking to us no longer count in /health.
    const now = Date.now();
    for (const w of engine.workers.values()) {
      if (!w.managed && w.polling === 0 && w.held.size === 0 && now - w.lastSeen > Math.max(3 * leaseMs, 60_000)) engine.workerGone(w.id);
    }
  }, tickMs);
  ticker.unref();
  // A notice is a hint (lost while the listener reconnects, or sent before this replica listened): rescan.
  const handoffRescan = setInterval(() => {
    if (servesJobs()) adoptHandedOff();
  }, HANDOFF_RESCAN_MS);
  handoffRescan.unref();
  const sweeper = setInterval(() => {
    // Replicas on one database: the one serving jobs sweeps for all (the others' deletes would only repeat it).
    if (!servesJobs()) return;
    engine.sweep().catch((err: unknown) => log(`retention sweep failed: ${(err as Error).message}`));
  }, options.retentionSweepMs ?? 10_000);
  sweeper.unref();

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      clearInterval(ticker);
      clearInterval(sweeper);
      clearInterval(handoffRescan);
      releases.close();
      lb.close();
      hostGpus?.close();
      await scaler?.close();
      await engine.close();
      for (const res of followers) res.end();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        front?.close();
        server.closeIdleConnections();
        setTimeout(() => {
          front?.destroy();
          server.closeAllConnections();
        }, 200).unref();
      });
      await outbox?.close();
      await jobsRole?.stop();
      await releaseStorage();
    })());

  return {
    url,
    port,
    close,
    mintKey,
    lbFrontStats: () => (front ? { ...front.stats } : undefined),
    async deploy(input) {
      let userId = DEFAULT_USER;
      if (input.ownerKey) {
        const principal = await keyring.authenticate(input.ownerKey);
        if (!principal || principal.worker) throw new UserError("The owner key of this deploy is not a valid API key");
        userId = principal.userId;
      }
      const unset = missingSecrets(secrets, userId, input.app, input.env, input.manifest.resources);
      if (unset.length > 0) throw new UserError("The app names secrets that are not set; nothing was deployed", { problems: unset });
      const reserved = reservedEnvInResources(input.manifest.resources);
      if (reserved.length > 0) throw new UserError("The app sets environment variables that configuration may not set; nothing was deployed", { problems: reserved });
      const volumes = management.deployVolumes(userId, input.manifest.resources);
      if (volumes.errors.length > 0) throw new UserError("The app names network volumes it cannot use; nothing was deployed", { problems: volumes.errors });
      await management.createVolumes(volumes.create);
      const beyond = gpuShortfalls(hostGpus, input.manifest.resources);
      if (beyond.length > 0) throw new UserError("The app asks for GPUs this host does not have; nothing was deployed", { problems: beyond });
      const artifactHash = await hashFile(input.artifactPath);
      const artifactPath = await keepArtifact(options.dataDir, input.artifactPath, artifactHash);
      await storage.artifacts.publish(artifactPath);
      const plan = planDeploy([...endpoints.values()], { userId, app: input.app, env: input.env, resources: input.manifest.resources, artifactPath, artifactHash }, Date.now());
      // The app, its environment and the build, as an upload and activation would record them: `svc app list`,
      // `svc app get` and the console show a `svc dev` session's app like any other.
      const now = Date.now();
      const environment = (await store.environments(userId, input.app)).find((e) => e.name === input.env);
      const size = (await stat(artifactPath)).size;
      await engine.write([
        { op: "upsertApp", app: { userId, name: input.app, createdAt: now } },
        { op: "insertBuild", build: { id: artifactHash, userId, app: input.app, size, fingerprint: input.manifest.fingerprint, manifest: input.manifest, path: artifactPath, createdAt: now } },
      ] as StoreOp[]);
      // Endpoints new or changed must show a worker that starts before anything switches (releases/manager.ts).
      const changed = plan.upsert.filter((row) => endpoints.get(row.id)?.revision !== row.revision);
      const { settled } = await releases.begin({
        userId,
        app: input.app,
        env: input.env,
        buildId: artifactHash,
        previousBuildId: environment?.buildId ?? null,
        kind: "deploy",
        probe: changed.map((row) => ({ row, action: endpoints.has(row.id) ? "update" : "create" })),
        commit: async (extra) => {
          for (const row of plan.remove) {
            endpoints.remove(row.id);
            await engine.dropEndpoint(row.id);
          }
          await engine.write([
            ...plan.upsert.map((endpoint) => ({ op: "upsertEndpoint", endpoint }) as StoreOp),
            { op: "upsertEnvironment", environment: { userId, app: input.app, name: input.env, buildId: artifactHash, createdAt: environment?.createdAt ?? now, activatedAt: Date.now() } },
            ...extra,
          ]);
          for (const row of plan.upsert) endpoints.upsert(row);
        },
      });
      const outcome = await settled;
      if (outcome.state !== "live") throw new ReleaseFailedError(outcome);
      scaler?.reconcile();
      // issue 4: REST endpoints whose template runs this code follow the new revision
      await management.appChanged();
      return plan.upsert.map((row) => ({ id: row.id, name: row.name, app: row.app, env: row.env, url: `${url}/v2/${row.id}`, type: row.type }));
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
      void management.appChanged().catch((err: unknown) => log(`could not refresh REST endpoints after the GPUs changed: ${(err as Error).message}`));
    },
  });
  let started = false;
  const inventory = await gpus.refresh();
  started = true;
  offer(gpus);
  if (inventory.gpus.length > 0) {
    log(`${inventory.gpus.length} GPU(s) on this host, each given to one worker at a time: ${inventory.gpus.map((g) => `${g.index} ${g.name}`).join(", ")}`);
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
  return new UserError(`The service cannot write its data directory ${dataDir}: ${describeStorage(cause).replace("The service's storage", "it")} (${(err as Error).message})`, {
    hint: cause === "full" ? "Free space on that filesystem, or pass another --data-dir." : "Make it writable by this user, or pass another --data-dir (SVC_DATA_DIR).",
    cause: err,
  });
}

/** A release whose new workers could not start: nothing switched, the previous build keeps serving. */
export class ReleaseFailedError extends UserError {
  constructor(readonly release: ReleaseRow) {
    const why = release.error;
    super(
      release.state === "superseded"
        ? "A newer deploy of this environment took over before this one switched"
        : why?.endpoint
          ? `Endpoint "${why.endpoint}" of the new build could not start`
          : `The new build could not be switched to: ${why?.message ?? "unknown error"}`,
      { problems: why?.endpoint ? [why.message.split("\n").join("\n    ")] : [] },
    );
  }
}

/**
 * Keep the artifact under the data dir by content hash: workers started later (scale-up, restarts) get exactly
 * the deployed build even when the caller's file is rebuilt in place.
 */
async function keepArtifact(dataDir: string, source: string, sha256: string): Promise<string> {
  const dir = join(dataDir, "artifacts");
  const target = join(dir, `${sha256}.tar.gz`);
  if (existsSync(target)) return target;
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const temp = `${target}.${process.pid}.${Date.now()}.tmp`;
  await copyFile(source, temp);
  // A copy has its source's mode: the service's copy is its own.
  await chmod(temp, PRIVATE_FILE_MODE);
  await rename(temp, target);
  return target;
}

