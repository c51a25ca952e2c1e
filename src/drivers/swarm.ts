// Workers as Docker Swarm services (`svc server --workers swarm`): one service per worker, one replica, no
// restart policy (a worker that ends is the service's to replace, with its backoff and its queue in view), the
// svc labels on the service and its container, resource reservations, GPUs as generic resources, the network
// volume mounted. Swarm places the task on a node; the worker fetches its artifact over HTTP and talks to the
// cluster's address, so nothing depends on the node that runs it.
//
// The service spec is computed by a pure function (swarmServiceSpec); the driver does the API calls and watches
// the tasks (one list of the swarm's tasks per tick for every worker it runs). A worker's output is followed from
// its service's log once its task runs (swarm-logs.ts), and its last lines read before its service is removed.

import type Docker from "dockerode";
import { UserError } from "../errors.js";
import { containerLabels } from "./docker-spec.js";
import { connectDocker, dockerMessage, dockerNamePart, dockerStatus, LABELS } from "./docker-engine.js";
import { applyProtocolEnv } from "./env.js";
import { PROVIDER_VOLUME_MOUNT } from "./provider-env.js";
import { DATA_CENTER_LABEL, type Placement } from "./placement.js";
import { imageKindOf, VOLUME_MOUNT } from "./image-names.js";
import { ensureWorkerImage } from "./images.js";
import { dockerAuthConfig, ImagePullError, pullFailureReason, type RegistryCredentials } from "./registry-auth.js";
import { clusterVolumeName, clusterVolumeRefusal, dataCenterRefusal, swarmVolumeMount, type LaunchVolume, type SwarmVolumeConfig } from "./cluster-volumes.js";
import { DEFAULT_CONTAINER_LIMITS, WORKER_GID, WORKER_HOME, WORKER_TMP, WORKER_UID, writableRootGb, type ContainerLimits } from "./isolation.js";
import { registryWorkerImage } from "./registry.js";
import { serviceLogs, type ServiceLogs } from "./swarm-logs.js";
import { wantsNodeModels, NODE_MODELS_MOUNT, type NodeModelCache } from "./node-models.js";
import { createSwarmModelFetcher, swarmModelsMount } from "./swarm-models.js";
import type { AdoptedWorker, WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch, WorkerLogLine } from "./types.js";

/** The generic resource GPUs are advertised under (dockerd `node-generic-resources`, NVIDIA's convention). */
export const DEFAULT_GPU_RESOURCE = "NVIDIA-GPU";
const REVISION_LABEL = "svc.revision";
/** Task states after which a task runs no more. */
const ENDED = new Set(["complete", "failed", "shutdown", "rejected", "orphaned", "remove"]);
/** Task states in which its container runs or ran: its log can be followed. */
const STARTED = new Set(["starting", "running", ...ENDED]);
const WATCH_MS = 500;

export interface SwarmDriverOptions {
  docker?: Docker;
  /** Identifies this service's workers (labels): adoption after a restart finds its own. */
  session: string;
  /** Push/pull worker images through this registry (host:port), referenced by digest: every node can pull them. */
  registry?: string;
  /** An image to run instead of svc's worker image of the launch's kind. */
  image?: string;
  /** Generic resource name GPUs are advertised under. */
  gpuResource?: string;
  /** How long a stopping worker may drain before Swarm kills it. */
  stopGraceMs?: number;
  /** Docker network the tasks join; default "host" (they reach the service and LB workers as local processes do). */
  network?: string;
  /** How long the last read of an ended worker's log may take before its service is removed anyway. */
  logDrainMs?: number;
  /** Processes and /tmp size per worker (memory and CPU come from the endpoint's instance). */
  limits?: Partial<ContainerLimits>;
  /**
   * How network volumes reach the node a task lands on (a volume driver and its options); without it a worker with
   * a volume is refused.
   */
  volumes?: SwarmVolumeConfig;
  /**
   * The nodes' model cache (docs/models.md, "Node caches"): before a worker whose endpoint names models starts, a
   * global job fetches them on every node it may land on; the worker gets the directory read-only. Unset: workers
   * get no model cache.
   */
  models?: NodeModelCache;
  log?(message: string): void;
}

