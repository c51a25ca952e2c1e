// Workers as Docker containers (dockerode): one container per worker, from the locally built worker image
// (src/drivers/images.ts), with the endpoint's artifact mounted read-only. Containers sit on a Docker network
// per app/environment (or per session) and reach the host's loopback service through a forwarder on the
// network's gateway (src/drivers/docker-forwarder.ts), under the host name `svc-api`. Everything created is
// labelled (svc.managed, svc.app, svc.env, svc.endpoint, svc.session, svc.worker) so a crashed session can be
// cleaned up by label (cleanupStale). With `pool`, containers are also started ahead of need and claimed by cold
// starts (docker-pool.ts, docs/cold-start.md). See docs/docker.md.
//
// This module is the driver's container life: a worker's start, from the image to a started container, and the
// driver's close. Beside it: its networks and forwarders (docker-networks.ts), a worker container's handle
// (docker-worker.ts), the claim of a pre-booted container (docker-claim.ts) and what an earlier run left
// (docker-adopt.ts).
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, rmSync } from "node:fs";
import type Docker from "dockerode";
import { errorMessage, UserError } from "../errors.js";
import { removeLeftovers } from "./docker-adopt.js";
import { claim } from "./docker-claim.js";
import { connectDocker, dockerMessage, dockerNamePart, dockerStatus, LABELS, memo } from "./docker-engine.js";
import { cleanupStale, detectGpuSupport, stagedArtifactsDir } from "./docker-host.js";
import { pipeLogs } from "./docker-logs.js";
import { createDockerNetworks } from "./docker-networks.js";
import { ArtifactCache, removeArtifactsDir, poolRefusal } from "./docker-pool.js";
import { createContainerPool } from "./docker-pool-engine.js";
import {
  containerCreateOptions,
  containerLabels,
  gpuDecision,
  isLoopbackUrl,
  LB_CONTAINER_PORT,
  networkNameFor,
  publishedPorts,
  runtimeProblem,
  SERVICE_HOST_ALIAS,
  startError,
  volumeFor,
  workerWarningLine,
  type ContainerPlan,
  type GpuSupport,
} from "./docker-spec.js";
import { imageKindOf, type WorkerImageKind } from "./image-names.js";
import { ensureWorkerImage } from "./images.js";
import { registryWorkerImage } from "./registry.js";
import { pullImage } from "./registry-auth.js";
import { prepareVolumeDir } from "./volume-dir.js";
import { watchWorker, type DockerWorkerHandle, type StartedContainer } from "./docker-worker.js";
import { DEFAULT_CONTAINER_LIMITS, describeRuntime, WORKER_UID, type ContainerLimits } from "./isolation.js";
import type { WorkerDriver, WorkerLaunch } from "./types.js";

export type { DockerWorkerHandle } from "./docker-worker.js";

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

