// What a worker container is, as pure functions of its launch: its name parts, network and volume, environment,
// labels, the engine's create-container body, GPU device requests and published ports; and how the engine's
// answers read (an exit status, a start's failure). Apart from the driver (docker.ts), which makes the engine
// calls, so that another driver or a provider's worker can build the same container without the driver's state.

import { constants as osConstants } from "node:os";
import type Docker from "dockerode";
import { errorMessage, UserError } from "../errors.js";
import { dockerMessage, dockerNamePart, dockerStatus, LABELS, START_ENGINE_HINT } from "./docker-engine.js";
import { applyProtocolEnv, modelCacheEnv } from "./env.js";
import { PROVIDER_VOLUME_MOUNT } from "./provider-env.js";
import { ARTIFACT_MOUNT, MODELS_MOUNT, VOLUME_MOUNT } from "./image-names.js";
import { DEFAULT_CONTAINER_LIMITS, dockerConfinement, WORKER_GID, WORKER_HOME, WORKER_UID, writableRootGb, type ContainerLimits } from "./isolation.js";
import type { WorkerExit, WorkerLaunch } from "./types.js";

/** The host name workers use for the service (an ExtraHosts entry pointing at the network's gateway). */
export const SERVICE_HOST_ALIAS = "svc-api";

/**
 * The port a load-balanced worker's HTTP server listens on inside its container (on 0.0.0.0); the driver
 * publishes it on the host's 127.0.0.1 at a free port, which the service's proxy uses.
 */
export const LB_CONTAINER_PORT = 8080;

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
export function gpuDecision(
  computeType: "GPU" | "CPU",
  support: GpuSupport,
  allowCpuFallback: boolean,
  endpointName: string,
): { requestGpus: boolean; warning?: string } {
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
export function volumeFor(
  launch: Pick<WorkerLaunch, "volumeName" | "volumePath">,
  lifetime: "persistent" | "session",
  session: string,
): { name: string; key: string } | undefined {
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
  /** Whether the engine's storage driver can bound a container's writable layer (Docker's `size` storage option). */
  boundsLayer?: boolean;
}

/** Worker environment (docs/worker-protocol.md): the endpoint's variables, then protocol ones that win. Pure. */
export function containerEnv(launch: WorkerLaunch, apiUrl: string, hasVolume: boolean, httpPort?: number): string[] {
  // An image (a provider worker) keeps its own user's home.
  const env: Record<string, string> = { ...(launch.image ? {} : { HOME: WORKER_HOME }), ...launch.environment };
  // A server on the container's loopback is unreachable from the host: LB workers listen on every interface.
  const http = httpPort === undefined ? undefined : { host: "0.0.0.0", port: httpPort };
  applyProtocolEnv(env, launch, {
    apiUrl,
    artifact: ARTIFACT_MOUNT,
    volumePath: hasVolume ? VOLUME_MOUNT : undefined,
    modelCache: launch.modelCache ? MODELS_MOUNT : undefined,
    http,
  });
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
  if (launch.modelCache) Object.assign(env, modelCacheEnv(MODELS_MOUNT));
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
    // and CPU, a process limit (isolation.ts). A prebuilt image keeps its own user, and a writable layer where its
    // template allows one (bounded where the engine can).
    ...dockerConfinement(launch.placement, {
      limits: plan.limits ?? DEFAULT_CONTAINER_LIMITS,
      runtime: plan.runtime,
      readOnlyRoot: writableRootGb(launch) === 0,
      layerSizeGb: plan.boundsLayer ? writableRootGb(launch) : undefined,
    }),
  };
  if (plan.serviceHostIp) hostConfig.ExtraHosts = [`${SERVICE_HOST_ALIAS}:${plan.serviceHostIp}`];
  if (plan.volumeHostPath) hostConfig.Mounts = [{ Type: "bind", Source: plan.volumeHostPath, Target: VOLUME_MOUNT, ReadOnly: false }];
  else if (plan.volume) hostConfig.Mounts = [{ Type: "volume", Source: plan.volume, Target: VOLUME_MOUNT, ReadOnly: false }];
  // A provider worker finds the volume where the provider mounts it, as well as at svc's own path.
  if (hostConfig.Mounts && launch.protocol === "provider") hostConfig.Mounts.push({ ...hostConfig.Mounts[0]!, Target: PROVIDER_VOLUME_MOUNT });
  // The host's model cache, read-only: the models the endpoint names are in it (docs/models.md).
  if (launch.modelCache) hostConfig.Mounts = [...(hostConfig.Mounts ?? []), { Type: "bind", Source: launch.modelCache, Target: MODELS_MOUNT, ReadOnly: true }];
  if (plan.requestGpus) hostConfig.DeviceRequests = [gpuDeviceRequest(launch.gpus)];
  // Allowed per template, beyond the sandbox's default (docs/provider-workers.md).
  if (launch.shmSizeMb) hostConfig.ShmSize = launch.shmSizeMb * 1024 * 1024;
  return {
    name: plan.name,
    Image: plan.image,
    // svc's images already run as this user; said here too so that another image given as a worker image does.
    ...(launch.image ? {} : { User: `${WORKER_UID}:${WORKER_GID}` }),
    // A provider worker speaks a protocol (the provider's variables, its own token); a load-balanced image none.
    Env:
      launch.image && launch.protocol !== "provider"
        ? prebuiltImageEnv(launch, plan.httpPort ?? LB_CONTAINER_PORT)
        : containerEnv(launch, plan.apiUrl, Boolean(plan.volume || plan.volumeHostPath), plan.httpPort),
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
  if (code === "ECONNREFUSED" || code === "ENOENT")
    return new UserError(`No Docker engine answers (${errorMessage(err)})`, { hint: START_ENGINE_HINT, cause: err });
  if (code === "EACCES")
    return new UserError(`Permission denied on the Docker socket (${errorMessage(err)})`, {
      hint: "Run as root, or add your user to the docker group.",
      cause: err,
    });
  const message = dockerMessage(err);
  if (/port is already allocated|address already in use/i.test(message)) {
    return new UserError(`Cannot start a worker for "${context.endpointName}": a published port is in use (${message})`, {
      hint: "Free the port, or publish on any free port (hostPort 0).",
      cause: err,
    });
  }
  if (dockerStatus(err) === 404 && /no such image/i.test(message)) {
    return new UserError(`The worker image ${context.image} does not exist in this engine`, { hint: "Build it with `svc images build`.", cause: err });
  }
  const runtime = runtimeProblem(message);
  if (runtime)
    return new UserError(`Docker could not start a worker for "${context.endpointName}": ${runtime.what} (${message})`, { hint: runtime.hint, cause: err });
  return new UserError(`Docker could not start a worker for "${context.endpointName}": ${message}`, { cause: err });
}