export interface SwarmServicePlan {
  image: string;
  session: string;
  network: string;
  /** Generic resources to reserve: GPUs. */
  gpus?: { kind: string; count: number };
  /** The network volume and the driver every node creates it with. */
  volume?: { volume: LaunchVolume; config: SwarmVolumeConfig };
  stopGraceMs: number;
  /** Processes and /tmp size (default DEFAULT_CONTAINER_LIMITS). */
  limits?: ContainerLimits;
  /** The nodes' model cache: mounted read-only when the launch names models. */
  models?: NodeModelCache;
}

/** Every label of a worker's service (and its container): a container's, and what it runs. Pure. */
export function swarmLabels(launch: WorkerLaunch, session: string): Record<string, string> {
  return { ...containerLabels(launch, session), ...(launch.revision ? { [REVISION_LABEL]: launch.revision } : {}) };
}

/** The worker's Swarm service: what `docker service create` would be given. Pure. */
export function swarmServiceSpec(launch: WorkerLaunch, plan: SwarmServicePlan): Docker.CreateServiceOptions {
  // An image brings its own code: only svc's runtime fetches an artifact.
  if (!launch.artifactUrl && !launch.image)
    throw new UserError(`Endpoint ${launch.endpointName}'s artifact has no URL a Swarm worker could fetch`, {
      hint: "Deploy it again: artifacts are named by their sha256.",
    });
  const limits = plan.limits ?? DEFAULT_CONTAINER_LIMITS;
  // HOME in the writable /tmp (the root filesystem is read-only), unless the endpoint names its own.
  const env: Record<string, string> = { ...(launch.image ? {} : { HOME: WORKER_HOME }), ...launch.environment };
  const models = wantsNodeModels(launch, plan.models) ? plan.models : undefined;
  applyProtocolEnv(env, launch, {
    apiUrl: launch.apiUrl,
    artifact: launch.artifactUrl ?? "",
    volumePath: plan.volume ? VOLUME_MOUNT : undefined,
    modelCache: models ? NODE_MODELS_MOUNT : undefined,
  });
  const labels = swarmLabels(launch, plan.session);
  const volume = plan.volume ? swarmVolumeMount(plan.volume.volume, plan.volume.config, swarmVolumeLabels(plan.volume.volume.id, plan.session)) : undefined;
  const volumes = volume ? [volume, ...(launch.protocol === "provider" ? [{ ...volume, Target: PROVIDER_VOLUME_MOUNT }] : [])] : [];
  // The bigger /dev/shm a template allows: a tmpfs of that size there (a service has no shm size of its own).
  const shm = launch.shmSizeMb ? [{ Type: "tmpfs" as const, Target: "/dev/shm", TmpfsOptions: { SizeBytes: launch.shmSizeMb * 1024 * 1024 } }] : [];
  return {
    Name: `svc-${dockerNamePart(launch.endpointName, 20)}-${dockerNamePart(launch.workerId, 30)}`,
    Labels: labels,
    TaskTemplate: {
      ContainerSpec: {
        Image: plan.image,
        Labels: labels,
        Env: Object.entries(env).map(([key, value]) => `${key}=${value}`),
        StopGracePeriod: plan.stopGraceMs * 1_000_000,
        ...swarmConfinement(launch),
        // A provider worker finds its volume where the provider mounts it too.
        Mounts: [...volumes, swarmTmpMount(limits), ...shm, ...(models ? [swarmModelsMount(models)] : [])],
      },
      // A worker that ends stays ended: the service decides whether and where another one starts.
      RestartPolicy: { Condition: "none", MaxAttempts: 0 },
      Resources: { Limits: swarmLimits(launch.placement, limits), Reservations: swarmReservations(launch.placement, plan.gpus) },
      ...swarmConstraints(launch),
      Networks: [{ Target: plan.network }],
    },
    Mode: { Replicated: { Replicas: 1 } },
  } as Docker.CreateServiceOptions;
}

