// Workers as Docker containers (dockerode): one container per worker, from the locally built worker image
// (src/drivers/images.ts), with the endpoint's artifact mounted read-only. Containers sit on a Docker network
// per app/environment (or per session) and reach the host's loopback service through a forwarder on the
// network's gateway (src/drivers/docker-forwarder.ts), under the host name `svc-api`. Everything created is
// labelled (svc.managed, svc.app, svc.env, svc.endpoint, svc.session, svc.worker) so a crashed session can be
// cleaned up by label (cleanupStale). With `pool`, containers are also started ahead of need and claimed by cold
// starts (docker-pool.ts, docs/cold-start.md). See docs/docker.md.

import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, rmSync } from "node:fs";
import { execFile, spawnSync } from "node:child_process";
import { execaSync } from "execa";
import { basename, join } from "node:path";
import { PassThrough } from "node:stream";
import { createInterface } from "node:readline";
import { constants as osConstants, tmpdir } from "node:os";
import { promisify } from "node:util";
import type Docker from "dockerode";
import { errorMessage, UserError } from "../errors.js";
import { connectDocker, dockerMessage, dockerNamePart, dockerStatus, labelFilter, LABELS, START_ENGINE_HINT } from "./docker-engine.js";
import { startForwarder, type Forwarder } from "./docker-forwarder.js";
import { applyProtocolEnv } from "./env.js";
import { PROVIDER_VOLUME_MOUNT } from "./provider-env.js";
import { readMarkedLine } from "../runtime/output-marks.js";
import { ARTIFACT_MOUNT, ensureWorkerImage, imageKindOf, VOLUME_MOUNT, type WorkerImageKind } from "./images.js";
import { registryWorkerImage } from "./registry.js";
import { ArtifactCache, claimedName, removeArtifactsDir, claimEnvironment, parseClaimedName, poolContainerOptions, poolLabels, poolRefusal, poolSizes } from "./docker-pool.js";
import { prepareVolumeDir } from "./volume-dir.js";
import { DEFAULT_CONTAINER_LIMITS, describeRuntime, dockerConfinement, dockerResources, WORKER_GID, WORKER_HOME, WORKER_UID, type ContainerLimits } from "./isolation.js";
import { POOL_READY_LINE } from "../runtime/claim.js";
import type { AdoptedWorker, WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch, WorkerLogLine } from "./types.js";

/** The host name workers use for the service (an ExtraHosts entry pointing at the network's gateway). */
export const SERVICE_HOST_ALIAS = "svc-api";

/**
 * The port a load-balanced worker's HTTP server listens on inside its container (on 0.0.0.0); the driver
 * publishes it on the host's 127.0.0.1 at a free port, which the service's proxy uses.
 */
export const LB_CONTAINER_PORT = 8080;

export interface DockerDriverOptions {
  /** Engine client (default: DOCKER_HOST or the local socket). */
  docker?: Docker;
  /** Labels everything this driver creates (svc.session); default a random id. */
  session?: string;
  /** One network per app/environment (default, shared by drivers), or one per session (previews, tests). */
  networkScope?: "app-env" | "session";
  /**
   * Network volumes: "persistent" (default) volumes outlive the driver, as network volumes do; "session" volumes
   * are named and labelled with the session and removed by close().
   */
  volumeLifetime?: "persistent" | "session";
  /** Images to run; default: svc-worker-cpu/gpu built locally (cached by content hash) on first use. */
  images?: Partial<Record<WorkerImageKind, string>>;
  /** Run the worker images pushed to this registry (host:port), by digest, pulled when missing (registry.ts). */
  registry?: string;
  /** Run GPU endpoints on CPU (with a logged warning) when the host has no NVIDIA GPU. */
  allowCpuFallback?: boolean;
  /** Override GPU detection (default: /dev/nvidia0, nvidia-smi, or an "nvidia" runtime in the engine). */
  gpuSupport?: GpuSupport;
  /** Container ports to publish, always on 127.0.0.1 (hostPort 0 or absent: any free port). */
  publish?: Array<{ containerPort: number; hostPort?: number }>;
  /** How long close() lets containers stop before they are killed (default 3000 ms). */
  closeGraceMs?: number;
  /** Operator messages. */
  log?: (message: string) => void;
  /**
   * Warnings for the operator (the CPU fallback), each once per driver however many workers it concerns;
   * default: the log, as "warning: <message>". Each worker's own log gets the warning too (workerWarningLine).
   */
  warn?: (message: string) => void;
  /** Extra labels on everything the driver creates (containers, networks, volumes), e.g. a preview's owner. */
  labels?: Record<string, string>;
  /**
   * A stable session (one per data directory of `svc server`): adopt() then finds the containers a killed
   * earlier run of the same service left, by that label.
   */
  stableSession?: boolean;
  /**
   * Pre-booted worker containers kept ready per image kind (default 0: none; a number: that many CPU ones, and
   * GPU ones on a host with GPUs). A cold start of an endpoint that needs nothing fixed at container create
   * (no network volume, not load-balanced) claims one. docs/cold-start.md.
   */
  pool?: number | Partial<Record<WorkerImageKind, number>>;
  /** The node's artifact cache that pool containers read artifacts from (default: <tmp>/svc-pool-artifacts-<session>). */
  artifactCacheDir?: string;
  /**
   * The engine's OCI runtime workers run under: "runsc" for gVisor (registered with dockerd, see
   * scripts/ensure-docker.sh); default the engine's own default (runc). `svc server --docker-runtime`.
   */
  runtime?: string;
  /** Processes and /tmp size per worker container (memory and CPU come from the endpoint's instance). */
  limits?: Partial<ContainerLimits>;
}

export interface DockerWorkerHandle extends WorkerHandle {
  readonly containerId: string;
  readonly containerName: string;
  /** Published ports: container port -> host port on 127.0.0.1. */
  readonly ports: Record<number, number>;
}

export interface DockerDriver extends WorkerDriver {
  readonly name: "docker";
  readonly session: string;
  /** Connect to the engine and build (or find cached) the worker images ahead of the first start. */
  prepare(kinds?: readonly WorkerImageKind[]): Promise<void>;
  start(launch: WorkerLaunch): Promise<DockerWorkerHandle>;
  /** Names of the pre-booted containers ready for a claim. */
  pooledContainers(): string[];
  /** How worker containers are confined here, in one line (the runtime the engine runs them under included). */
  isolation(): Promise<string>;
}

// ---------------------------------------------------------------------------------------------------------
// Pure parts

export interface GpuSupport {
  available: boolean;
  /** Why (not): shown in errors and warnings. */
  reason: string;
}

