// `svc deploy --preview` as a library: build, run the service on the host with Docker workers on a network of
// their own, deploy the build as environment "preview" with one container per endpoint from the start, and
// wait until every endpoint answers. close() removes the containers, the network and the session's volumes.
// A preview whose process died (SIGKILL, a crash) is found by its labels and removed on the next start.
// The pure parts are in render.ts; docs/docker.md ("svc deploy --preview") explains the choices.

import { randomBytes } from "node:crypto";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { buildProject, type BuildResult } from "../build/index.js";
import { connectDocker, labelFilter, LABELS } from "../drivers/docker-engine.js";
import { createDockerDriver, type DockerDriver } from "../drivers/docker.js";
import { cleanupStale, detectGpuSupport, type StaleCleanup } from "../drivers/docker-host.js";
import { workerWarningLine } from "../drivers/docker-spec.js";
import { imageKindOf, type WorkerImageKind } from "../drivers/image-names.js";
import type { WorkerDriver, WorkerLogLine } from "../drivers/types.js";
import { errorMessage, UserError } from "../errors.js";
import { endpointImageOf, envSetting, processAlive } from "svc/internal";
import { startService, type Service } from "../service/index.js";
import { LOOPBACK_WEBHOOK_ALLOW } from "../service/webhooks/address-policy.js";
import { localEndpoints, type LocalEndpoint } from "../deploy/access.js";
import { PREVIEW_LABELS, previewManifest, staleSessions } from "./render.js";

export const PREVIEW_ENV = "preview";
export const DEFAULT_PREVIEW_PORT = 8700;
const READY_TIMEOUT_MS = 120_000;

export interface PreviewSessionOptions {
  root: string;
  /** Port of the service on 127.0.0.1 (default 8700, or a free one when taken; an explicit port must be free). */
  port?: number;
  /** Admin key of the service; default SVC_API_KEY, else one generated and kept in <root>/.svc/preview-key. */
  apiKey?: string;
  /** App name (default: the build's). */
  app?: string;
  exclude?: string[];
  /** Run GPU endpoints on CPU when the host has no GPU. */
  allowCpuFallback?: boolean;
  /** How long to wait for every endpoint to answer before going on with a warning (default 120 s). */
  readyTimeoutMs?: number;
  docker?: Docker;
  /** Abort the start (a signal while starting): what was created is removed and the start rejects. */
  signal?: AbortSignal;
  onEvent?(event: PreviewEvent): void;
  /** Each step as it starts (the build's steps, then the images, the service, the containers). */
  onProgress?(label: string): void;
  /** Every output line of every worker container, as it comes. */
  onLog?(endpointName: string, line: WorkerLogLine): void;
}

export type PreviewEvent =
  | { type: "stale-removed"; sessions: string[]; removed: StaleCleanup }
  | { type: "built"; build: BuildResult }
  | { type: "images-ready"; kinds: WorkerImageKind[] }
  | { type: "port-fallback"; requested: number; port: number }
  | { type: "deployed"; endpoints: LocalEndpoint[] }
  | { type: "not-ready"; endpoints: string[]; waitedMs: number }
  /** Something the user should know, once (the CPU fallback of a GPU endpoint). */
  | { type: "warning"; message: string }
  | { type: "service-log"; message: string };

export interface PreviewSessionHandle {
  url: string;
  apiKey: string;
  app: string;
  env: string;
  /** The Docker session label of everything this preview created. */
  session: string;
  endpoints: LocalEndpoint[];
  build: BuildResult;
  service: Service;
  /** Stop the containers, remove them, the network and the session's volumes, and stop the service. Idempotent. */
  close(): Promise<void>;
}

/**
 * Remove what previews whose process is gone left in the engine (containers, networks, volumes), found by the
 * preview labels, and the artifacts they staged. Returns the sessions and how many objects went; `log` hears of a
 * staged directory that could not be removed.
 */
export async function removeStalePreviews(
  docker: Docker,
  self: { hostname: string; isAlive(pid: number): boolean } = { hostname: hostname(), isAlive: processAlive },
  log?: (message: string) => void,
): Promise<{ sessions: string[]; removed: StaleCleanup }> {
  const filters = labelFilter({ [LABELS.managed]: "true", [PREVIEW_LABELS.preview]: "true" });
  const [containers, networks, volumes] = await Promise.all([
    docker.listContainers({ all: true, filters }),
    docker.listNetworks({ filters }),
    docker.listVolumes({ filters }),
  ]);
  const objects = [
    ...containers.map((c) => ({ labels: c.Labels })),
    ...networks.map((n) => ({ labels: n.Labels })),
    ...(volumes.Volumes ?? []).map((v) => ({ labels: v.Labels ?? undefined })),
  ];
  const sessions = staleSessions(objects, self);
  const removed: StaleCleanup = { containers: 0, networks: 0, volumes: 0 };
  for (const session of sessions) {
    const r = await cleanupStale({ [LABELS.session]: session }, { docker, log });
    removed.containers += r.containers;
    removed.networks += r.networks;
    removed.volumes += r.volumes;
  }
  return { sessions, removed };
}