/** The labels of the Docker volume a node creates for a network volume: svc's, and which volume it is. Pure. */
export function swarmVolumeLabels(volumeId: string, session: string): Record<string, string> {
  return { [LABELS.managed]: "true", [LABELS.session]: session, [LABELS.volume]: volumeId };
}

/** Swarm's nodes as the data-center check sees them: labels, and whether tasks may land there. Pure. */
export function clusterNodesOf(nodes: Array<{ Spec?: { Availability?: string; Labels?: Record<string, string> }; Status?: { State?: string } }>) {
  return nodes.map((n) => ({ labels: n.Spec?.Labels ?? {}, schedulable: n.Spec?.Availability === "active" && n.Status?.State === "ready" }));
}

/**
 * How a worker's container is confined (isolation.ts): no capabilities, no privilege gain through setuid binaries,
 * and for svc's own worker image its non-root user and a read-only root filesystem. A prebuilt image keeps its
 * user, and a writable layer where its template allows one (`writableRootGb`; Swarm cannot bound its size).
 * Engines older than Docker 25 (API 1.44) ignore Privileges.NoNewPrivileges. Pure.
 */
export function swarmConfinement(launch: Pick<WorkerLaunch, "image" | "containerDiskInGb">): {
  User?: string;
  ReadOnly: boolean;
  CapabilityDrop: string[];
  Privileges: { NoNewPrivileges: true };
} {
  return {
    ...(launch.image ? {} : { User: `${WORKER_UID}:${WORKER_GID}` }),
    ReadOnly: writableRootGb(launch) === 0,
    CapabilityDrop: ["ALL"],
    Privileges: { NoNewPrivileges: true },
  };
}

/**
 * The worker's private /tmp: a tmpfs of the driver's size, writable by all (1777), `exec` because the runtime
 * unpacks the artifact there (engines older than Docker 27, API 1.46, ignore Options and mount it noexec: native
 * addons then fail to load). Pure.
 */
export function swarmTmpMount(limits: ContainerLimits) {
  return { Type: "tmpfs" as const, Target: WORKER_TMP, TmpfsOptions: { SizeBytes: limits.tmpMb * 1024 * 1024, Mode: 0o1777, Options: [["exec"]] } };
}

/** API versions as numbers: "1.44" -> [1, 44]. */
function apiVersionBelow(version: string, major: number, minor: number): boolean {
  const [a = 0, b = 0] = version.split(".").map(Number);
  return a < major || (a === major && b < minor);
}

/**
 * What of the worker's confinement a swarm manager of this API version drops, one line each (the service says so
 * at start). Pure.
 */
export function swarmConfinementGaps(apiVersion: string): string[] {
  const gaps: string[] = [];
  if (apiVersionBelow(apiVersion, 1, 44))
    gaps.push(`this engine (API ${apiVersion}) ignores no-new-privileges for Swarm services (Docker 25, API 1.44, applies it)`);
  if (apiVersionBelow(apiVersion, 1, 46))
    gaps.push(
      `this engine (API ${apiVersion}) mounts the workers' /tmp noexec: native addons in an artifact fail to load (Docker 27, API 1.46, mounts it exec)`,
    );
  return gaps;
}

/** What a worker may use at most: its CPU instance's vCPUs and memory, and the driver's process limit. Pure. */
export function swarmLimits(placement: Placement | undefined, limits: ContainerLimits): Record<string, number> {
  return {
    ...(placement?.cpus ? { NanoCPUs: placement.cpus * 1e9 } : {}),
    ...(placement?.memoryMb ? { MemoryBytes: placement.memoryMb * 1024 * 1024 } : {}),
    Pids: limits.pidsLimit,
  };
}