/** The line a driver's warning about a worker takes in that worker's own log. Pure. */
export function workerWarningLine(warning: string): string {
  return `[svc] warning: ${warning}`;
}

/** GPU endpoints get device requests when the host has GPUs; otherwise an error, or CPU with a warning. Pure. */
export function gpuDecision(computeType: "GPU" | "CPU", support: GpuSupport, allowCpuFallback: boolean, endpointName: string): { requestGpus: boolean; warning?: string } {
  if (computeType !== "GPU") return { requestGpus: false };
  if (support.available) return { requestGpus: true };
  if (allowCpuFallback) return { requestGpus: false, warning: `endpoint "${endpointName}" asks for a GPU but ${support.reason}; running it on CPU` };
  throw new UserError(`Cannot start a worker for GPU endpoint "${endpointName}": ${support.reason}`, {
    hint: "Run it on a host with an NVIDIA GPU and the NVIDIA container toolkit, or allow CPU fallback (allowCpuFallback / the command's CPU-fallback flag).",
  });
}

export function networkNameFor(scope: "app-env" | "session", launch: Pick<WorkerLaunch, "app" | "env">, session: string): string {
  return scope === "session" ? `svc-session-${dockerNamePart(session)}` : `svc-${dockerNamePart(launch.app, 30)}-${dockerNamePart(launch.env, 20)}`;
}

/**
 * The Docker volume of a launch that names one (`volumeName`) and carries no host directory; undefined otherwise
 * (a launch with `volumePath` bind-mounts that directory: the volume's one home, docs/volumes.md). Pure.
 */
export function volumeFor(launch: Pick<WorkerLaunch, "volumeName" | "volumePath">, lifetime: "persistent" | "session", session: string): { name: string; key: string } | undefined {
  if (launch.volumePath) return undefined;
  const key = launch.volumeName;
  if (!key) return undefined;
  const name = lifetime === "session" ? `svc-vol-${dockerNamePart(session, 24)}-${dockerNamePart(key)}` : `svc-vol-${dockerNamePart(key)}`;
  return { name, key };
}

/** The service URL as a worker on `network` reaches it: loopback URLs go through the forwarder. Pure. */
export function isLoopbackUrl(apiUrl: string): boolean {
  const host = new URL(apiUrl).hostname.replace(/^\[|\]$/g, "");
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

export interface ContainerPlan {
  name: string;
  image: string;
  network: string;
  /** Gateway IP for the svc-api alias, when the service is reached through the forwarder. */
  serviceHostIp?: string;
  /** SVC_API_URL inside the container. */
  apiUrl: string;
  labels: Record<string, string>;
  /** A Docker volume of that name (launches that carry only `volumeName`). */
  volume?: string;
  /** The volume's host directory, bind-mounted: the same files the process driver's workers get. */
  volumeHostPath?: string;
  requestGpus: boolean;
  publish: Array<{ containerPort: number; hostPort?: number }>;
  /** Load-balanced workers: the container port their HTTP server listens on (on all interfaces). */
  httpPort?: number;
  /** Processes and /tmp size (default DEFAULT_CONTAINER_LIMITS). */
  limits?: ContainerLimits;
  /** The OCI runtime ("runsc"); undefined: the engine's default. */
  runtime?: string;
}

/** Worker environment (docs/worker-protocol.md): the endpoint's variables, then protocol ones that win. Pure. */
export function containerEnv(launch: WorkerLaunch, apiUrl: string, hasVolume: boolean, httpPort?: number): string[] {
  // An image (a provider worker) keeps its own user's home.
  const env: Record<string, string> = { ...(launch.image ? {} : { HOME: WORKER_HOME }), ...launch.environment };
  // A server on the container's loopback is unreachable from the host: LB workers listen on every interface.
  const http = httpPort === undefined ? undefined : { host: "0.0.0.0", port: httpPort };
  applyProtocolEnv(env, launch, { apiUrl, artifact: ARTIFACT_MOUNT, volumePath: hasVolume ? VOLUME_MOUNT : undefined, http });
  return Object.entries(env).map(([key, value]) => `${key}=${value}`);
}

export function containerLabels(launch: WorkerLaunch, session: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...extra,
    [LABELS.managed]: "true",
    [LABELS.app]: launch.app,
    [LABELS.env]: launch.env,
    [LABELS.endpoint]: launch.endpointId,
    [LABELS.session]: session,
    [LABELS.worker]: launch.workerId,
  };
}

/**
 * A prebuilt image's environment: the endpoint's variables, PORT (where its HTTP server must listen) and who it
 * is. No credentials and no service address: it does not speak the worker protocol. Pure.
 */
export function prebuiltImageEnv(launch: WorkerLaunch, port: number): string[] {
  const env: Record<string, string> = {
    ...launch.environment,
    PORT: String(port),
    SVC_WORKER_ID: launch.workerId,
    SVC_ENDPOINT_ID: launch.endpointId,
    SVC_ENDPOINT_NAME: launch.endpointName,
  };
  if (launch.volumeName || launch.volumePath) env.SVC_VOLUME_PATH = VOLUME_MOUNT;
  return Object.entries(env).map(([key, value]) => `${key}=${value}`);
}

