// Pre-booted worker containers for the Docker driver (docs/cold-start.md): containers started from the worker
// image with the runtime loaded and no endpoint, waiting for a claim on their stdin (src/runtime/claim.ts). This
// module holds the pure parts (what a pool container is, which launches may claim one, the claim's environment,
// the names that say who claimed a container) and the node's artifact cache they read artifacts from; the pool
// itself and its engine calls are docker-pool-engine.ts's, the claim docker-claim.ts's.

import { createHash, createHmac } from "node:crypto";
import { copyFile, chmod, link, mkdir, rename, rm, stat } from "node:fs/promises";
import { createReadStream } from "node:fs";
import { basename, join } from "node:path";
import type Docker from "dockerode";
import { POOL_CHANNEL_ENV } from "../runtime/claim.js";
import { applyProtocolEnv } from "./env.js";
import { LABELS } from "./docker-engine.js";
import type { WorkerImageKind } from "./image-names.js";
import { DEFAULT_CONTAINER_LIMITS, dockerConfinement, WORKER_GID, WORKER_HOME, WORKER_UID, type ContainerLimits } from "./isolation.js";
import type { WorkerLaunch } from "./types.js";

/** Where a pool container sees the node's artifact cache (read-only). */
export const POOL_ARTIFACTS_MOUNT = "/svc/artifacts";

/** Pool containers' name prefix; a claimed one is renamed `svc-claimed.<endpoint id>.<worker id>`. */
const CLAIMED_PREFIX = "svc-claimed.";
const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Pool size per image kind: a number is that many of each kind the host can run (GPU: only with GPUs). Pure. */
export function poolSizes(option: number | Partial<Record<WorkerImageKind, number>> | undefined, gpuAvailable: boolean): Record<WorkerImageKind, number> {
  const sizes = typeof option === "number" ? { cpu: option, gpu: option } : { cpu: option?.cpu ?? 0, gpu: option?.gpu ?? 0 };
  return { cpu: Math.max(0, sizes.cpu), gpu: gpuAvailable ? Math.max(0, sizes.gpu) : 0 };
}

/**
 * Why a launch cannot claim a pool container: what it needs is fixed when a container is created and differs
 * from a pool container's. Undefined: it can. Pure.
 */
export function poolRefusal(launch: WorkerLaunch, driver: { publishes: boolean; requestGpus: boolean }): string | undefined {
  if (launch.image) return "a prebuilt image, not the svc runtime";
  if (launch.volumeName || launch.volumePath) return "a network volume is mounted when a container is created";
  if (launch.loadBalanced) return "a load-balanced worker's port is published when its container is created";
  if (driver.publishes) return "the driver publishes ports, fixed when a container is created";
  if (launch.computeType === "GPU" && !driver.requestGpus) return "a GPU endpoint running on CPU (fallback) gets a fresh container";
  if (launch.gpus?.length) return "a GPU worker's own GPUs are given to its container when it is created";
  return undefined;
}

/** The name of a claimed pool container: who claimed it, read back by adopt() after a crash. Pure. */
export function claimedName(endpointId: string, workerId: string): string | undefined {
  return ID.test(endpointId) && ID.test(workerId) ? `${CLAIMED_PREFIX}${endpointId}.${workerId}` : undefined;
}