/**
 * What Swarm reserves for a worker on its node: the vCPUs and memory its CPU instance names, its GPUs as generic
 * resources. A node without that much free gets no such task: it waits, as a worker of a full cluster should. Pure.
 */
export function swarmReservations(placement: Placement | undefined, gpus: SwarmServicePlan["gpus"]): Record<string, unknown> {
  return {
    ...(placement?.cpus ? { NanoCPUs: placement.cpus * 1e9 } : {}),
    ...(placement?.memoryMb ? { MemoryBytes: placement.memoryMb * 1024 * 1024 } : {}),
    ...(gpus ? { GenericResources: [{ DiscreteResourceSpec: { Kind: gpus.kind, Value: gpus.count } }] } : {}),
  };
}

/** Node labels a worker's task must land on: its one GPU type, its volume's data center. Pure. */
export function swarmConstraints(launch: Pick<WorkerLaunch, "computeType" | "gpuTypeIds" | "placement">): { Placement?: { Constraints: string[] } } {
  const constraints = [
    ...(launch.computeType === "GPU" && launch.gpuTypeIds.length === 1 ? [`node.labels.svc.gpu-type==${launch.gpuTypeIds[0]}`] : []),
    ...(launch.placement?.dataCenter ? [`node.labels.${DATA_CENTER_LABEL}==${launch.placement.dataCenter}`] : []),
  ];
  return constraints.length > 0 ? { Placement: { Constraints: constraints } } : {};
}

/** What the tick reads of a task. */
type SwarmTask = { ServiceID?: string; CreatedAt?: string; Status?: { State?: string; Err?: string; ContainerStatus?: { ExitCode?: number } } };

/**
 * A task's end as a worker exit: its container's exit code, when Swarm kept one. A task of a worker image that
 * its node refused because the image could not be pulled (the node logs the pull's error and then finds no such
 * image) carries the failed pull, naming the image and the credentials it was pulled with. Pure.
 */
export function exitOfTask(task: SwarmTask, pulled?: { image: string; credentials?: RegistryCredentials }): WorkerExit | undefined {
  const state = task.Status?.State;
  if (!state || !ENDED.has(state)) return undefined;
  const code = task.Status?.ContainerStatus?.ExitCode;
  const exit: WorkerExit = { code: typeof code === "number" ? code : null, signal: null };
  const err = task.Status?.Err ?? "";
  if (pulled && state === "rejected" && PULL_ERROR.test(err)) {
    // The node's own pull error stays in its log; the task says only that the image was then missing.
    const why = /no such image/i.test(err) ? "the node could not pull it (refused credentials, or no such image in the registry)" : pullFailureReason(err);
    exit.pullFailure = new ImagePullError(pulled.image, why, pulled.credentials).message;
  }
  return exit;
}

/** A node's words for an image it could not pull (Docker's, through Swarm's task error). */
const PULL_ERROR = /no such image|pull access denied|unauthorized|authentication required|manifest unknown|not found|denied/i;

/** Whether some node of the swarm advertises `kind` as a generic resource. */
async function advertised(docker: Docker, kind: string): Promise<boolean> {
  const nodes = (await docker.listNodes()) as Array<{
    Description?: { Resources?: { GenericResources?: Array<{ DiscreteResourceSpec?: { Kind?: string; Value?: number } }> } };
  }>;
  return nodes.some((n) =>
    (n.Description?.Resources?.GenericResources ?? []).some((r) => r.DiscreteResourceSpec?.Kind === kind && (r.DiscreteResourceSpec.Value ?? 0) > 0),
  );
}

interface Watched {
  serviceId: string;
  /** A worker image the node pulls: a task refused for want of it is a failed pull. */
  pulled?: { image: string; credentials?: RegistryCredentials };
  /** Its output, when somebody reads it. */
  logs?: ServiceLogs;
  settle(exit: WorkerExit, ended: "task" | "service"): void;
}