/** The engine's create-container body. Pure. */
export function containerCreateOptions(launch: WorkerLaunch, plan: ContainerPlan): Docker.ContainerCreateOptions {
  const exposed: Record<string, object> = {};
  const bindings: Record<string, Array<{ HostIp: string; HostPort: string }>> = {};
  for (const p of plan.publish) {
    exposed[`${p.containerPort}/tcp`] = {};
    // Only ever on loopback: a preview must not expose workers to the network.
    bindings[`${p.containerPort}/tcp`] = [{ HostIp: "127.0.0.1", HostPort: p.hostPort ? String(p.hostPort) : "" }];
  }
  const hostConfig: Docker.HostConfig = {
    NetworkMode: plan.network,
    // Read-only: the runtime extracts it into the container's /tmp; the artifact is never baked into the image.
    // A prebuilt image brings its own code.
    Binds: launch.image ? [] : [`${launch.artifactPath}:${ARTIFACT_MOUNT}:ro`],
    // docker-init as PID 1: forwards SIGTERM to node and reaps zombies of user code.
    Init: true,
    PortBindings: bindings,
    RestartPolicy: { Name: "no" },
    // Non-root without capabilities, no-new-privileges, read-only root and a bounded /tmp, the instance's memory
    // and CPU, a process limit (isolation.ts). A prebuilt image keeps its own user and a writable layer.
    ...dockerConfinement(launch.placement, { limits: plan.limits ?? DEFAULT_CONTAINER_LIMITS, runtime: plan.runtime, readOnlyRoot: !launch.image }),
  };
  if (plan.serviceHostIp) hostConfig.ExtraHosts = [`${SERVICE_HOST_ALIAS}:${plan.serviceHostIp}`];
  if (plan.volumeHostPath) hostConfig.Mounts = [{ Type: "bind", Source: plan.volumeHostPath, Target: VOLUME_MOUNT, ReadOnly: false }];
  else if (plan.volume) hostConfig.Mounts = [{ Type: "volume", Source: plan.volume, Target: VOLUME_MOUNT, ReadOnly: false }];
  // A provider worker finds the volume where the provider mounts it, as well as at svc's own path.
  if (hostConfig.Mounts && launch.protocol === "provider") hostConfig.Mounts.push({ ...hostConfig.Mounts[0]!, Target: PROVIDER_VOLUME_MOUNT });
  if (plan.requestGpus) hostConfig.DeviceRequests = [gpuDeviceRequest(launch.gpus)];
  // Allowed per template, beyond the sandbox's default (docs/provider-workers.md).
  if (launch.shmSizeMb) hostConfig.ShmSize = launch.shmSizeMb * 1024 * 1024;
  return {
    name: plan.name,
    Image: plan.image,
    // svc's images already run as this user; said here too so that another image given as a worker image does.
    ...(launch.image ? {} : { User: `${WORKER_UID}:${WORKER_GID}` }),
    // A provider worker speaks a protocol (the provider's variables, its own token); a load-balanced image none.
    Env: launch.image && launch.protocol !== "provider" ? prebuiltImageEnv(launch, plan.httpPort ?? LB_CONTAINER_PORT) : containerEnv(launch, plan.apiUrl, Boolean(plan.volume || plan.volumeHostPath), plan.httpPort),
    Labels: plan.labels,
    ExposedPorts: exposed,
    HostConfig: hostConfig,
    NetworkingConfig: { EndpointsConfig: { [plan.network]: { Aliases: [dockerNamePart(launch.endpointName)] } } },
  };
}

/**
 * The GPUs a worker's container gets: exactly the ones it holds, by UUID. Without an assignment (the service found
 * no GPU inventory where it runs, yet the engine has GPUs) every GPU, as before assignment existed. Pure.
 */
export function gpuDeviceRequest(uuids: readonly string[] | undefined): Docker.DeviceRequest {
  if (uuids && uuids.length > 0) return { Driver: "nvidia", DeviceIDs: [...uuids], Capabilities: [["gpu"]] };
  return { Driver: "", Count: -1, DeviceIDs: [], Capabilities: [["gpu"]], Options: {} };
}

/** Ports a launch publishes: the driver's own, plus the LB server's port for a load-balanced endpoint. Pure. */
export function publishedPorts(launch: Pick<WorkerLaunch, "loadBalanced">, publish: ReadonlyArray<{ containerPort: number; hostPort?: number }> = []) {
  const ports = [...publish];
  if (launch.loadBalanced && !ports.some((p) => p.containerPort === LB_CONTAINER_PORT)) ports.push({ containerPort: LB_CONTAINER_PORT });
  return ports;
}

/** Exit status of a container -> WorkerExit: 128+n from a signal (docker kill, OOM) reads as that signal. */
export function exitFromStatus(statusCode: number): WorkerExit {
  if (statusCode > 128) {
    const name = Object.entries(osConstants.signals).find(([, n]) => n === statusCode - 128)?.[0];
    if (name === "SIGKILL" || name === "SIGTERM" || name === "SIGINT") return { code: null, signal: name };
  }
  return { code: statusCode, signal: null };
}

/**
 * The engine's failures that come from the OCI runtime the operator named (gVisor's runsc), with what to do. Pure.
 * Debian 12's runsc (2022) takes a container's own network namespace for the host's on kernels where
 * net.core.rmem_default exists in every namespace, and refuses to start anything; registered with --network=host
 * it runs (scripts/ensure-docker.sh does that where needed), as newer gVisor releases do without it.
 */
export function runtimeProblem(message: string): { what: string; hint: string } | undefined {
  if (/unknown runtime specified/i.test(message)) {
    return {
      what: "the engine has no such runtime",
      hint: "Register it with dockerd: install gVisor (apt-get install runsc) and run scripts/ensure-docker.sh (or `runsc install`, then reload dockerd with SIGHUP); or start svc server without --docker-runtime.",
    };
  }
  if (/cannot run with network enabled in root network namespace/i.test(message)) {
    return {
      what: "this runsc is too old for this kernel (it mistakes the container's network namespace for the host's)",
      hint: "Install a newer gVisor release, or register runsc with --network=host: scripts/ensure-docker.sh does that where needed.",
    };
  }
  return undefined;
}

/** A dockerode failure during start -> an error the user can act on. */
export function startError(err: unknown, context: { image: string; endpointName: string }): Error {
  if (err instanceof UserError) return err;
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code === "ECONNREFUSED" || code === "ENOENT") return new UserError(`No Docker engine answers (${errorMessage(err)})`, { hint: START_ENGINE_HINT, cause: err });
  if (code === "EACCES") return new UserError(`Permission denied on the Docker socket (${errorMessage(err)})`, { hint: "Run as root, or add your user to the docker group.", cause: err });
  const message = dockerMessage(err);
  if (/port is already allocated|address already in use/i.test(message)) {
    return new UserError(`Cannot start a worker for "${context.endpointName}": a published port is in use (${message})`, { hint: "Free the port, or publish on any free port (hostPort 0).", cause: err });
  }
  if (dockerStatus(err) === 404 && /no such image/i.test(message)) {
    return new UserError(`The worker image ${context.image} does not exist in this engine`, { hint: "Build it with `svc images build`.", cause: err });
  }
  const runtime = runtimeProblem(message);
  if (runtime) return new UserError(`Docker could not start a worker for "${context.endpointName}": ${runtime.what} (${message})`, { hint: runtime.hint, cause: err });
  return new UserError(`Docker could not start a worker for "${context.endpointName}": ${message}`, { cause: err });
}

// ---------------------------------------------------------------------------------------------------------
// I/O

