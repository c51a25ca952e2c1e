// `svc server`: run the service (job API, worker protocol, state and logs) until SIGINT/SIGTERM.
// The URL goes to stdout; progress and operator messages to stderr.

import type { Command } from "commander";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { UserError, errorMessage } from "../../errors.js";
import { envSetting } from "svc/internal";
import type { WorkerDriver } from "../../drivers/types.js";
import type { startService } from "../../service/index.js";
import { redactStoreUrl } from "../../service/store/url.js";
import { parseServerConfig, printableConfig, serviceOptionsOf, settingsEnvironment, type ServerConfig } from "../../service/config.js";
import { installLastResort } from "../../service/last-resort.js";
import { testVolumeGbBytes } from "../../service/volumes/usage.js";
import { defaultS3Port, S3ListenError } from "../../service/volumes/s3-origin.js";
import { alignRows, createOutput, type Output } from "../output.js";
import { jsonLog, type OperatorLog } from "../../service/logging.js";
import { loadTracing, tracesUrlOf } from "../../service/tracing/index.js";

export const DEFAULT_SERVER_PORT = 8600;
export const ADMIN_KEY_FILE = "admin-key";

export function defaultDataDir(): string {
  return envSetting("SVC_DATA_DIR") ?? join(homedir(), ".svc", "data");
}

/**
 * The admin key: SVC_API_KEY when set; otherwise the one generated on the first start and kept in
 * <dataDir>/admin-key (mode 0600). The service itself stores only its hash.
 */
export function resolveAdminKey(dataDir: string, fromEnv = envSetting("SVC_API_KEY")): { key: string; source: "env" | "file" | "generated"; file?: string } {
  if (fromEnv) return { key: fromEnv, source: "env" };
  const file = join(dataDir, ADMIN_KEY_FILE);
  if (existsSync(file)) return { key: readFileSync(file, "utf8").trim(), source: "file", file };
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const key = `svc_${randomBytes(24).toString("base64url")}`;
  writeFileSync(file, `${key}\n`, { mode: 0o600, flag: "wx" });
  return { key, source: "generated", file };
}

/** What the process driver says of the isolation its workers run under (drivers/process.ts). */
type Isolation = { sandboxed: boolean; description: string };

/**
 * The isolation line of the start message, and why the service must serve one user only (process workers
 * without a sandbox, unless the operator says single-tenant). Pure.
 */
export function isolationOf(kind: ServerConfig["workers"], isolation: Isolation | undefined, singleTenant: boolean): { line: string; singleUser?: string } {
  if (kind !== "process" || !isolation) return { line: kind };
  if (isolation.sandboxed) return { line: `process, ${isolation.description}` };
  if (singleTenant) return { line: `process, ${isolation.description}; --single-tenant: every user is trusted with every other's data` };
  return { line: `process, ${isolation.description}; serving one user only`, singleUser: "process workers run without a sandbox" };
}

