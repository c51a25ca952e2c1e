// A local development session: build the project, run the service with process workers, deploy the build as
// app/environment "dev", watch sources and redeploy on change. `svc dev` is a thin command over this; tests
// drive it directly. Calls from scripts find the session through .svc/dev-session.json (packages/svc/src/context.ts).

import { randomBytes } from "node:crypto";
import { mkdir, writeFile, rm, rename, readFile } from "node:fs/promises";
import { existsSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { watch as watchFiles, type FSWatcher } from "chokidar";
import ignore from "ignore";
import { buildProject, type BuildResult } from "../build/index.js";
import { LOOPBACK_WEBHOOK_ALLOW } from "../service/webhooks/address-policy.js";
import { ReleaseFailedError, startService, type Service, type DeployedEndpoint } from "../service/index.js";
import { createProcessDriver, type ProcessDriver } from "../drivers/process.js";
import type { SandboxSetting } from "../drivers/sandbox/index.js";
import type { WorkerLogLine } from "../drivers/types.js";
import { DEV_SESSION_FILE, envSetting, type DevSession } from "svc/internal";
import { serviceOptionsOf, type ServiceSettings } from "../service/config.js";
import { UserError } from "../errors.js";
import { defaultS3Port, S3ListenError } from "../service/volumes/s3-origin.js";
import { DEV_ENV_FILES, DevSecretsMissingError, missingSecretsError, projectEnv, syncDevSecrets } from "./env.js";
import { dockerForImages, imageEndpointsOf, imageEndpointUnavailable, withImageWorkers } from "./image-workers.js";

export const DEV_ENV = "dev";
export const DEFAULT_DEV_PORT = 8600;
/**
 * Pre-booted worker runtimes `svc dev` keeps ready (docs/cold-start.md): the first job after a save or an idle
 * spell is served by a runtime already loaded. Small: each waits with Node and the runtime in memory.
 */
export const DEFAULT_DEV_POOL = 1;

export interface DevSessionOptions {
  root: string;
  host?: string;
  /** Port of the embedded service: that port, or an error when it is taken. */
  port?: number;
  /** Without `port`: the first port tried (default 8600); when taken, the next free one is used (and reported). */
  defaultPort?: number;
  /** The S3 API's own port: null for none; default the service's port + 1 (any free one with port 0). */
  s3Port?: number | null;
  /** Where the service keeps its SQLite file, artifacts and logs (default <root>/.svc/dev-data). */
  dataDir?: string;
  apiKey?: string;
  watch?: boolean;
  exclude?: string[];
  /**
   * Automatic retries of a failed job (default 0 in dev: a failure you are fixing fails the same way again, and
   * a retry only prints it twice). The endpoints' own `retries` apply when deployed.
   */
  retries?: number;
  onEvent?: (event: DevEvent) => void;
  /** The service's settings from the environment (limits, timeouts...); default: every setting's default. */
  settings?: ServiceSettings;
  /** Pre-booted worker runtimes kept ready (default DEFAULT_DEV_POOL; 0: none). */
  pool?: number;
  /** Workers' sandbox (default: the settings', else auto: bubblewrap where it works). */
  sandbox?: SandboxSetting;
  /** How long to wait for a Docker engine to answer, when the project has image endpoints (default 3 s). */
  dockerTimeoutMs?: number;
  /**
   * Emit a "request" event per request to the job API and load-balanced routes. The service's LB front (which
   * answers those without node:http) is then off: one user's session trades its speed for a line per request.
   */
  requestLog?: boolean;
}

export type DevEvent =
  | { type: "built"; build: BuildResult }
  /**
   * `added`/`removed`: endpoint names new in this build or gone from it; `changed`: those kept whose code or settings
   * changed, which get new workers (all empty on the first deploy).
   */
  | { type: "deployed"; endpoints: DeployedEndpoint[]; added: string[]; removed: string[]; changed: string[] }
  | { type: "rebuilding"; changed: string[] }
  | { type: "rebuild-failed"; error: unknown }
  | { type: "port-fallback"; requested: number; port: number }
  /** An image endpoint (`Endpoint({ name, image })`) that cannot run: no Docker engine. Said once per endpoint. */
  | { type: "image-unavailable"; endpoint: string; image: string; error: UserError }
  | { type: "worker-log"; endpoint: string; workerId: string; line: WorkerLogLine }
  /** A request a caller made (job API, load-balanced route), once answered. */
  | { type: "request"; method: string; path: string; status: number; ms: number };

/** Requests of callers (the job API, load-balanced routes), not of the console, workers or the management API. Pure. */
export function isCallerRequest(path: string): boolean {
  return /^\/(v2|lb)\/[^/]+/.test(path);
}

export interface DevSessionHandle {
  url: string;
  apiKey: string;
  app: string;
  service: Service;
  endpoints: DeployedEndpoint[];
  build: BuildResult;
  /** The isolation workers run under, in words (the process driver's). */
  isolation: string;
  /** Rebuild and redeploy now (what a source change triggers). */
  rebuild(): Promise<DeployedEndpoint[]>;
  close(): Promise<void>;
}

/** Files whose change triggers a rebuild: sources, not outputs, dependencies or what .gitignore names. */
export function isWatchedChange(root: string, file: string, ignored?: (rel: string) => boolean): boolean {
  const rel = relative(root, join(root, file)).split(sep).join("/");
  // The project's .env files are what dev reads variables from: watched although .gitignore (rightly) names them.
  if ((DEV_ENV_FILES as readonly string[]).includes(rel)) return true;
  if (/(^|\/)(node_modules|\.svc|dist|\.git|coverage)(\/|$)/.test(rel)) return false;
  if (ignored?.(rel)) return false;
  return /\.(m|c)?(t|j)sx?$|(^|\/)package\.json$|(^|\/)\.env$/.test(rel);
}

/** What the project's .gitignore names (relative, forward slashes), for the watcher to skip. */
function gitignored(root: string): (rel: string) => boolean {
  const file = join(root, ".gitignore");
  if (!existsSync(file)) return () => false;
  const rules = ignore().add(readFileSync(file, "utf8"));
  return (rel) => rel !== "" && rules.ignores(rel);
}

/** How long the watcher waits for a burst of writes (an editor's save, a git checkout) to settle. */
export const WATCH_DEBOUNCE_MS = 150;

/** How many ports after the default `svc dev` tries when the default is taken. */
export const DEV_PORT_ATTEMPTS = 20;

async function listen(options: DevSessionOptions, dataDir: string, apiKey: string, driver: ProcessDriver): Promise<Service> {
  const requested = options.port ?? options.defaultPort ?? DEFAULT_DEV_PORT;
  const base = {
    ...(options.settings ? serviceOptionsOf(options.settings) : {}),
    // One user on their own machine: webhooks may reach its loopback receivers (never the service itself).
    webhooks: { allow: [...LOOPBACK_WEBHOOK_ALLOW, ...(options.settings?.webhookAllow ?? [])] },
    dataDir,
    host: options.host ?? "127.0.0.1",
    driver,
    apiKeys: [apiKey],
    // A module that throws on load throws again: one try says it, the last good code keeps serving.
    releaseAttempts: 1,
    onWorkerLog: (entry: { endpoint: string; workerId: string; line: WorkerLogLine }) => options.onEvent?.({ type: "worker-log", ...entry }),
    ...(options.requestLog
      ? {
          lbFront: false,
          onRequest: ({ quiet, ...r }: { method: string; path: string; status: number; ms: number; quiet: boolean }) => {
            if (isCallerRequest(r.path) && !quiet) options.onEvent?.({ type: "request", ...r });
          },
        }
      : {}),
  };
  // A port asked for is that port or an error; the default moves to the next free one (8601, 8602...), so the
  // URL stays predictable and a second session of another project sits beside the first.
  const candidates = options.port !== undefined ? [requested] : Array.from({ length: DEV_PORT_ATTEMPTS }, (_, i) => requested + i);
  for (const port of candidates) {
    try {
      const service = await startService({ ...base, port, s3Port: options.s3Port === undefined ? defaultS3Port(port) : options.s3Port });
      if (port !== requested) options.onEvent?.({ type: "port-fallback", requested, port: service.port });
      return service;
    } catch (err) {
      // The S3 port taken moves both on too, unless it was asked for.
      if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE" || (err instanceof S3ListenError && options.s3Port != null)) throw err;
    }
  }
  throw new UserError(
    options.port !== undefined ? `Port ${requested} is already in use` : `Ports ${requested} to ${requested + DEV_PORT_ATTEMPTS - 1} are all in use`,
    { hint: "Pass another one with --port <n> (0 for any free port)." },
  );
}

export async function startDevSession(options: DevSessionOptions): Promise<DevSessionHandle> {
  const root = options.root;
  const dataDir = options.dataDir ?? join(root, ".svc", "dev-data");
  const apiKey = options.apiKey ?? envSetting("SVC_API_KEY") ?? (await sessionKey(dataDir));
  const emit = options.onEvent ?? (() => {});

  let build = await buildProject(root, { exclude: options.exclude });
  emit({ type: "built", build });
  await mkdir(dataDir, { recursive: true });
  // Sandboxed where bubblewrap works, as `svc server`'s workers: the same code behaves the same in both. Without
  // one, dev serves its one user as before.
  const processes = createProcessDriver({
    cacheDir: join(dataDir, "artifact-cache"),
    stateDir: join(dataDir, "workers"),
    snapshotDir: join(dataDir, "snapshots"),
    probeSnapshots: true,
    pool: options.pool ?? DEFAULT_DEV_POOL,
    sandbox: options.sandbox ?? options.settings?.sandbox ?? "auto",
    envAllow: options.settings?.workerEnvAllow,
  });
  // Image endpoints run in Docker: an engine is looked for when the project has one, and its absence is said per
  // endpoint (the others are served all the same).
  const docker = imageEndpointsOf(build.manifest).length > 0 ? await dockerForImages({ timeoutMs: options.dockerTimeoutMs }) : undefined;
  const dockerReason = docker && "reason" in docker ? docker.reason : "svc dev looked for no Docker engine (the project had no image endpoint when it started)";
  const driver = withImageWorkers(processes, docker && "driver" in docker ? docker.driver : undefined);
  const unavailableSaid = new Set<string>();
  const sayUnavailable = (manifest: BuildResult["manifest"]) => {
    if (driver.hasImage) return;
    for (const [name, image] of imageEndpointsOf(manifest)) {
      if (unavailableSaid.has(`${name}\0${image}`)) continue;
      unavailableSaid.add(`${name}\0${image}`);
      emit({ type: "image-unavailable", endpoint: name, image, error: imageEndpointUnavailable(name, image, dockerReason) });
    }
  };
  let service: Service;
  try {
    service = await listen(options, dataDir, apiKey, driver);
  } catch (err) {
    await driver.close();
    throw err;
  }

  let deployedNames: string[] = [];
  let first = true;
  const deploy = async (result: BuildResult) => {
    // The service keeps its own copy of the artifact (by checksum), so the next build may overwrite this one.
    const retries = options.retries ?? 0;
    const manifest = {
      ...result.manifest,
      resources: Object.fromEntries(Object.entries(result.manifest.resources).map(([name, r]) => [name, { ...r, retries }])),
    };
    const before = new Set(deployedNames);
    sayUnavailable(result.manifest);
    // Secrets the endpoints name come from .env or the environment where the dev service has none.
    const missing = await syncDevSecrets({ url: service.url, apiKey, dataDir, app: result.manifest.app, manifest: result.manifest, values: projectEnv(root) });
    if (missing.length > 0) throw missingSecretsError(result.manifest.app, missing);
    const endpoints = await service.deploy({ app: result.manifest.app, env: DEV_ENV, manifest, artifactPath: result.artifactPath });
    const now = endpoints.map((e) => e.name);
    const added = first ? [] : now.filter((n) => !before.has(n));
    const removed = first ? [] : [...before].filter((n) => !now.includes(n));
    const changed = first ? [] : endpoints.filter((e) => e.changed && before.has(e.name)).map((e) => e.name);
    deployedNames = now;
    first = false;
    await writeSessionFile(root, {
      pid: process.pid,
      url: service.url,
      apiKey,
      app: result.manifest.app,
      env: DEV_ENV,
      endpoints: Object.fromEntries(endpoints.map((e) => [e.name, { id: e.id, url: e.url }])),
    });
    emit({ type: "deployed", endpoints, added, removed, changed });
    return endpoints;
  };

  let endpoints: DeployedEndpoint[];
  try {
    endpoints = await deploy(build);
  } catch (err) {
    if (!(err instanceof ReleaseFailedError || err instanceof DevSecretsMissingError)) {
      await service.close();
      throw err;
    }
    // The code builds but does not start: the session runs anyway (nothing served yet), the next save retries.
    emit({ type: "rebuild-failed", error: err });
    endpoints = [];
  }

  // One rebuild at a time; changes during a rebuild schedule exactly one more.
  let running: Promise<DeployedEndpoint[]> | undefined;
  let again = false;
  const rebuild = async (): Promise<DeployedEndpoint[]> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          build = await buildProject(root, { exclude: options.exclude });
          emit({ type: "built", build });
          endpoints = await deploy(build);
        } while (again);
        return endpoints;
      } finally {
        running = undefined;
      }
    })();
    return running;
  };

  let watcher: FSWatcher | undefined;
  if (options.watch) {
    let timer: NodeJS.Timeout | undefined;
    const changed = new Set<string>();
    const ignored = gitignored(root);
    // chokidar, not fs.watch: an editor's atomic save (write a temporary file, rename it over the original) must
    // be seen every time; fs.watch keeps following the replaced file and misses every save after the first.
    watcher = watchFiles(root, {
      ignoreInitial: true,
      atomic: true,
      ignored: (path: string, stats?: { isDirectory(): boolean }) => {
        const rel = relative(root, path).split(sep).join("/");
        if (rel === "" || (DEV_ENV_FILES as readonly string[]).includes(rel)) return false;
        // A directory pattern of .gitignore ("build/") matches the directory's own path only with its slash.
        return /(^|\/)(node_modules|\.svc|dist|\.git|coverage)(\/|$)/.test(rel) || ignored(rel) || (stats?.isDirectory() === true && ignored(`${rel}/`));
      },
    });
    const onChange = (path: string) => {
      const rel = relative(root, path);
      if (!isWatchedChange(root, rel, ignored)) return;
      changed.add(rel.split(sep).join("/"));
      clearTimeout(timer);
      timer = setTimeout(() => {
        emit({ type: "rebuilding", changed: [...changed].sort() });
        changed.clear();
        rebuild().catch((error: unknown) => emit({ type: "rebuild-failed", error }));
      }, WATCH_DEBOUNCE_MS);
    };
    watcher.on("add", onChange).on("change", onChange).on("unlink", onChange);
    // A watcher that cannot watch (too many files, a permission) must not end the session: say so.
    watcher.on("error", (error: unknown) => emit({ type: "rebuild-failed", error }));
    await new Promise<void>((resolve) => watcher!.once("ready", () => resolve()));
  }

  return {
    url: service.url,
    apiKey,
    app: build.manifest.app,
    service,
    isolation: driver.sandboxing.description,
    get endpoints() {
      return endpoints;
    },
    get build() {
      return build;
    },
    rebuild,
    async close() {
      await watcher?.close();
      await running?.catch(() => undefined /* its failure was answered to whoever asked for that rebuild */);
      await rm(join(root, DEV_SESSION_FILE), { force: true });
      await service.close();
    },
  };
}

/** A generated key kept in the data dir, so pasted curl commands keep working across `svc dev` runs. */
async function sessionKey(dataDir: string): Promise<string> {
  const file = join(dataDir, "dev-key");
  try {
    const existing = (await readFile(file, "utf8")).trim();
    if (existing) return existing;
  } catch {
    // first run
  }
  const key = `svc_dev_${randomBytes(18).toString("base64url")}`;
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  return key;
}

async function writeSessionFile(root: string, session: DevSession): Promise<void> {
  const file = join(root, DEV_SESSION_FILE);
  await mkdir(join(root, ".svc"), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  // The file holds the session's key: readable by the owner only.
  await writeFile(temp, `${JSON.stringify(session, null, 2)}\n`, { mode: 0o600 });
  await rename(temp, file);
}