/** NVIDIA GPUs on this host: a device node, a working nvidia-smi, or the engine's nvidia runtime. */
export async function detectGpuSupport(docker?: Docker): Promise<GpuSupport> {
  if (existsSync("/dev/nvidia0")) return { available: true, reason: "/dev/nvidia0 exists" };
  try {
    const { stdout } = await promisify(execFile)("nvidia-smi", ["-L"], { timeout: 5000, encoding: "utf8" });
    if (/GPU \d+/.test(stdout)) return { available: true, reason: "nvidia-smi lists GPUs" };
  } catch {
    // no nvidia-smi, or no GPU behind it
  }
  if (docker) {
    try {
      const info = (await docker.info()) as { Runtimes?: Record<string, unknown> };
      if (info.Runtimes && "nvidia" in info.Runtimes) return { available: true, reason: "the engine has the nvidia runtime" };
    } catch {
      // the engine's absence is reported elsewhere
    }
  }
  return { available: false, reason: "this host has no NVIDIA GPU (no /dev/nvidia0, no nvidia-smi, no nvidia runtime in the Docker engine)" };
}

export interface StaleCleanup {
  containers: number;
  networks: number;
  volumes: number;
}

/** Where a driver of `session` stages the artifacts its containers bind-mount, unless given artifactCacheDir. */
export function stagedArtifactsDir(session: string): string {
  return join(tmpdir(), `svc-worker-artifacts-${dockerNamePart(session, 40)}`);
}

/** The node artifact cache pool containers of `session` read from, unless given artifactCacheDir. */
export function poolArtifactsDir(session: string): string {
  return join(tmpdir(), `svc-pool-artifacts-${dockerNamePart(session, 40)}`);
}

/**
 * Remove what svc left behind (a crashed session): containers, networks and (unless `volumes: false`) volumes
 * carrying all of `labels` and svc.managed=true. Returns how many of each went. Given a session, the artifacts
 * its driver staged in the temporary directory go too, once no container of it is left to read them; one that
 * cannot be removed is said through `log` and left (copies of artifacts the service keeps: nothing is lost).
 */
export async function cleanupStale(labels: Record<string, string>, options: { docker?: Docker; volumes?: boolean; log?: (message: string) => void } = {}): Promise<StaleCleanup> {
  const docker = options.docker ?? (await connectDocker());
  const filters = labelFilter({ [LABELS.managed]: "true", ...labels });
  const result: StaleCleanup = { containers: 0, networks: 0, volumes: 0 };
  for (const c of await docker.listContainers({ all: true, filters })) {
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .then(() => result.containers++)
      .catch((err: unknown) => {
        if (dockerStatus(err) !== 404) throw err;
      });
  }
  const session = labels[LABELS.session];
  if (session !== undefined) {
    await Promise.all(
      [stagedArtifactsDir(session), poolArtifactsDir(session)].map((dir) =>
        removeArtifactsDir(dir).catch((err: unknown) => options.log?.(`left ${dir} (artifacts staged by session ${session}): ${errorMessage(err)}`)),
      ),
    );
  }
  for (const n of await docker.listNetworks({ filters })) {
    await docker
      .getNetwork(n.Id)
      .remove()
      .then(() => result.networks++)
      .catch((err: unknown) => {
        if (dockerStatus(err) !== 404) throw err;
      });
  }
  if (options.volumes !== false) {
    const { Volumes } = await docker.listVolumes({ filters });
    for (const v of Volumes ?? []) {
      await docker
        .getVolume(v.Name)
        .remove()
        .then(() => result.volumes++)
        .catch((err: unknown) => {
          if (dockerStatus(err) !== 404) throw err;
        });
    }
  }
  return result;
}

interface NetworkState {
  name: string;
  id: string;
  gateway: string;
  subnet: string;
  created: boolean;
}

function memo<T>(cache: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  let pending = cache.get(key);
  if (!pending) {
    pending = make();
    cache.set(key, pending);
    pending.catch(() => cache.delete(key));
  }
  return pending;
}