async function loadDriver(config: ServerConfig, dataDir: string, log: (message: string) => void): Promise<WorkerDriver | undefined> {
  const { workers: kind, registry, store: storeUrl, workerPool: pool } = config;
  if (kind === "none") return undefined;
  const { nodeModelCacheUnused } = await import("../../drivers/node-models.js");
  const unused = nodeModelCacheUnused(kind, config.nodeModelCache);
  if (unused) log(unused);
  if (kind === "docker") {
    // Workers as containers from the locally built svc-worker images, or the registry's by digest (docs/docker.md).
    const { createDockerDriver } = await import("../../drivers/docker.js");
    // One session per data directory: a restart after a crash finds the containers the killed run left.
    const session = `srv${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`;
    // Pre-booted containers (SVC_WORKER_POOL per image kind) take leftovers of a killed run's pool with them.
    return createDockerDriver({
      log,
      session,
      stableSession: true,
      registry,
      pool,
      runtime: config.dockerRuntime,
      limits: { pidsLimit: config.workerPidsLimit, tmpMb: config.workerTmpMb },
    });
  }
  if (kind === "swarm") {
    // Workers as Swarm services, placed by the swarm; their images from the registry when one is given (docs/cluster.md).
    const { createSwarmDriver } = await import("../../drivers/swarm.js");
    // Replicas on one database share one session: the replica that takes over adopts the services of the one
    // that died (their labels), as a restart on the same data directory would.
    const session = `srv${createHash("sha256")
      .update(storeUrl ?? dataDir)
      .digest("hex")
      .slice(0, 12)}`;
    // As a stack (deploy/swarm/svc-stack.yml) the workers join svc's overlay network and run an image named
    // there: the server's image holds no `ldd` to build worker images with.
    // Network volumes reach the task's node through the operator's volume driver (docs/volumes.md).
    const { swarmVolumeConfigOf } = await import("../../drivers/cluster-volumes.js");
    const volumes = swarmVolumeConfigOf(config.swarmVolumeDriver, config.swarmVolumeOptions);
    const { nodeModelCacheOf } = await import("../../drivers/node-models.js");
    return createSwarmDriver({
      log,
      models: nodeModelCacheOf(config.nodeModelCache, config.modelsFetchImage, registry),
      session,
      registry,
      network: config.swarmNetwork,
      image: config.swarmImage,
      volumes,
      limits: { pidsLimit: config.workerPidsLimit, tmpMb: config.workerTmpMb },
    });
  }
  if (kind === "kubernetes") {
    // Pods through the official client, in-cluster configuration or ~/.kube/config (docs/cluster.md).
    if (!config.clusterUrl) {
      throw new UserError("Kubernetes workers need the address they reach the service at", {
        hint: "Set SVC_CLUSTER_URL to the service's address inside the cluster (its Service's DNS name).",
      });
    }
    if (!config.k8sImage && !registry) {
      throw new UserError("Kubernetes workers need an image every node can pull", {
        hint: "Set SVC_WORKER_REGISTRY=host:port (after `svc images build --registry host:port`) or SVC_K8S_IMAGE.",
      });
    }
    const { createKubernetesDriver } = await import("../../drivers/kubernetes.js");
    const { nodeModelCacheOf } = await import("../../drivers/node-models.js");
    const session = `srv${createHash("sha256")
      .update(storeUrl ?? dataDir)
      .digest("hex")
      .slice(0, 12)}`;
    return createKubernetesDriver({
      namespace: config.k8sNamespace ?? inClusterNamespace() ?? "default",
      session,
      registry,
      image: config.k8sImage,
      runtimeClass: config.k8sRuntimeClass,
      tmpMb: config.workerTmpMb,
      volumes: config.k8sStorageClass ? { storageClass: config.k8sStorageClass } : undefined,
      models: nodeModelCacheOf(config.nodeModelCache, config.modelsFetchImage, registry),
      log,
    });
  }
  // Imported by path at run time so this command compiles and runs before the process driver exists.
  const modulePath = "../../drivers/process.js";
  let mod: {
    createProcessDriver?: (options?: {
      cacheDir?: string;
      stateDir?: string;
      snapshotDir?: string;
      probeSnapshots?: boolean;
      pool?: number;
      sandbox?: ServerConfig["sandbox"];
      sandboxDefaults?: { shmMb?: number };
      envAllow?: string[];
      hostPorts?: number[];
    }) => WorkerDriver & { sandboxing?: Isolation };
  };
  try {
    mod = (await import(modulePath)) as typeof mod;
  } catch (err) {
    throw new UserError("The process worker driver is not available in this build of svc", {
      hint: "Run with --workers none and start workers yourself, or update svc.",
      cause: err,
    });
  }
  if (!mod.createProcessDriver) throw new UserError("The process worker driver is not available in this build of svc");
  // Extracted artifacts live beside the data they belong to, not in a shared tmp dir.
  // Records of running workers, so a restart after a crash adopts them instead of starting more.
  // Workers sandboxed where bubblewrap works (SVC_SANDBOX=auto), or as the operator says.
  return mod.createProcessDriver({
    cacheDir: join(dataDir, "artifact-cache"),
    stateDir: join(dataDir, "workers"),
    snapshotDir: join(dataDir, "snapshots"),
    probeSnapshots: true,
    pool,
    sandbox: config.sandbox,
    sandboxDefaults: { shmMb: config.sandboxShmMb },
    envAllow: config.workerEnvAllow,
    hostPorts: config.workerHostPorts,
  });
}