/** The endpoint and worker a container's name says claimed it, when it was a claimed pool container. Pure. */
export function parseClaimedName(name: string): { endpointId: string; workerId: string } | undefined {
  const bare = name.replace(/^\//, "");
  if (!bare.startsWith(CLAIMED_PREFIX)) return undefined;
  const [endpointId, workerId, ...rest] = bare.slice(CLAIMED_PREFIX.length).split(".");
  return endpointId && workerId && rest.length === 0 && ID.test(endpointId) && ID.test(workerId) ? { endpointId, workerId } : undefined;
}

export interface PoolContainerPlan {
  name: string;
  image: string;
  network: string;
  kind: WorkerImageKind;
  labels: Record<string, string>;
  /** Host directory of the node's artifact cache, mounted read-only. */
  artifactCache: string;
  requestGpus: boolean;
  serviceHostIp?: string;
  /** Processes and /tmp size (default DEFAULT_CONTAINER_LIMITS); memory and CPU are set by the claim. */
  limits?: ContainerLimits;
  /** The OCI runtime; undefined: the engine's default. */
  runtime?: string;
}

/** Labels of a pool container: svc's, its session's, the pool's and its kind; no endpoint (it has none yet). Pure. */
export function poolLabels(session: string, kind: WorkerImageKind, extra: Record<string, string> = {}): Record<string, string> {
  return { ...extra, [LABELS.managed]: "true", [LABELS.session]: session, [LABELS.pool]: "true", [LABELS.imageKind]: kind };
}

/**
 * A pool container's create body: the worker image, no endpoint environment, stdin open for the claim and closed
 * when the driver's attachment goes (StdinOnce), removed by the engine when it exits. Pure.
 */
export function poolContainerOptions(plan: PoolContainerPlan): Docker.ContainerCreateOptions {
  const hostConfig: Docker.HostConfig = {
    NetworkMode: plan.network,
    Binds: [`${plan.artifactCache}:${POOL_ARTIFACTS_MOUNT}:ro`],
    Init: true,
    RestartPolicy: { Name: "no" },
    AutoRemove: true,
    // As a fresh worker's container (docker.ts), less the endpoint's memory and CPU: the claim sets those.
    ...dockerConfinement(undefined, { limits: plan.limits ?? DEFAULT_CONTAINER_LIMITS, runtime: plan.runtime, readOnlyRoot: true }),
  };
  if (plan.serviceHostIp) hostConfig.ExtraHosts = [`svc-api:${plan.serviceHostIp}`];
  if (plan.requestGpus) hostConfig.DeviceRequests = [{ Driver: "", Count: -1, DeviceIDs: [], Capabilities: [["gpu"]], Options: {} }];
  return {
    name: plan.name,
    Image: plan.image,
    User: `${WORKER_UID}:${WORKER_GID}`,
    Env: [`HOME=${WORKER_HOME}`, "SVC_POOLED=1", `${POOL_CHANNEL_ENV}=stdin`],
    Labels: plan.labels,
    OpenStdin: true,
    StdinOnce: true,
    AttachStdin: true,
    HostConfig: hostConfig,
  };
}

/** The claim's environment: the endpoint's variables, then the protocol's, the artifact in the node's cache. Pure. */
export function claimEnvironment(launch: WorkerLaunch, apiUrl: string, artifactInContainer: string): Record<string, string> {
  const env: Record<string, string | undefined> = { ...launch.environment };
  applyProtocolEnv(env, launch, { apiUrl, artifact: artifactInContainer });
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  return out;
}

/**
 * The node's artifact cache: one file per artifact content, named by a keyed hash of its sha256, in a directory
 * mounted read-only into pool containers. The directory is not listable (mode 0311) and names cannot be derived
 * from the content without the driver's key: a claimed container reads its own artifact, and cannot find another.
 */
/** Remove a directory of staged artifacts (an ArtifactCache's, 0311: made its owner's again first); absent is fine. */
export async function removeArtifactsDir(dir: string): Promise<void> {
  await chmod(dir, 0o700).catch(() => undefined /* never made: nothing to remove */);
  await rm(dir, { recursive: true, force: true });
}

export class ArtifactCache {
  private readonly staged = new Map<string, Promise<string>>();
  private made: Promise<void> | undefined;

  constructor(
    readonly dir: string,
    private readonly key: Buffer,
  ) {}

  /** Make the directory (owner: write and search only; others: search only). */
  ensureDir(): Promise<void> {
    this.made ??= (async () => {
      await mkdir(this.dir, { recursive: true });
      await chmod(this.dir, 0o311);
    })();
    return this.made;
  }

  /** The artifact's path inside a pool container, staged into the cache when it is not there yet. */
  async stage(artifactPath: string): Promise<string> {
    return `${POOL_ARTIFACTS_MOUNT}/${basename(await this.hostPath(artifactPath))}`;
  }

  /**
   * The artifact's staged copy on this machine, readable by a container's user (the service keeps its own copy
   * readable by itself alone): what a container bind-mounts.
   */
  hostPath(artifactPath: string): Promise<string> {
    let pending = this.staged.get(artifactPath);
    if (!pending) {
      pending = this.stageOnce(artifactPath);
      this.staged.set(artifactPath, pending);
      pending.catch(() => this.staged.delete(artifactPath));
    }
    return pending;
  }

  private async stageOnce(artifactPath: string): Promise<string> {
    await this.ensureDir();
    const sha = await artifactSha256(artifactPath);
    const name = `${createHmac("sha256", this.key).update(sha).digest("hex")}.tar.gz`;
    const target = join(this.dir, name);
    if (!(await stat(target).catch(() => undefined /* not there yet: written below, whose failure is reported */))) {
      const temp = `${target}.${process.pid}.${Math.random().toString(36).slice(2)}`;
      // A hard link costs nothing, but shares the file's mode: only a file others may read already is linked.
      const readable = ((await stat(artifactPath)).mode & 0o004) !== 0;
      const linked =
        readable &&
        (await link(artifactPath, temp).then(
          () => true,
          () => false /* across file systems: a copy */,
        ));
      if (!linked) {
        await copyFile(artifactPath, temp);
        await chmod(temp, 0o444);
      }
      await rename(temp, target);
    }
    return target;
  }
}

/** The sha256 of an artifact: its name when the service stores it by content (`<sha256>.tar.gz`), else its bytes. */
async function artifactSha256(path: string): Promise<string> {
  const named = /^([a-f0-9]{64})\.tar\.gz$/.exec(basename(path));
  if (named) return named[1]!;
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}