function randomSession(): string {
  return `s${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

export function createDockerDriver(options: DockerDriverOptions = {}): DockerDriver {
  const session = options.session ?? randomSession();
  const networkScope = options.networkScope ?? "app-env";
  const volumeLifetime = options.volumeLifetime ?? "persistent";
  const log = options.log ?? (() => undefined);
  const warned = new Set<string>();
  const warn = (message: string) => {
    if (warned.has(message)) return;
    warned.add(message);
    (options.warn ?? ((m: string) => log(`warning: ${m}`)))(message);
  };
  const engines = new Map<string, Promise<Docker>>();
  const images = new Map<string, Promise<string>>();
  const networks = new Map<string, Promise<NetworkState>>();
  const forwarders = new Map<string, Promise<Forwarder>>();
  const volumes = new Map<string, Promise<string>>();
  const workers = new Map<string, DockerWorkerHandle>();
  const starting = new Set<Promise<unknown>>();
  let gpu: Promise<GpuSupport> | undefined;
  let closed = false;

  const limits: ContainerLimits = { ...DEFAULT_CONTAINER_LIMITS, ...options.limits };
  const runtime = options.runtime;

  // A runtime the engine does not have fails every start the same way: said once, before any container.
  const engine = () =>
    memo(engines, "engine", async () => {
      const docker = await connectDocker({ docker: options.docker });
      if (runtime) {
        const info = (await docker.info()) as { Runtimes?: Record<string, unknown> };
        if (!info.Runtimes || !(runtime in info.Runtimes)) {
          const known = Object.keys(info.Runtimes ?? {}).join(", ") || "none";
          throw new UserError(`The Docker engine has no runtime "${runtime}" to run workers under (it has: ${known})`, { hint: runtimeProblem("unknown runtime specified")!.hint });
        }
      }
      return docker;
    });

  // Containers must not outlive the service when it exits without close() (an uncaught error): an exit
  // handler cannot wait for the engine API, so use the docker CLI synchronously when there is one.
  // (A SIGKILLed service leaves them; cleanupStale by session label removes them later.)
  const removeAllSync = () => {
    const ids = [...workers.values()].map((w) => w.containerId);
    for (const entry of pool?.waiting() ?? []) if (entry.container) ids.push(entry.container.id);
    // Best effort at exit: no CLI, or an engine that does not answer, leaves them to cleanupStale.
    if (ids.length > 0) execaSync("docker", ["rm", "-f", ...ids], { stdio: "ignore", timeout: 10_000, reject: false });
    // Its staged artifacts go too when no later process can adopt them: a random session is never used again.
    if (ownBindArtifacts && !options.artifactCacheDir && options.session === undefined) {
      try {
        chmodSync(ownBindArtifacts.dir, 0o700);
        rmSync(ownBindArtifacts.dir, { recursive: true, force: true });
      } catch {
        // At exit nothing can be reported to anyone; a dir left behind holds only copies of artifacts.
      }
    }
  };
  process.on("exit", removeAllSync);

  const imageFor = (kind: WorkerImageKind) =>
    memo(images, kind, async () => {
      const docker = await engine();
      const explicit = options.images?.[kind];
      if (!explicit && options.registry) return registryWorkerImage(docker, options.registry, kind);
      if (!explicit) return (await ensureWorkerImage(docker, kind)).name;
      try {
        await docker.getImage(explicit).inspect();
      } catch (err) {
        throw new UserError(`The worker image ${explicit} does not exist in this engine (${dockerMessage(err)})`, { hint: "Build it with `svc images build`.", cause: err });
      }
      return explicit;
    });

  const networkFor = (name: string, launch: Pick<WorkerLaunch, "app" | "env"> | undefined) =>
    memo(networks, name, async () => {
      const docker = await engine();
      let created = false;
      let info: Docker.NetworkInspectInfo;
      try {
        info = (await docker.getNetwork(name).inspect()) as Docker.NetworkInspectInfo;
      } catch (err) {
        if (dockerStatus(err) !== 404) throw err;
        const labels: Record<string, string> = { ...options.labels, [LABELS.managed]: "true", [LABELS.session]: session };
        if (networkScope === "app-env" && launch) Object.assign(labels, { [LABELS.app]: launch.app, [LABELS.env]: launch.env });
        try {
          await docker.createNetwork({ Name: name, Driver: "bridge", CheckDuplicate: true, Labels: labels });
          created = true;
        } catch (createErr) {
          // Another driver created it meanwhile: use theirs.
          if (dockerStatus(createErr) !== 409) throw createErr;
        }
        info = (await docker.getNetwork(name).inspect()) as Docker.NetworkInspectInfo;
      }
      const ipam = info.IPAM?.Config?.find((c) => c.Gateway && c.Subnet && !c.Subnet.includes(":"));
      if (!ipam?.Gateway || !ipam.Subnet) throw new UserError(`Docker network ${name} has no IPv4 gateway; svc cannot connect its workers to the service`);
      return { name, id: info.Id, gateway: ipam.Gateway, subnet: ipam.Subnet, created };
    });

  const forwarderFor = (network: NetworkState, apiUrl: string) => {
    const target = new URL(apiUrl);
    const port = Number(target.port || (target.protocol === "https:" ? 443 : 80));
    const targetHost = target.hostname.replace(/^\[|\]$/g, "");
    return memo(forwarders, `${network.name}|${targetHost}|${port}`, () =>
      startForwarder({ listenHost: network.gateway, subnet: network.subnet, targetHost: targetHost === "localhost" ? "127.0.0.1" : targetHost, targetPort: port }),
    );
  };

  const volumeNamed = (volume: { name: string; key: string }, launch: WorkerLaunch) =>
    memo(volumes, volume.name, async () => {
      const docker = await engine();
      const labels: Record<string, string> = { ...options.labels, [LABELS.managed]: "true", [LABELS.volume]: volume.key, [LABELS.app]: launch.app, [LABELS.env]: launch.env };
      if (volumeLifetime === "session") labels[LABELS.session] = session;
      // Creating an existing volume returns it unchanged: its data stays.
      await docker.createVolume({ Name: volume.name, Labels: labels });
      return volume.name;
    });

  async function startWorker(launch: WorkerLaunch): Promise<DockerWorkerHandle> {
    const docker = await engine();
    let decision: { requestGpus: boolean; warning?: string } = { requestGpus: false };
    if (launch.computeType === "GPU") {
      gpu ??= options.gpuSupport ? Promise.resolve(options.gpuSupport) : detectGpuSupport(docker);
      decision = gpuDecision("GPU", await gpu, options.allowCpuFallback ?? false, launch.endpointName);
      if (decision.warning) {
        warn(decision.warning);
        launch.onLog({ ts: Date.now(), stream: "stderr", text: workerWarningLine(decision.warning) });
      }
    }
    const image = launch.image ?? (await imageFor(imageKindOf(launch.computeType)));
    const networkName = networkNameFor(networkScope, launch, session);
    let network = await networkFor(networkName, launch);
    let apiUrl = launch.apiUrl;
    let serviceHostIp: string | undefined;
    if (isLoopbackUrl(launch.apiUrl)) {
      const forwarder = await forwarderFor(network, launch.apiUrl);
      const url = new URL(launch.apiUrl);
      url.hostname = SERVICE_HOST_ALIAS;
      url.port = String(forwarder.port);
      apiUrl = url.toString().replace(/\/+$/, "");
      serviceHostIp = network.gateway;
    }
    if (pool) {
      const refusal = poolRefusal(launch, { publishes: (options.publish?.length ?? 0) > 0, requestGpus: decision.requestGpus });
      const taken = refusal === undefined ? await pool.take(imageKindOf(launch.computeType)) : undefined;
      if (taken) {
        try {
          return await claim(docker, taken, launch, network, apiUrl);
        } catch (err) {
          // It never became this worker (the claim did not reach it): gone, and a fresh container instead.
          log(`could not claim pre-booted container ${taken.name} for worker ${launch.workerId}: ${errorMessage(err)}; starting a fresh container`);
          await taken.container.remove({ force: true }).catch(() => undefined /* best effort: close() removes what this session left */);
        } finally {
          // Only now: a container booting meanwhile slows the engine's network calls of the claim (measured: a
          // network connect took ~190 ms beside one, ~30 ms alone).
          pool.refill();
        }
      }
    }
    const volume = volumeFor(launch, volumeLifetime, session);
    if (volume) await volumeNamed(volume, launch);
    if (launch.volumePath) prepareVolumeDir(launch.volumePath);
    const plan: ContainerPlan = {
      name: `svc-${dockerNamePart(launch.endpointName, 30)}-${dockerNamePart(launch.workerId, 40)}`,
      image,
      network: network.name,
      serviceHostIp,
      apiUrl,
      labels: containerLabels(launch, session, options.labels),
      volume: volume?.name,
      volumeHostPath: launch.volumePath,
      requestGpus: decision.requestGpus,
      publish: publishedPorts(launch, options.publish),
      httpPort: launch.loadBalanced ? LB_CONTAINER_PORT : undefined,
      limits,
      runtime,
    };
    // The service keeps artifacts readable by itself alone; the container's user reads a staged copy.
    if (!launch.image) launch = { ...launch, artifactPath: await bindArtifacts().hostPath(launch.artifactPath) };
    let container: Docker.Container;
    try {
      container = await docker.createContainer(containerCreateOptions(launch, plan));
    } catch (err) {
      // The shared network was removed by another driver's close() between our inspect and create: once more.
      if (dockerStatus(err) !== 404 || !/network/i.test(dockerMessage(err))) throw err;
      networks.delete(networkName);
      network = await networkFor(networkName, launch);
      container = await docker.createContainer(containerCreateOptions(launch, { ...plan, network: network.name }));
    }

    // Attach before start so no early line (a failing import) is lost; the stream is multiplexed (no TTY).
    const attached = (await container.attach({ stream: true, stdout: true, stderr: true })) as NodeJS.ReadableStream;
    const streamsDone = pipeLogs(docker, attached, launch.onLog);
    try {
      await container.start();
    } catch (err) {
      await container.remove({ force: true }).catch(() => undefined /* the start's error is the one to report; close() removes what is left */);
      throw err;
    }
    const inspected = await container.inspect();
    // On a local engine the container's IP on its network is reachable from the host, without the engine's port
    // forwarding (a userland proxy process by default): the service checks that before using it (lb.md).
    const containerIp = inspected.NetworkSettings.Networks?.[plan.network]?.IPAddress;
    const ports: Record<number, number> = {};
    for (const [key, bindings] of Object.entries(inspected.NetworkSettings.Ports ?? {})) {
      const hostPort = bindings?.[0]?.HostPort;
      if (hostPort) ports[Number.parseInt(key, 10)] = Number(hostPort);
    }
    return watchWorker(container, launch, { name: plan.name, ports, containerIp, streamsDone, status: container.wait() as Promise<{ StatusCode: number }> });
  }

  /** The handle of a started worker container: its exit watched, the container removed once it has exited. */
  function watchWorker(
    container: Docker.Container,
    launch: WorkerLaunch,
    started: { name: string; ports: Record<number, number>; containerIp?: string; streamsDone: Promise<void>; status: Promise<{ StatusCode: number }> },
  ): DockerWorkerHandle {
    const { ports, containerIp, streamsDone } = started;
    const exited: Promise<WorkerExit> = (async () => {
      let exit: WorkerExit;
      try {
        const result = await started.status;
        exit = exitFromStatus(result.StatusCode);
      } catch (err) {
        // The container vanished under us (removed by hand, engine restarted).
        launch.onLog({ ts: Date.now(), stream: "stderr", text: `[svc] lost the worker container: ${dockerMessage(err)}` });
        exit = { code: null, signal: null };
      }
      // Let the last lines (a crash's stack) reach onLog before the exit is reported.
      await Promise.race([streamsDone, new Promise((r) => setTimeout(r, 1000).unref())]);
      await container.remove({ force: true }).catch(() => undefined /* already gone, or left for close() to remove */);
      workers.delete(launch.workerId);
      return exit;
    })();

    const handle: DockerWorkerHandle = {
      workerId: launch.workerId,
      containerId: container.id,
      containerName: started.name,
      ports,
      address: launch.loadBalanced && ports[LB_CONTAINER_PORT] ? `http://127.0.0.1:${ports[LB_CONTAINER_PORT]}` : undefined,
      directAddress: launch.loadBalanced && containerIp ? `http://${containerIp.includes(":") ? `[${containerIp}]` : containerIp}:${LB_CONTAINER_PORT}` : undefined,
      exited,
      stop(graceMs) {
        // docker stop: SIGTERM (forwarded by docker-init to the runtime, which drains), SIGKILL after t seconds.
        void container.stop({ t: Math.max(1, Math.ceil(graceMs / 1000)) }).catch((err: unknown) => {
          // Already stopped (304) or gone (404): its exit is all there is to wait for.
          if (dockerStatus(err) !== 304 && dockerStatus(err) !== 404) log(`could not stop container ${started.name} of worker ${launch.workerId}: ${dockerMessage(err)}`);
        });
        return exited;
      },
      kill() {
        void container.kill().catch((err: unknown) => {
          // Not running (409) or gone (404): nothing left to kill.
          if (dockerStatus(err) !== 409 && dockerStatus(err) !== 404) log(`could not kill container ${started.name} of worker ${launch.workerId}: ${dockerMessage(err)}`);
        });
      },
    };
    workers.set(launch.workerId, handle);
    return handle;
  }

  // ---- pre-booted containers (docs/cold-start.md)

  /**
   * Make a pre-booted container this launch's worker: on the endpoint's network (when the pool's is another),
   * its artifact staged in the node's cache, its whole environment written to the runtime's stdin. Renamed after
   * its worker, so a later run of the service knows whose it was.
   */
  async function claim(docker: Docker, taken: PooledContainer, launch: WorkerLaunch, network: NetworkState, apiUrl: string): Promise<DockerWorkerHandle> {
    const container = taken.container;
    const moving = taken.network !== network.name;
    // The pool's network has its own gateway: the svc-api alias (fixed at create) names that one, so a container
    // that moves reaches the service at its new network's gateway by address.
    const claimUrl = moving && new URL(apiUrl).hostname === SERVICE_HOST_ALIAS ? apiUrl.replace(`//${SERVICE_HOST_ALIAS}`, `//${network.gateway}`) : apiUrl;
    // The endpoint's memory and CPU, set before its code can run: a pool container is booted before any endpoint.
    const resources = dockerResources(launch.placement, limits);
    const [artifact] = await Promise.all([
      pool!.artifacts.stage(launch.artifactPath),
      moving ? docker.getNetwork(network.id).connect({ Container: container.id, EndpointConfig: { Aliases: [dockerNamePart(launch.endpointName)] } }) : undefined,
      resources.Memory || resources.NanoCpus ? container.update(resources) : undefined,
    ]);
    taken.sink.onLog = launch.onLog;
    taken.stream.write(`${JSON.stringify({ env: claimEnvironment(launch, claimUrl, artifact) })}\n`);
    const name = claimedName(launch.endpointId, launch.workerId);
    await Promise.all([
      moving ? docker.getNetwork(taken.network).disconnect({ Container: container.id, Force: true }) : undefined,
      name ? container.rename({ name }) : undefined,
    ]).catch((err: unknown) => log(`worker ${launch.workerId}: ${dockerMessage(err)} (after its claim of pre-booted container ${taken.name})`));
    return watchWorker(container, launch, { name: name ?? taken.name, ports: {}, streamsDone: taken.streamsDone, status: taken.status });
  }

  /** The network pool containers wait on: the session's when the driver has one network, else a pool network. */
  const poolNetworkName = networkScope === "session" ? networkNameFor("session", { app: "", env: "" }, session) : `svc-pool-${dockerNamePart(session, 40)}`;

  const pool = createPool();
  let ownBindArtifacts: ArtifactCache | undefined;
  /** Where bind-mounted artifacts are staged: the pool's cache when there is one, else a cache of the same kind. */
  const bindArtifacts = () =>
    pool?.artifacts ?? (ownBindArtifacts ??= new ArtifactCache(options.artifactCacheDir ?? stagedArtifactsDir(session), randomBytes(32)));

  function createPool() {
    const wanted = options.pool;
    if (wanted === undefined || wanted === 0 || (typeof wanted === "object" && !wanted.cpu && !wanted.gpu)) return undefined;
    // A claim sets the endpoint's memory and CPU on the running container (docker update), which only runc does.
    if (runtime && runtime !== "runc") {
      log(`no pre-booted worker containers under runtime ${runtime}: it cannot change a running container's limits, which a claim sets`);
      return undefined;
    }
    const artifactCacheDir = options.artifactCacheDir ?? poolArtifactsDir(session);
    const artifacts = new ArtifactCache(artifactCacheDir, randomBytes(32));
    const ready: Record<WorkerImageKind, PooledContainer[]> = { cpu: [], gpu: [] };
    /** Names of the pool's containers, from before they exist: adopt() leaves them alone. */
    const names = new Set<string>();
    let sizes: Record<WorkerImageKind, number> = { cpu: 0, gpu: 0 };
    let failures = 0;

    const boot = (kind: WorkerImageKind): PooledContainer => {
      const name = `svc-pool-${dockerNamePart(session, 24)}-${kind}-${randomBytes(4).toString("hex")}`;
      names.add(name);
      const early: string[] = [];
      let readyLine: (ok: boolean) => void = () => undefined;
      const entry = { name, kind, network: poolNetworkName, sink: {} } as PooledContainer;
      entry.sink.onLog = (line) => {
        if (line.text === POOL_READY_LINE) return readyLine(true);
        // What it said before any claim: shown if it dies before use.
        if (early.length < 20) early.push(line.text);
      };
      entry.ready = (async () => {
        const docker = await engine();
        const [image, network] = await Promise.all([imageFor(kind), networkFor(poolNetworkName, undefined), artifacts.ensureDir()]);
        const container = await docker.createContainer(
          poolContainerOptions({ name, image, network: network.name, kind, labels: poolLabels(session, kind, options.labels), artifactCache: artifacts.dir, requestGpus: kind === "gpu", serviceHostIp: network.gateway, limits }),
        );
        entry.container = container;
        const ok = new Promise<boolean>((resolve) => (readyLine = resolve));
        entry.stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as NodeJS.ReadWriteStream;
        entry.streamsDone = pipeLogs(docker, entry.stream, (line) => entry.sink.onLog?.(line));
        await container.start();
        entry.status = container.wait() as Promise<{ StatusCode: number }>;
        void entry.status.then(
          () => exitedUnclaimed(entry, early),
          () => exitedUnclaimed(entry, early),
        );
        void entry.status.then(
          () => readyLine(false),
          () => readyLine(false),
        );
        return ok;
      })().catch((err: unknown) => {
        log(`could not start a pre-booted worker container: ${errorMessage(err)}`);
        if (entry.container) void entry.container.remove({ force: true }).catch(() => undefined /* best effort: close() removes what this session left */);
        exitedUnclaimed(entry, early);
        return false;
      });
      void entry.ready.then((ok) => {
        entry.isReady = ok;
        if (ok) failures = 0;
      });
      return entry;
    };

    /** A pool container ended before any claim: replaced, unless that keeps happening. */
    const exitedUnclaimed = (entry: PooledContainer, early: string[]) => {
      names.delete(entry.name);
      const list = ready[entry.kind];
      const i = list.indexOf(entry);
      if (i < 0) return;
      list.splice(i, 1);
      if (closed) return;
      if (++failures === 3) log(`pre-booted worker containers keep exiting before use; the pool stops refilling. Last output:\n${early.join("\n")}`);
      refill();
    };

    const refill = () => {
      for (const kind of ["cpu", "gpu"] as const) {
        while (!closed && failures < 3 && ready[kind].length < sizes[kind]) ready[kind].push(boot(kind));
      }
    };

    // Pool containers that ended but stayed (the engine removes them when they exit; not when it failed to, or
    // when a run was killed between creating one and starting it): any session's that ended, this session's that
    // never started (another live service's may be just about to start).
    const reap = async () => {
      const docker = await engine();
      const stopped = await docker.listContainers({ all: true, filters: { label: [`${LABELS.managed}=true`, `${LABELS.pool}=true`], status: ["created", "exited", "dead"] } });
      for (const info of stopped.filter((c) => c.State !== "created" || c.Labels[LABELS.session] === session)) {
        await docker
          .getContainer(info.Id)
          .remove({ force: true })
          .catch((err: unknown) => {
            if (dockerStatus(err) !== 404) throw err;
          });
      }
    };

    const started = (async () => {
      const wantsGpu = typeof wanted === "number" ? wanted > 0 : (wanted.gpu ?? 0) > 0;
      let gpuAvailable = false;
      if (wantsGpu) {
        gpu ??= options.gpuSupport ? Promise.resolve(options.gpuSupport) : detectGpuSupport(await engine());
        gpuAvailable = (await gpu).available;
      }
      await reap();
      sizes = poolSizes(wanted, gpuAvailable);
      refill();
    })().catch((err: unknown) => log(`the pool of pre-booted worker containers is off: ${errorMessage(err)}`));

    return {
      artifacts,
      names,
      started,
      /** A ready pool container of `kind`, out of the pool, or undefined. The caller refills (`refill()`) after its claim. */
      async take(kind: WorkerImageKind): Promise<PooledContainer | undefined> {
        while (ready[kind].length > 0) {
          const taken = ready[kind].shift()!;
          // The caller refills once its claim is done; one that failed to boot is replaced now.
          if (await taken.ready) {
            names.delete(taken.name);
            return taken;
          }
          refill();
        }
        return undefined;
      },
      refill,
      waiting(): PooledContainer[] {
        return [...ready.cpu, ...ready.gpu];
      },
      async close(): Promise<void> {
        await started;
        const all = [...ready.cpu.splice(0), ...ready.gpu.splice(0)];
        await Promise.all(
          all.map(async (entry) => {
            await entry.ready;
            await entry.container?.remove({ force: true }).catch((err: unknown) => {
              if (dockerStatus(err) !== 404) log(`could not remove pre-booted container ${entry.name}: ${dockerMessage(err)}`);
            });
          }),
        );
        if (!options.artifactCacheDir) await removeArtifactsDir(artifacts.dir);
      },
    };
  }

  return {
    name: "docker",
    session,
    pooledContainers() {
      return pool?.waiting().filter((entry) => entry.isReady).map((entry) => entry.name) ?? [];
    },
    async isolation() {
      const info = (await (await engine()).info()) as { DefaultRuntime?: string };
      return `runtime ${describeRuntime(runtime, info.DefaultRuntime)}; uid ${WORKER_UID}, no capabilities, no-new-privileges, read-only root, /tmp ${limits.tmpMb} MiB, at most ${limits.pidsLimit} processes, the instance's memory and CPU`;
    },
    async hasImage(name) {
      try {
        await (await engine()).getImage(name).inspect();
        return true;
      } catch (err) {
        if (dockerStatus(err) === 404) return false;
        throw err;
      }
    },
    async prepare(kinds = ["cpu"]) {
      await engine();
      for (const kind of kinds) await imageFor(kind);
    },
    async start(launch) {
      if (closed) throw new UserError("The Docker driver is closed");
      const pending = startWorker(launch);
      starting.add(pending);
      try {
        return await pending;
      } catch (err) {
        throw startError(err, { image: launch.image ?? options.images?.[imageKindOf(launch.computeType)] ?? imageKindOf(launch.computeType), endpointName: launch.endpointName });
      } finally {
        starting.delete(pending);
      }
    },
    /**
     * Containers an earlier, killed run of this service left: their host-side forwarder died with it, so they
     * cannot reach the service again. They are removed, and returned as workers that have ended: the service
     * requeues their jobs at once instead of waiting for the leases to lapse.
     */
    async adopt() {
      if (!options.stableSession) return [];
      const docker = await engine();
      const leftovers = await docker.listContainers({ all: true, filters: labelFilter({ [LABELS.managed]: "true", [LABELS.session]: session }) });
      const gone: AdoptedWorker[] = [];
      for (const info of leftovers) {
        let workerId = info.Labels[LABELS.worker];
        let endpointId = info.Labels[LABELS.endpoint];
        if (info.Labels[LABELS.pool] === "true") {
          const name = (info.Names[0] ?? "").replace(/^\//, "");
          // This run's own pool, or a container it claimed.
          if (pool?.names.has(name) || [...workers.values()].some((w) => w.containerId === info.Id)) continue;
          // A pre-booted container the killed run claimed: its name says for which worker (labels are fixed at
          // create). One it never claimed is just removed.
          const claimed = parseClaimedName(name);
          if (!claimed) {
            await docker.getContainer(info.Id).remove({ force: true }).catch((err: unknown) => {
              if (dockerStatus(err) !== 404) throw err;
            });
            log(`removed pre-booted container ${name} left by an earlier run of the service`);
            continue;
          }
          ({ workerId, endpointId } = claimed);
        }
        if (!workerId || !endpointId || workers.has(workerId)) continue;
        await docker
          .getContainer(info.Id)
          .remove({ force: true })
          .catch((err: unknown) => {
            if (dockerStatus(err) !== 404) throw err;
          });
        log(`removed worker container ${info.Names[0] ?? info.Id} left by an earlier run of the service`);
        const exited = Promise.resolve<WorkerExit>({ code: null, signal: "SIGKILL" });
        gone.push({ endpointId, handle: { workerId, exited, stop: () => exited, kill: () => undefined }, ended: true });
      }
      return gone;
    },
    async close() {
      closed = true;
      process.off("exit", removeAllSync);
      await Promise.allSettled([...starting]);
      await pool?.close();
      const grace = options.closeGraceMs ?? 3000;
      await Promise.all([...workers.values()].map((handle) => handle.stop(grace)));
      await Promise.all([...forwarders.values()].map((f) => f.then((fw) => fw.close()).catch(() => undefined /* a forwarder that never started has nothing to close */)));
      forwarders.clear();
      if (ownBindArtifacts && !options.artifactCacheDir) await removeArtifactsDir(ownBindArtifacts.dir);
      if (engines.size === 0) return;
      const docker = await engine().catch(() => undefined /* no engine to reach: nothing of it to clean up */);
      if (!docker) return;
      // Networks this driver used go when nothing else is attached (the engine refuses otherwise: another
      // driver still uses the shared app/env network, and removes it when it closes).
      for (const pending of networks.values()) {
        const network = await pending.catch(() => undefined /* never made: nothing to remove */);
        if (!network) continue;
        await docker
          .getNetwork(network.id)
          .remove()
          .catch((err: unknown) => {
            if (dockerStatus(err) !== 404 && network.created) log(`left Docker network ${network.name} in place: ${dockerMessage(err)}`);
          });
      }
      networks.clear();
      // Anything of this session a failed start left behind; session volumes too.
      await cleanupStale({ [LABELS.session]: session }, { docker, volumes: volumeLifetime === "session", log }).catch((err: unknown) =>
        log(`cleanup of session ${session} failed: ${errorMessage(err)}`),
      );
    },
  };
}

