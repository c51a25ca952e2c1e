// Where workers run. The service's scaler decides how many workers an endpoint needs; a driver starts and
// stops them. Drivers: local processes (the embedded default), Docker containers, Swarm services, Kubernetes Pods.

import type { LaunchVolume } from "./cluster-volumes.js";
import type { Placement } from "./placement.js";
import type { RegistryCredentials } from "./registry-auth.js";

export interface WorkerLogLine {
  ts: number;
  /** "log": a note of the runtime or the driver itself. */
  stream: "stdout" | "stderr" | "log";
  text: string;
  /** The job whose code wrote the line (read from the runtime's output marks). */
  jobId?: string;
}

export type WorkerProtocol = "svc" | "provider";

/** The S3 endpoint and key a worker uploads to its endpoint's network volume with. */
export interface WorkerBucket {
  /** `<service public url>/s3/<volumeId>`: every bucket a client names becomes a top-level folder of the volume. */
  endpointUrl: string;
  accessKeyId: string;
  secretAccessKey: string;
}

export interface WorkerLaunch {
  workerId: string;
  endpointId: string;
  endpointName: string;
  app: string;
  env: string;
  /** Local path of the artifact .tar.gz (drivers may mount it, or hand the runtime a URL). */
  artifactPath: string;
  /**
   * Where a worker on another machine downloads the artifact (GET with its worker token): drivers whose workers
   * cannot see this machine's disk hand the runtime this instead of `artifactPath`.
   */
  artifactUrl?: string;
  /** Service base URL as seen from the host; drivers translate it for their workers when needed. */
  apiUrl: string;
  workerToken: string;
  /**
   * The protocol the worker speaks: svc's own (the svc runtime; the default) or the provider's (an image whose
   * entry point is the provider's worker SDK), which gets the provider's variables instead (provider-env.ts).
   */
  protocol?: WorkerProtocol;
  /** How often a provider worker pings, in ms (the service's heartbeat period); its default otherwise. */
  heartbeatMs?: number;
  /**
   * The service's collector, when it traces: svc's runtime sends a span of each handler's run there
   * (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_HEADERS in the worker, unless its endpoint sets its own).
   */
  traces?: { tracesUrl: string; headers?: string };
  /** The owner's key, for cross-endpoint calls from inside the worker. */
  apiKey?: string;
  /** The endpoint's configured environment variables. */
  environment: Record<string, string>;
  /** Which of `environment`'s names hold the values of the user's secrets (drivers that can keep them apart do). */
  secretNames?: string[];
  maxConcurrency: number;
  /** What the worker runs (the endpoint's revision): kept by drivers that can adopt workers after a restart. */
  revision?: string;
  computeType: "GPU" | "CPU";
  gpuTypeIds: string[];
  /**
   * The UUIDs of the GPUs this worker holds, no other worker's (docs/gpus.md); [] for a CPU worker: it sees no
   * GPU. Undefined: the service assigns none (a scheduler places GPUs, or this host has no GPU inventory).
   */
  gpus?: string[];
  /** What a scheduler places the worker by: CPU and memory, GPUs, the data center of its volume (placement.ts). */
  placement?: Placement;
  /** Host path of the endpoint's network volume, when it has one. */
  volumePath?: string;
  /**
   * The endpoint's network volume, when it has one: its id and size, for drivers that make it follow workers to
   * other nodes (a Swarm volume driver, a Kubernetes claim: cluster-volumes.ts).
   */
  volume?: LaunchVolume;
  /**
   * Host path of this host's model cache (its HF_HOME), when the endpoint names models: every model it names is
   * there already. Drivers mount it read-only and point HF_HOME/HF_HUB_CACHE at it, with HF_HUB_OFFLINE=1
   * (docs/models.md).
   */
  modelCache?: string;
  /**
   * The models the endpoint names, for a driver with `nodeModelCache`: the node a worker lands on fetches them into
   * its own cache before the worker starts (docs/models.md, "Node caches"); `modelCache` is then unset.
   */
  models?: string[];
  /** Where a node fetches `models` from, and the token it sends; unset: the fetcher's default hub. */
  modelHub?: { url: string; token?: string };
  /** Name of the endpoint's network volume, when it has one (the Docker driver mounts a Docker volume of that name). */
  volumeName?: string;
  /**
   * Credentials for the S3 API on the endpoint's network volume, minted for this worker alone (revoked when it
   * ends): what the provider SDK's upload helper reads as BUCKET_* (env.ts, docs/volumes.md "Uploads from workers").
   */
  bucket?: WorkerBucket;
  /** A load-balanced endpoint: the worker serves HTTP routes, which the service must be able to reach. */
  loadBalanced?: boolean;
  /**
   * A prebuilt image to run instead of the svc worker runtime (load-balanced endpoints made from a template with
   * any image): an HTTP server listening on $PORT that does not speak the worker protocol. Drivers with `hasImage`.
   */
  image?: string;
  /**
   * The credentials `image` is pulled with (its template's registry auth): drivers that pull hand them to their
   * engine (Docker's X-Registry-Auth, a Kubernetes image pull Secret), never to the container.
   */
  registryAuth?: RegistryCredentials;
  /**
   * The size of /dev/shm in an image's container, in MiB (its template allows it: model servers share tensors
   * through it); unset: the engine's default. Drivers that run images.
   */
  shmSizeMb?: number;
  /**
   * An image's writable root filesystem, in GiB (its template's `containerDiskInGb`): 0 or unset gives it a
   * read-only root, as svc's own image has. Where the engine can bound a container's layer it is bounded to this
   * (Docker's `size` storage option, Kubernetes' ephemeral-storage limit). Drivers that run images.
   */
  containerDiskInGb?: number;
  /**
   * Start it from a checkpoint of an initialised worker of the same revision where the driver can (the endpoint's
   * `snapshot: true`); drivers that cannot start it as usual. docs/cold-start.md, "Snapshots".
   */
  snapshot?: boolean;
  onLog(line: WorkerLogLine): void;
}