export function createSwarmDriver(options: SwarmDriverOptions): WorkerDriver {
  const log = options.log ?? (() => undefined);
  const gpuResource = options.gpuResource ?? DEFAULT_GPU_RESOURCE;
  const stopGraceMs = options.stopGraceMs ?? 10_000;
  const network = options.network ?? "host";
  const logDrainMs = options.logDrainMs ?? 5000;
  const limits: ContainerLimits = { ...DEFAULT_CONTAINER_LIMITS, ...options.limits };
  let engine: Promise<Docker> | undefined;
  const docker = () =>
    (engine ??= connectDocker({ docker: options.docker }).then(async (d) => {
      const info = (await d.info()) as { Swarm?: { LocalNodeState?: string; ControlAvailable?: boolean } };
      if (info.Swarm?.LocalNodeState !== "active" || !info.Swarm.ControlAvailable) {
        throw new UserError("This Docker engine is not a manager of a swarm", {
          hint: "Run `svc server --workers swarm` against a swarm manager (`docker swarm init`), or use --workers docker.",
        });
      }
      const { ApiVersion } = (await d.version()) as { ApiVersion?: string };
      for (const gap of swarmConfinementGaps(ApiVersion ?? "0")) log(`warning: ${gap}`);
      return d;
    }));
  const images = new Map<string, Promise<string>>();
  const modelFetcher = options.models && createSwarmModelFetcher({ docker, session: options.session, cache: options.models, log });
  const watched = new Map<string, Watched>();
  const handles = new Map<string, WorkerHandle>();
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const imageFor = (launch: WorkerLaunch) => {
    const kind = imageKindOf(launch.computeType);
    let image = images.get(kind);
    if (!image) {
      image = (async () => {
        if (options.image) return options.image;
        const d = await docker();
        return options.registry ? registryWorkerImage(d, options.registry, kind) : (await ensureWorkerImage(d, kind)).name;
      })();
      image.catch(() => images.delete(kind));
      images.set(kind, image);
    }
    return image;
  };

  /** One list of the swarm's tasks per tick: each watched worker whose task ended is settled and its service removed. */
  const tick = async () => {
    if (watched.size === 0) return;
    let tasks: SwarmTask[];
    let services: Set<string>;
    try {
      const d = await docker();
      tasks = (await d.listTasks()) as typeof tasks;
      const listed = (await d.listServices({ filters: { label: [`${LABELS.session}=${options.session}`] } })) as Array<{ ID: string }>;
      services = new Set(listed.map((x) => x.ID));
    } catch (err) {
      log(`could not list the swarm's tasks: ${dockerMessage(err)}`);
      return;
    }
    const byService = new Map<string, typeof tasks>();
    for (const t of tasks) if (t.ServiceID) byService.set(t.ServiceID, [...(byService.get(t.ServiceID) ?? []), t]);
    for (const [workerId, w] of watched) {
      const own = (byService.get(w.serviceId) ?? []).sort((a, b) => String(b.CreatedAt).localeCompare(String(a.CreatedAt)));
      const latest = own[0];
      // A service that is gone was removed (by stop(), or by someone else): the worker ended. One without a task
      // yet is still being scheduled.
      const gone = !services.has(w.serviceId);
      const exit = gone ? { code: null, signal: null } : latest ? exitOfTask(latest, w.pulled) : undefined;
      if (!exit) {
        // Its container runs: its output is followed from here (through the manager, whichever node runs it).
        if (latest?.Status?.State && STARTED.has(latest.Status.State)) w.logs?.follow();
        continue;
      }
      watched.delete(workerId);
      w.settle(exit, gone ? "service" : "task");
    }
  };

  type Output = { onLog?: (line: WorkerLogLine) => void; logsSince?: string; pulled?: Watched["pulled"] };
  const watch = (workerId: string, serviceId: string, output: Output): Promise<WorkerExit> =>
    new Promise<WorkerExit>((resolve) => {
      const logs = output.onLog && serviceLogs({ docker, serviceId, onLog: output.onLog, sinceTime: output.logsSince, log });
      watched.set(workerId, {
        serviceId,
        pulled: output.pulled,
        logs,
        settle: (exit, ended) => {
          handles.delete(workerId);
          void (async () => {
            // Its last lines (a crash's stack) first, while its service, and so its log, is still there.
            if (logs && ended === "task") await logs.finish(logDrainMs);
            logs?.stop();
            await removeService(serviceId);
            resolve(exit);
          })();
        },
      });
      timer ??= setInterval(() => void tick(), WATCH_MS);
      timer.unref();
    });

  const removeService = async (serviceId: string) => {
    try {
      await (await docker()).getService(serviceId).remove();
    } catch (err) {
      // Already removed: what removing it was for.
      if (dockerStatus(err) !== 404) log(`could not remove Swarm service ${serviceId}: ${dockerMessage(err)}`);
    }
  };

  const handleOf = (workerId: string, serviceId: string, output: Output = {}): WorkerHandle => {
    const exited = watch(workerId, serviceId, output);
    const handle: WorkerHandle = {
      workerId,
      exited,
      // Removing the service stops its task as `docker stop` does: SIGTERM, then SIGKILL after StopGracePeriod.
      async stop(graceMs) {
        await removeService(serviceId);
        const timeout = new Promise<WorkerExit>((resolve) => setTimeout(() => resolve({ code: null, signal: "timeout" }), graceMs + stopGraceMs).unref());
        return Promise.race([exited, timeout]);
      },
      kill() {
        void removeService(serviceId);
      },
    };
    handles.set(workerId, handle);
    return handle;
  };

  return {
    name: "swarm",
    nodeModelCache: Boolean(options.models),
    async isolation() {
      const { ApiVersion } = (await (await docker()).version()) as { ApiVersion?: string };
      const gaps = swarmConfinementGaps(ApiVersion ?? "0");
      return `each node's default runtime (set default-runtime in its daemon.json for gVisor); uid ${WORKER_UID}, no capabilities, no-new-privileges, read-only root, /tmp ${limits.tmpMb} MiB, at most ${limits.pidsLimit} processes, the instance's memory and CPU${gaps.length > 0 ? ` (but ${gaps.join("; ")})` : ""}`;
    },

    // Each node pulls a launch's image where it lacks it, with the launch's registry credentials.
    pullsImages: true,

    async start(launch) {
      if (closed) throw new UserError("The Swarm driver is closed");
      const volumeRefused = clusterVolumeRefusal(launch, "Docker Swarm", Boolean(options.volumes));
      if (volumeRefused) throw new UserError(volumeRefused);
      const d = await docker();
      if (launch.volume) {
        const placeRefused = dataCenterRefusal(
          launch.endpointName,
          launch.placement?.dataCenter,
          clusterNodesOf((await d.listNodes()) as never),
          "Docker Swarm",
        );
        if (placeRefused) throw new UserError(placeRefused);
      }
      let gpus: SwarmServicePlan["gpus"];
      if (launch.computeType === "GPU") {
        if (!(await advertised(d, gpuResource))) {
          throw new UserError(
            `No node of this swarm advertises the generic resource ${gpuResource}, so endpoint ${launch.endpointName} (a GPU endpoint) cannot be placed`,
            {
              hint: `Advertise GPUs on the GPU nodes (dockerd \`node-generic-resources\`: ["${gpuResource}=GPU-<uuid>"]) or make the endpoint a CPU endpoint.`,
            },
          );
        }
        gpus = { kind: gpuResource, count: launch.placement?.gpus || 1 };
      }
      // Its models in the cache of every node it may land on, before its service exists.
      if (modelFetcher && wantsNodeModels(launch, options.models)) await modelFetcher.ensure(launch, swarmConstraints(launch).Placement?.Constraints ?? []);
      const spec = swarmServiceSpec(launch, {
        models: options.models,
        image: launch.image ?? (await imageFor(launch)),
        session: options.session,
        network,
        gpus,
        volume: launch.volume && options.volumes ? { volume: launch.volume, config: options.volumes } : undefined,
        stopGraceMs,
        limits,
      });
      let created: { id?: string; ID?: string };
      try {
        // A launch's credentials go with the create (X-Registry-Auth): the manager passes them to the node that pulls.
        created = (
          launch.image && launch.registryAuth ? await d.createService(dockerAuthConfig(launch.registryAuth, launch.image), spec) : await d.createService(spec)
        ) as { id?: string; ID?: string };
      } catch (err) {
        throw new UserError(`Swarm refused the worker service of endpoint ${launch.endpointName}: ${dockerMessage(err)}`, { cause: err });
      }
      const serviceId = created.id ?? created.ID;
      if (!serviceId) throw new UserError(`Swarm created no service for endpoint ${launch.endpointName}`);
      log(`worker ${launch.workerId} of endpoint ${launch.endpointName} is Swarm service ${spec.Name}`);
      return handleOf(launch.workerId, serviceId, {
        onLog: launch.onLog,
        pulled: launch.image ? { image: launch.image, credentials: launch.registryAuth } : undefined,
      });
    },

    async adopt(onLog) {
      const d = await docker();
      // Its output from now on: what it wrote before, the earlier service read.
      const logsSince = new Date().toISOString();
      const services = (await d.listServices({ filters: { label: [`${LABELS.managed}=true`, `${LABELS.session}=${options.session}`] } })) as Array<{
        ID: string;
        Spec?: { Labels?: Record<string, string> };
      }>;
      const tasks = (await d.listTasks()) as Array<{
        ServiceID?: string;
        CreatedAt?: string;
        Status?: { State?: string; ContainerStatus?: { ExitCode?: number } };
      }>;
      const found: AdoptedWorker[] = [];
      for (const s of services) {
        const labels = s.Spec?.Labels ?? {};
        const workerId = labels[LABELS.worker];
        const endpointId = labels[LABELS.endpoint];
        if (!workerId || !endpointId || handles.has(workerId)) continue;
        const latest = tasks.filter((t) => t.ServiceID === s.ID).sort((a, b) => String(b.CreatedAt).localeCompare(String(a.CreatedAt)))[0];
        const exit = latest ? exitOfTask(latest) : undefined;
        if (exit) {
          await removeService(s.ID);
          found.push({
            handle: { workerId, exited: Promise.resolve(exit), stop: async () => exit, kill: () => undefined },
            endpointId,
            revision: labels[REVISION_LABEL],
            ended: true,
          });
          continue;
        }
        found.push({
          handle: handleOf(workerId, s.ID, { onLog: onLog && ((line) => onLog(endpointId, workerId, line)), logsSince }),
          endpointId,
          revision: labels[REVISION_LABEL],
        });
      }
      return found;
    },

    // The manager's own Docker volume of it; the other nodes' copies are theirs to prune (`docker volume prune
    // --filter label=svc.volume=<id>`): the manager's API reaches no other node's volumes. None holds the data
    // itself, which lives where the driver's options point (the operator's share), as docs/volumes.md says.
    async removeVolume(volumeId) {
      if (!options.volumes) return;
      const d = await docker();
      try {
        await d.getVolume(clusterVolumeName(volumeId)).remove();
      } catch (err) {
        // Never created here (no worker of it ran on the manager): nothing to drop.
        if (dockerStatus(err) !== 404)
          throw new UserError(`Could not remove the Docker volume of network volume ${volumeId}: ${dockerMessage(err)}`, { cause: err });
      }
    },

    async close() {
      closed = true;
      await Promise.all([...handles.values()].map((h) => h.stop(stopGraceMs)));
      if (timer) clearInterval(timer);
      // Those whose end was not seen in time: nothing more is read of them.
      for (const w of watched.values()) w.logs?.stop();
    },
  } satisfies WorkerDriver;
}