/** The logger of operator messages: JSON lines through pino, or the terminal's human lines. */
async function operatorLog(format: ServerConfig["logFormat"], out: Output): Promise<OperatorLog> {
  if (format === "json") return jsonLog();
  return { info: (message) => out.info(message), warn: (message) => out.warn(message), error: (message) => out.warn(message) };
}

/** The namespace of the Pod this runs in, when it runs in one. */
function inClusterNamespace(): string | undefined {
  const file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
  return existsSync(file) ? readFileSync(file, "utf8").trim() || undefined : undefined;
}

/** Why the service could not listen, as something the user can act on; other errors unchanged. */
export function listenError(err: unknown, host: string, port: number): unknown {
  switch ((err as NodeJS.ErrnoException).code) {
    case "EADDRINUSE":
      return new UserError(`Port ${port} is already in use`, { hint: "Pass another one with --port <n> (0 for any free port)." });
    case "EACCES":
      return new UserError(`Not allowed to listen on port ${port}`, { hint: "Ports below 1024 need privileges: pass --port 1024 or above (default 8600)." });
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
      return new UserError(`Cannot listen on ${host}: no such address on this machine`, {
        hint: "Pass --host 127.0.0.1 (this machine only) or 0.0.0.0 (every interface).",
      });
    default:
      return err;
  }
}

/** Why the S3 API could not listen on its port, naming its setting; other errors unchanged. */
export function s3ListenError(err: S3ListenError, host: string): unknown {
  const hint = "Pass another one with --s3-port <n> (0 for any free port, off for none) or SVC_S3_PORT.";
  switch (err.code) {
    case "EADDRINUSE":
      return new UserError(`The S3 API's port ${err.port} is already in use`, { hint });
    case "EACCES":
      return new UserError(`Not allowed to listen on port ${err.port} for the S3 API`, { hint });
    default:
      return listenError(err.cause, host, err.port);
  }
}