/** A generated key kept beside the preview's data, so pasted curl commands keep working across previews. */
async function previewKey(root: string): Promise<string> {
  const file = join(root, ".svc", "preview-key");
  const existing = await readFile(file, "utf8").then(
    (s) => s.trim(),
    () => "",
  );
  if (existing) return existing;
  const key = `svc_preview_${randomBytes(18).toString("base64url")}`;
  await mkdir(join(root, ".svc"), { recursive: true });
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  return key;
}

async function listen(options: PreviewSessionOptions, base: Parameters<typeof startService>[0], emit: (e: PreviewEvent) => void): Promise<Service> {
  const requested = options.port ?? DEFAULT_PREVIEW_PORT;
  try {
    return await startService({ ...base, port: requested });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    if (options.port !== undefined)
      throw new UserError(`Port ${requested} is already in use`, { hint: "Pass another one with --port <n> (0 for any free port)." });
    const service = await startService({ ...base, port: 0 });
    emit({ type: "port-fallback", requested, port: service.port });
    return service;
  }
}

/** Ready: a queue-based endpoint has a registered worker; a load-balanced one a worker whose /ping said 200. */
async function endpointReady(url: string, apiKey: string, endpoint: LocalEndpoint): Promise<boolean> {
  try {
    const serviceUrl = url.replace(/\/+$/, "");
    const response = await fetch(`${serviceUrl}/v2/${endpoint.id}/health`, {
      headers: { authorization: `Bearer ${apiKey}` },
      signal: AbortSignal.timeout(5000),
    });
    if (!response.ok) return false;
    const health = (await response.json()) as { workers?: { idle?: number; running?: number }; pool?: { ready?: number } };
    if (endpoint.type === "lb") return (health.pool?.ready ?? 0) > 0;
    return (health.workers?.idle ?? 0) + (health.workers?.running ?? 0) > 0;
  } catch {
    return false;
  }
}