/** A pre-booted worker container: waiting for a claim on its stdin (the attachment the driver holds). */
interface PooledContainer {
  name: string;
  kind: WorkerImageKind;
  /** The network it was started on. */
  network: string;
  container: Docker.Container;
  /** The attachment: stdin for the claim, stdout and stderr multiplexed. */
  stream: NodeJS.ReadWriteStream;
  streamsDone: Promise<void>;
  /** The engine's wait: its exit status. */
  status: Promise<{ StatusCode: number }>;
  /** True once its runtime is loaded and waits; false when it failed or ended first. */
  ready: Promise<boolean>;
  isReady?: boolean;
  /** Where its output goes: the pool's note-taker before a claim, the worker's log after. */
  sink: { onLog?: (line: WorkerLogLine) => void };
}

/** Demultiplex a container's attach stream into line-by-line onLog calls; resolves when both streams end. */
function pipeLogs(docker: Docker, attached: NodeJS.ReadableStream, onLog: (line: WorkerLogLine) => void): Promise<void> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  docker.modem.demuxStream(attached, stdout, stderr);
  const ended = new Promise<void>((resolve) => {
    const end = () => {
      stdout.end();
      stderr.end();
      resolve();
    };
    attached.on("end", end);
    attached.on("close", end);
    attached.on("error", end);
  });
  const lines = (["stdout", "stderr"] as const).map(
    (name) =>
      new Promise<void>((resolve) => {
        const reader = createInterface({ input: name === "stdout" ? stdout : stderr, crlfDelay: Infinity });
        reader.on("line", (text) => {
          try {
            onLog({ ts: Date.now(), ...readMarkedLine(name, text) });
          } catch {
            // a failing log sink must not take the log stream down
          }
        });
        reader.on("close", () => resolve());
      }),
  );
  return ended.then(() => Promise.all(lines)).then(() => undefined);
}