function randomSession(): string {
  return `s${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

/** The engine's answer to a `size` storage option its storage driver cannot honour. */
const LAYER_UNBOUNDED = /storage-opt|storage option|pquota|quota/i;

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
  const volumes = new Map<string, Promise<string>>();
  const workers = new Map<string, DockerWorkerHandle>();
  const starting = new Set<Promise<unknown>>();
  let gpu: Promise<GpuSupport> | undefined;
  // Whether the engine's storage driver bounds a container's layer (overlay over xfs with pquota, btrfs, zfs):
  // found by the first create that asks for it.
  let boundsLayer = true;
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
          throw new UserError(`The Docker engine has no runtime "${runtime}" to run workers under (it has: ${known})`, {
            hint: runtimeProblem("unknown runtime specified")!.hint,
          });
        }
      }
      return docker;
    });

  const networks = createDockerNetworks({ engine, session, scope: networkScope, labels: options.labels });

  // Containers must not outlive the service when it exits without close() (an uncaught error): an exit
  // handler cannot wait for the engine API, so use the docker CLI synchronously when there is one.
  // (A SIGKILLed service leaves them; cleanupStale by session label removes them later.)
  const removeAllSync = () => {
    const ids = [...workers.values()].map((w) => w.containerId);
    for (const entry of pool?.waiting() ?? []) if (entry.container) ids.push(entry.container.id);
    // Best effort at exit: no CLI, or an engine that does not answer, leaves them to cleanupStale.
    if (ids.length > 0) spawnSync("docker", ["rm", "-f", ...ids], { stdio: "ignore", timeout: 10_000 });
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
        throw new UserError(`The worker image ${explicit} does not exist in this engine (${dockerMessage(err)})`, {
          hint: "Build it with `svc images build`.",
          cause: err,
        });
      }
      return explicit;
    });

  const volumeNamed = (volume: { name: string; key: string }, launch: WorkerLaunch) =>
    memo(volumes, volume.name, async () => {
      const docker = await engine();
      const labels: Record<string, string> = {
        ...options.labels,
        [LABELS.managed]: "true",
        [LABELS.volume]: volume.key,
        [LABELS.app]: launch.app,
        [LABELS.env]: launch.env,
      };
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
    // An image the engine lacks is pulled first, with the template's credentials (a failed pull says why).
    if (launch.image && !(await hasImage(docker, launch.image))) await pullImage(docker, launch.image, launch.registryAuth);
    const networkName = networkNameFor(networkScope, launch, session);
    let network = await networks.networkFor(networkName, launch);
    let apiUrl = launch.apiUrl;
    let serviceHostIp: string | undefined;
    if (isLoopbackUrl(launch.apiUrl)) {
      const forwarder = await networks.forwarderFor(network, launch.apiUrl);
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
          const claimed = await claim(docker, taken, launch, network, apiUrl, { artifacts: pool.artifacts, limits, log });
          return track(taken.container, launch, claimed);
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
      boundsLayer,
    };
    // The service keeps artifacts readable by itself alone; the container's user reads a staged copy.
    if (!launch.image) launch = { ...launch, artifactPath: await bindArtifacts().hostPath(launch.artifactPath) };
    let container: Docker.Container;
    try {
      container = await docker.createContainer(containerCreateOptions(launch, plan)).catch(async (err: unknown) => {
        // This engine cannot bound a writable layer: said once, and the container is made without the bound.
        if (!plan.boundsLayer || !LAYER_UNBOUNDED.test(dockerMessage(err))) throw err;
        boundsLayer = plan.boundsLayer = false;
        log(`this engine cannot bound a container's writable layer (${dockerMessage(err)}): an image's containerDiskInGb is not enforced`);
        return docker.createContainer(containerCreateOptions(launch, plan));
      });
    } catch (err) {
      // The shared network was removed by another driver's close() between our inspect and create: once more.
      if (dockerStatus(err) !== 404 || !/network/i.test(dockerMessage(err))) throw err;
      networks.forget(networkName);
      network = await networks.networkFor(networkName, launch);
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
    return track(container, launch, { name: plan.name, ports, containerIp, streamsDone, status: container.wait() as Promise<{ StatusCode: number }> });
  }

  /** The handle of a started worker container, kept until the container is removed. */
  function track(container: Docker.Container, launch: WorkerLaunch, started: StartedContainer): DockerWorkerHandle {
    const handle = watchWorker(container, launch, started, { log, removed: () => workers.delete(launch.workerId) });
    workers.set(launch.workerId, handle);
    return handle;
  }

  /** The network pool containers wait on: the session's when the driver has one network, else a pool network. */
  const poolNetworkName = networkScope === "session" ? networkNameFor("session", { app: "", env: "" }, session) : `svc-pool-${dockerNamePart(session, 40)}`;

  let ownBindArtifacts: ArtifactCache | undefined;
  /** Where bind-mounted artifacts are staged: the pool's cache when there is one, else a cache of the same kind. */
  const bindArtifacts = () =>
    pool?.artifacts ?? (ownBindArtifacts ??= new ArtifactCache(options.artifactCacheDir ?? stagedArtifactsDir(session), randomBytes(32)));

  const pool = createContainerPool({
    options,
    session,
    runtime,
    limits,
    log,
    engine,
    imageFor,
    networkFor: networks.networkFor,
    poolNetworkName,
    gpuSupport: async () => (gpu ??= options.gpuSupport ? Promise.resolve(options.gpuSupport) : detectGpuSupport(await engine())),
    isClosed: () => closed,
  });
  return {
    name: "docker",
    session,
    pooledContainers() {
      return (
        pool
          ?.waiting()
          .filter((entry) => entry.isReady)
          .map((entry) => entry.name) ?? []
      );
    },
    async isolation() {
      const info = (await (await engine()).info()) as { DefaultRuntime?: string };
      return `runtime ${describeRuntime(runtime, info.DefaultRuntime)}; uid ${WORKER_UID}, no capabilities, no-new-privileges, read-only root, /tmp ${limits.tmpMb} MiB, at most ${limits.pidsLimit} processes, the instance's memory and CPU`;
    },
    pullsImages: true,
    async hasImage(name) {
      return hasImage(await engine(), name);
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
        throw startError(err, {
          image: launch.image ?? options.images?.[imageKindOf(launch.computeType)] ?? imageKindOf(launch.computeType),
          endpointName: launch.endpointName,
        });
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
      return removeLeftovers(
        docker,
        session,
        {
          container: (name, id) => pool?.names.has(name) === true || [...workers.values()].some((w) => w.containerId === id),
          worker: (workerId) => workers.has(workerId),
        },
        log,
      );
    },
    async close() {
      closed = true;
      process.off("exit", removeAllSync);
      await Promise.allSettled([...starting]);
      await pool?.close();
      const grace = options.closeGraceMs ?? 3000;
      await Promise.all([...workers.values()].map((handle) => handle.stop(grace)));
      await networks.closeForwarders();
      if (ownBindArtifacts && !options.artifactCacheDir) await removeArtifactsDir(ownBindArtifacts.dir);
      if (engines.size === 0) return;
      const docker = await engine().catch(() => undefined /* no engine to reach: nothing of it to clean up */);
      if (!docker) return;
      await networks.removeNetworks(docker, log);
      // Anything of this session a failed start left behind; session volumes too.
      await cleanupStale({ [LABELS.session]: session }, { docker, volumes: volumeLifetime === "session", log }).catch((err: unknown) =>
        log(`cleanup of session ${session} failed: ${errorMessage(err)}`),
      );
    },
  };
}

/** Whether the engine holds the image (a 404 says it does not; any other error is thrown). */
async function hasImage(docker: Docker, name: string): Promise<boolean> {
  try {
    await docker.getImage(name).inspect();
    return true;
  } catch (err) {
    if (dockerStatus(err) === 404) return false;
    throw err;
  }
}