export function register(program: Command): void {
  program
    .command("server")
    .description("Run the svc service: job API, worker protocol and autoscaled workers, over a SQLite file or PostgreSQL")
    .option("--host <host>", "address to listen on (default 127.0.0.1)")
    .option("--port <port>", `port to listen on (0: any free port; default ${DEFAULT_SERVER_PORT})`)
    .option(
      "--s3-port <port>",
      "the S3 API's own port, apart from the console and job API (default: --port + 1, any free one with --port 0; off: only under /s3; or $SVC_S3_PORT)",
    )
    .option("--s3-public-url <url>", "the address S3 clients use, when it differs from host:s3-port (or $SVC_S3_PUBLIC_URL)")
    .option("--data-dir <dir>", "where the SQLite file, artifacts and the admin key live (default ~/.svc/data or $SVC_DATA_DIR)")
    .option("--workers <driver>", "where workers run: process, docker, swarm, kubernetes or none (default process)")
    .option(
      "--store <url>",
      "keep the state in PostgreSQL (postgres://user:password@host:port/database) instead of the data dir's SQLite file (or $SVC_STORE_URL)",
    )
    .option("--public-url <url>", "the address clients use, when it differs from host:port (or $SVC_PUBLIC_URL)")
    .option("--model-hub <url>", "the Hugging Face-compatible hub endpoints' models are fetched from (or $SVC_MODEL_HUB; default https://huggingface.co)")
    .option("--model-cache-size <size>", "evict least recently used models past this size, e.g. 200G (or $SVC_MODEL_CACHE_SIZE; default no limit)")
    .option(
      "--node-model-cache <path>",
      "with --workers swarm or kubernetes: the directory on every node where it fetches endpoints' models for its workers (or $SVC_NODE_MODEL_CACHE; default none)",
    )
    .option("--docker-runtime <name>", "with --workers docker: the OCI runtime workers run under, e.g. runsc for gVisor (or $SVC_DOCKER_RUNTIME)")
    .option(
      "--volume-quotas <mode>",
      "whether workers can write past a network volume's size: off, or loop (a filesystem of its size per volume; needs root) (or $SVC_VOLUME_QUOTAS; default off)",
    )
    .option("--sandbox <mode>", "process workers' sandbox: auto (bubblewrap where it works), bwrap (required) or none (or $SVC_SANDBOX; default auto)")
    .option(
      "--webhook-allow <list>",
      "where webhooks may go besides public addresses: CIDRs, addresses, host names, *.domain, comma separated (or $SVC_WEBHOOK_ALLOW; docs/security.md)",
    )
    .option("--single-tenant", "serve several users with process workers that run without a sandbox: they are one tenant (or $SVC_SINGLE_TENANT=on)")
    .option("--log-format <format>", "operator messages on stderr: human (default) or json, one object a line (or $SVC_LOG_FORMAT)")
    .option(
      "--otlp-endpoint <url>",
      "send traces to this OpenTelemetry collector (OTLP/HTTP base address, or $OTEL_EXPORTER_OTLP_ENDPOINT; docs/observability.md)",
    )
    .option("--print-config", "print the configuration (flags, environment, defaults; secrets not shown) and exit")
    .option("--json", "with --print-config: as JSON")
    .action(
      async (opts: {
        host?: string;
        port?: string;
        s3Port?: string;
        s3PublicUrl?: string;
        dataDir?: string;
        workers?: string;
        store?: string;
        publicUrl?: string;
        dockerRuntime?: string;
        modelHub?: string;
        modelCacheSize?: string;
        nodeModelCache?: string;
        sandbox?: string;
        webhookAllow?: string;
        singleTenant?: boolean;
        logFormat?: string;
        otlpEndpoint?: string;
        printConfig?: boolean;
        json?: boolean;
      }) => {
        const out = createOutput({ json: opts.json });
        // Every setting parsed once, here: the service's modules get typed values and read no environment.
        const parsed = parseServerConfig(
          {
            host: opts.host,
            port: opts.port,
            s3Port: opts.s3Port,
            s3PublicUrl: opts.s3PublicUrl,
            dataDir: opts.dataDir,
            workers: opts.workers,
            store: opts.store,
            publicUrl: opts.publicUrl,
            dockerRuntime: opts.dockerRuntime,
            modelHub: opts.modelHub,
            modelCacheSize: opts.modelCacheSize,
            nodeModelCache: opts.nodeModelCache,
            sandbox: opts.sandbox,
            webhookAllow: opts.webhookAllow,
            singleTenant: opts.singleTenant ? "on" : undefined,
            logFormat: opts.logFormat,
            otlpEndpoint: opts.otlpEndpoint,
          },
          settingsEnvironment(envSetting),
        );
        if (opts.printConfig) {
          const rows = printableConfig(parsed);
          out.result({ settings: rows }, () => alignRows(rows.map((r) => [r.setting, JSON.stringify(r.value), r.source, r.from])).join("\n"));
          return;
        }
        const config = parsed.config;
        // Every operator message from here on goes through this one logger (human lines, or JSON ones).
        const log = await operatorLog(config.logFormat, out);
        // Traces only when configured: otherwise the OpenTelemetry SDK is never loaded.
        const tracesUrl = tracesUrlOf(config);
        const tracing = tracesUrl ? await loadTracing({ tracesUrl, serviceName: "svc", headers: process.env.OTEL_EXPORTER_OTLP_HEADERS }) : undefined;
        const port = config.port;
        const dataDir = config.dataDir;
        // A data dir this start creates is removed again if the start fails: no admin key or empty database is
        // left behind by a typo in --port or --host.
        const fresh = !existsSync(dataDir) || readdirSync(dataDir).length === 0;
        // The service's alone from the start (the service tightens an older, looser one: store/private-files.ts).
        mkdirSync(dataDir, { recursive: true, mode: 0o700 });
        const admin = resolveAdminKey(dataDir, config.apiKey);
        // One tenant's request must never end the process that serves every tenant.
        installLastResort((message) => log.warn(message));
        if (config.volumeQuotas === "loop") {
          const { loopQuotaProblem } = await import("../../service/volumes/storage.js");
          const problem = loopQuotaProblem();
          if (problem)
            throw new UserError(`Volume quotas cannot be turned on here: ${problem}`, {
              hint: "Run svc server as root on Linux with e2fsprogs installed, or leave SVC_VOLUME_QUOTAS off (a volume's size then binds S3 writes only).",
            });
        }
        const driver = await loadDriver(config, dataDir, (message) => log.info(message));
        const isolation = isolationOf(config.workers, (driver as { sandboxing?: Isolation } | undefined)?.sandboxing, config.singleTenant);
        let service: Awaited<ReturnType<typeof startService>> | undefined;
        try {
          // The service's modules load here, not with every `svc` command.
          const { startService } = await import("../../service/index.js");
          service = await startService({
            ...serviceOptionsOf(config),
            dataDir,
            storeUrl: config.store,
            host: config.host,
            port,
            s3Port: config.s3Port === undefined ? defaultS3Port(port) : config.s3Port,
            s3PortIsDefault: config.s3Port === undefined,
            s3PublicUrl: config.s3PublicUrl,
            driver,
            singleUser: isolation.singleUser,
            apiKeys: [admin.key],
            volumeGbBytes: testVolumeGbBytes(process.env),
            publicUrl: config.publicUrl,
            replicaUrl: config.replicaUrl,
            clusterUrl: config.clusterUrl,
            workersDirect: config.workersDirect,
            handOffJobs: config.handOffJobs,
            metrics: config.metrics,
            log: log.info,
            tracing,
            // Another replica may serve the jobs now: going on would run them twice. A supervisor (systemd, Swarm,
            // Kubernetes) restarts this one, as a follower.
            onJobsLeaseLost: () => {
              log.warn("stopping: this replica lost the lease to serve jobs; restart it to rejoin as a follower");
              process.exitCode = 1;
              void service?.close().finally(() => process.exit(1));
            },
          });
        } catch (err) {
          await driver?.close().catch((closeErr: unknown) => log.warn(`the workers' driver did not close cleanly: ${errorMessage(closeErr)}`));
          await tracing?.shutdown().catch((shutErr: unknown) => log.warn(`the last traces could not be sent: ${errorMessage(shutErr)}`));
          if (fresh) {
            try {
              rmSync(dataDir, { recursive: true, force: true });
            } catch {
              // Tidying what this start made is a courtesy (a mount point cannot go): the start's own error is what
              // the user needs, and it follows.
            }
          }
          throw err instanceof S3ListenError ? s3ListenError(err, config.host) : listenError(err, config.host, port);
        }
        log.info(`svc service listening (data in ${config.store ? `${redactStoreUrl(config.store)} and ${dataDir}` : dataDir}, workers: ${isolation.line})`);
        // Where tenants' webhooks may go (docs/security.md, "Webhooks stay outside").
        log.info(
          `webhooks go to public addresses${config.webhookAllow ? ` and ${config.webhookAllow.join(", ")}` : " only (--webhook-allow admits internal receivers)"}`,
        );
        // What confines one tenant's workers from another's and from the host (docs/security.md).
        if (driver?.isolation) {
          try {
            log.info(`worker isolation: ${await driver.isolation()}`);
          } catch (err) {
            log.warn(`worker isolation: could not be read (${errorMessage(err)})`);
          }
        }
        if (admin.source === "generated") log.info(`generated an admin API key: it is in ${admin.file} (readable by you only)`);
        else if (admin.source === "file") log.info(`admin API key: ${admin.file}`);
        else log.info("admin API key: SVC_API_KEY");
        log.info(`web console: ${service.url}/console/`);
        log.info(
          service.s3
            ? `S3 API: ${service.s3.url} (path-style; also under ${service.url}/s3 for clients configured with it)`
            : `S3 API: ${service.url}/s3 only (--s3-port gives it an origin of its own, apart from the console)`,
        );
        if (tracesUrl) log.info(`traces: OTLP/HTTP to ${tracesUrl}`);
        process.stdout.write(`${service.url}\n`);

        await new Promise<void>((done) => {
          const stop = (signal: NodeJS.Signals) => {
            process.off("SIGINT", stop);
            process.off("SIGTERM", stop);
            log.info(`${signal}: stopping`);
            service!
              .close()
              .catch((err: unknown) => log.warn(`stopping failed: ${errorMessage(err)}`))
              // The spans still buffered go out before the process ends.
              .then(() => tracing?.shutdown())
              .catch((err: unknown) => log.warn(`the last traces could not be sent: ${errorMessage(err)}`))
              .finally(done);
          };
          process.on("SIGINT", stop);
          process.on("SIGTERM", stop);
        });
      },
    );
}