async function waitUntilReady(url: string, apiKey: string, endpoints: readonly LocalEndpoint[], timeoutMs: number, closed: () => boolean): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let waiting = [...endpoints];
  while (waiting.length > 0 && !closed()) {
    const ready = await Promise.all(waiting.map((e) => endpointReady(url, apiKey, e)));
    waiting = waiting.filter((_, i) => !ready[i]);
    if (waiting.length === 0 || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return waiting.map((e) => e.name);
}

/**
 * Tee every worker's output lines to `onLog`, named by endpoint, while the service keeps them too. Lines for which
 * `shown` is true were already shown (a driver's warning, printed once as a warning) and are only kept.
 */
function withLogTap(driver: DockerDriver, onLog: (endpointName: string, line: WorkerLogLine) => void, shown: (line: WorkerLogLine) => boolean): WorkerDriver {
  return {
    name: driver.name,
    start: (launch) =>
      driver.start({
        ...launch,
        onLog(line) {
          launch.onLog(line);
          if (shown(line)) return;
          try {
            onLog(launch.endpointName, line);
          } catch {
            // the console must not take the worker's log stream down
          }
        },
      }),
    // It runs images as the driver does: an image endpoint's workers start here too.
    hasImage: (name) => driver.hasImage?.(name) ?? Promise.resolve(false),
    close: () => driver.close(),
  };
}

export async function startPreviewSession(options: PreviewSessionOptions): Promise<PreviewSessionHandle> {
  const root = options.root;
  const emit = options.onEvent ?? (() => undefined);
  const progress = options.onProgress ?? (() => undefined);
  const checkpoint = () => {
    if (options.signal?.aborted) throw new UserError("The preview was interrupted while starting");
  };
  // The engine first: without one nothing else is worth doing (the error names DOCKER_HOST and how to start one).
  const docker = await connectDocker({ docker: options.docker });
  const stale = await removeStalePreviews(docker, undefined, (message) => emit({ type: "service-log", message }));
  if (stale.sessions.length > 0) emit({ type: "stale-removed", ...stale });

  checkpoint();
  const build = await buildProject(root, { exclude: options.exclude, onProgress: progress });
  emit({ type: "built", build });
  checkpoint();
  const resources = Object.values(build.manifest.resources);
  if (!options.allowCpuFallback && resources.some((r) => r.computeType === "GPU")) {
    // A step of its own, so that its failure is not shown as the build's last step failing.
    progress("Checking for GPUs");
    const gpu = await detectGpuSupport(docker);
    if (!gpu.available) {
      const names = Object.entries(build.manifest.resources)
        .filter(([, r]) => r.computeType === "GPU")
        .map(([name]) => name);
      throw new UserError(`Endpoint(s) ${names.join(", ")} need a GPU, but ${gpu.reason}`, {
        hint: "Preview them on CPU with --allow-cpu-fallback, or run on a host with an NVIDIA GPU and the NVIDIA container toolkit.",
      });
    }
  }

  const fromEnv = options.apiKey === undefined ? envSetting("SVC_API_KEY") : undefined;
  const apiKey = options.apiKey ?? fromEnv ?? (await previewKey(root));
  const driver = createDockerDriver({
    docker,
    networkScope: "session",
    volumeLifetime: "session",
    allowCpuFallback: options.allowCpuFallback,
    labels: { [PREVIEW_LABELS.preview]: "true", [PREVIEW_LABELS.pid]: String(process.pid), [PREVIEW_LABELS.host]: hostname() },
    log: (message) => emit({ type: "service-log", message }),
    // Once as a warning; the same warning in each worker's log is then not printed again (see withLogTap).
    warn: (message) => {
      warnings.add(workerWarningLine(message));
      emit({ type: "warning", message });
    },
  });
  const warnings = new Set<string>();
  // An image endpoint brings its own image (it must be in the engine: the deploy checks); svc's are built here.
  const kinds = [...new Set(resources.filter((r) => !endpointImageOf(r)).map((r) => imageKindOf(r.computeType)))].sort();
  let service: Service | undefined;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // The service's close stops its scaler, which closes the driver: containers, network, session volumes.
      if (service) await service.close();
      else await driver.close();
      // Once more by label: a removal the engine was still busy with (409) must not leave a volume behind.
      await cleanupStale({ [LABELS.session]: driver.session }, { docker, log: (message) => emit({ type: "service-log", message }) }).catch((err: unknown) =>
        emit({ type: "service-log", message: `cleanup of preview session ${driver.session} failed: ${errorMessage(err)}` }),
      );
    })());

  try {
    try {
      progress(`Preparing the worker image${kinds.length > 1 ? "s" : ""} (${kinds.join(", ")})`);
      await driver.prepare(kinds);
    } catch (err) {
      const why = errorMessage(err).replace(/^Cannot build the worker image:\s*/, "");
      throw new UserError(`Could not build the worker image: ${why}`, {
        hint: err instanceof UserError ? err.hint : undefined,
        problems: err instanceof UserError ? err.problems : [],
        cause: err,
      });
    }
    emit({ type: "images-ready", kinds });
    checkpoint();

    // A preview is throwaway: no job, key or endpoint of an earlier one survives.
    const dataDir = join(root, ".svc", "preview-data");
    await rm(dataDir, { recursive: true, force: true });
    await mkdir(dataDir, { recursive: true });
    progress("Starting the service");
    const tapped = options.onLog ? withLogTap(driver, options.onLog, (line) => line.stream === "stderr" && warnings.has(line.text)) : driver;
    // One user on their own machine, as `svc dev`: webhooks may reach its loopback receivers.
    service = await listen(
      options,
      {
        dataDir,
        host: "127.0.0.1",
        driver: tapped,
        apiKeys: [apiKey],
        webhooks: { allow: LOOPBACK_WEBHOOK_ALLOW },
        log: (message) => emit({ type: "service-log", message }),
      },
      emit,
    );

    const manifest = previewManifest(build.manifest);
    const app = options.app ?? manifest.app;
    progress(`Starting ${Object.keys(manifest.resources).length} container(s)`);
    const deployed = await service.deploy({ app, env: PREVIEW_ENV, manifest, artifactPath: build.artifactPath });
    const endpoints = localEndpoints(deployed, manifest, service.url, fromEnv ? "$SVC_API_KEY" : apiKey);
    emit({ type: "deployed", endpoints });
    checkpoint();

    const timeoutMs = options.readyTimeoutMs ?? READY_TIMEOUT_MS;
    const started = Date.now();
    progress("Waiting for every endpoint to answer");
    const notReady = await waitUntilReady(service.url, apiKey, endpoints, timeoutMs, () => closing !== undefined || options.signal?.aborted === true);
    checkpoint();
    if (notReady.length > 0) emit({ type: "not-ready", endpoints: notReady, waitedMs: Date.now() - started });

    return { url: service.url, apiKey, app, env: PREVIEW_ENV, session: driver.session, endpoints, build, service, close };
  } catch (err) {
    await close().catch(() => undefined /* the start's error is the one to report */);
    throw err;
  }
}