/** What an image's containers are allowed beyond the sandbox's defaults (docs/provider-workers.md). */
export type ContainerAllowances = Pick<WorkerLaunch, "shmSizeMb" | "containerDiskInGb">;

export interface WorkerExit {
  code: number | null;
  signal: string | null;
  /**
   * The worker never ran because its node could not pull the image: why, as an ImagePullError says it. Set by
   * drivers whose nodes pull (`pullsImages`), where a failed pull shows only after the start returned.
   */
  pullFailure?: string;
  /**
   * The worker never ran because what its node runs before it failed (the fetch of its models into the node's
   * cache): why, in the fetcher's words.
   */
  startFailure?: string;
}

export interface WorkerHandle {
  readonly workerId: string;
  /** Resolves when the worker has exited, however that happened. */
  readonly exited: Promise<WorkerExit>;
  /** Ask the worker to finish and exit (SIGTERM), and kill it after `graceMs`. */
  stop(graceMs: number): Promise<WorkerExit>;
  /** Kill at once (SIGKILL). */
  kill(): void;
  /**
   * Where the service reaches a load-balanced worker's HTTP server, when the driver knows better than the worker
   * (a container's port published on the host); the service prefers it to the address the worker registers.
   */
  readonly address?: string;
  /**
   * A Unix socket path on this machine where the driver had a load-balanced worker's HTTP server also listen
   * (SVC_LB_SOCKET): the service's proxy reaches the worker there, without TCP, once the worker confirms it.
   */
  readonly localSocket?: string;
  /**
   * An address of a load-balanced worker that skips the host's port forwarding (a container's IP on its
   * network): the service tries it once the worker answers at `address`, and keeps it only if it answers there too.
   */
  readonly directAddress?: string;
}

/** A worker an earlier process of the service started, still running, found by the driver after a restart. */
export interface AdoptedWorker {
  handle: WorkerHandle;
  endpointId: string;
  /** The revision it was started with, when the driver kept it. */
  revision?: string;
  /** The GPUs it was given (launch.gpus), when the driver kept them: held again after the restart. */
  gpus?: string[];
  /**
   * It had already ended (or the driver removed it) when found: nothing to count or watch, but the jobs it held
   * go back to the queue now rather than when their leases lapse. Its handle's `exited` is resolved.
   */
  ended?: boolean;
}

export interface WorkerDriver {
  readonly name: "process" | "docker" | "swarm" | "kubernetes";
  /**
   * Whether it restores workers of `snapshot: true` endpoints from a checkpoint (the process driver, with CRIU);
   * the others start such workers as usual, and the service says so once per endpoint.
   */
  readonly restoresSnapshots?: boolean;
  /**
   * Its workers run on other machines, each of which fetches an endpoint's models into a cache of its own before
   * the workers that need them start (launch.models): the service fetches none on its own host for them.
   */
  readonly nodeModelCache?: boolean;
  start(launch: WorkerLaunch): Promise<WorkerHandle>;
  /**
   * The workers a previous process of the service left (it was killed): those still running, which the service
   * counts, watches and stops or keeps like its own, and those that ended meanwhile (`ended`), whose jobs it
   * requeues. Each is returned once. `onLog` receives the output of those still running, as a launch's onLog
   * does, from when they are adopted (drivers that read a worker's output from outside it: Kubernetes).
   */
  adopt?(onLog?: (endpointId: string, workerId: string, line: WorkerLogLine) => void): Promise<AdoptedWorker[]>;
  /**
   * It pulls a launch's image where missing (Docker: the driver, before the container; Swarm: each node; Kubernetes:
   * the kubelet), with the launch's registry credentials: a queue endpoint's worker image built for the provider
   * runs there without the service looking for it first, and a pull that fails fails the start (ImagePullError
   * where the driver sees it).
   */
  readonly pullsImages?: boolean;
  /** Present when the driver runs prebuilt images (`launch.image`): whether its engine holds this one. */
  hasImage?(name: string): Promise<boolean>;
  /** How its workers are confined, in one line (the service's start line and `svc doctor` say it). */
  isolation?(): Promise<string>;
  /**
   * A network volume was deleted: drop what the driver made for it on the cluster (a Kubernetes claim, the Swarm
   * manager's Docker volume). Drivers whose workers mount the volume's directory have nothing to drop.
   */
  removeVolume?(volumeId: string): Promise<void>;
  /** A network volume grew: the cluster's storage follows where it can (a Kubernetes claim's request). */
  resizeVolume?(volume: LaunchVolume): Promise<void>;
  /** Stop every worker this driver started. */
  close(): Promise<void>;
}
