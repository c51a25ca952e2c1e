// Workers as Kubernetes Pods (`svc server --workers kubernetes`), through the official client
// (@kubernetes/client-node): one Pod per worker (kubernetes-pod.ts builds it), its end seen by one watch of this
// service's Pods (re-listed and watched again whenever the watch ends), its output followed from the Pod's log
// (kubernetes-logs.ts) once its container runs, ended Pods deleted once their exit and last lines are read, stop
// as a Pod deletion with its grace period (Kubernetes sends SIGTERM, then kills), adoption by labels. A
// load-balanced worker's address is its Pod's IP, known once the Pod has one: start waits for it. Each worker's
// credentials and secret values are in a Secret of its own (created before its Pod, owned by it once it exists so
// that Kubernetes collects it with the Pod, and deleted by the driver when the worker ends); leftovers whose Pod
// is gone are deleted at adoption.

import {
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  Watch,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1Secret,
} from "@kubernetes/client-node";
import {
  claimBelow,
  clusterVolumeName,
  clusterVolumeRefusal,
  dataCenterRefusal,
  volumeClaim,
  type KubernetesVolumeConfig,
  type LaunchVolume,
} from "./cluster-volumes.js";
import { UserError, errorMessage } from "../errors.js";
import { registryDigest, registryTag } from "./registry.js";
import { imageKindOf, workerImageName } from "./image-names.js";
import { DATA_CENTER_LABEL } from "./placement.js";
import { DEFAULT_CONTAINER_LIMITS } from "./isolation.js";
import { followPodLog, type LogFollow } from "./kubernetes-logs.js";
import {
  apiErrorMessage,
  exitOfPod,
  isLoadBalancedPod,
  lbAddressOf,
  podLabels,
  POD_LABELS,
  REVISION_ANNOTATION,
  statusOf,
  WORKER_CONTAINER,
  workerPod,
  workerSecret,
} from "./kubernetes-pod.js";
import type { AdoptedWorker, WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch, WorkerLogLine } from "./types.js";
import type { RegistryCredentials } from "./registry-auth.js";
import type { NodeModelCache } from "./node-models.js";

export { exitOfPod } from "./kubernetes-pod.js";

export interface KubernetesDriverOptions {
  /** Default: in-cluster configuration, else ~/.kube/config (KubeConfig.loadFromDefault). */
  kubeConfig?: KubeConfig;
  namespace: string;
  /** Identifies this service's Pods (labels); replicas on one database share it. */
  session: string;
  /** The worker image; default svc's worker image of the launch's kind, from `registry` by digest. */
  image?: string;
  registry?: string;
  gpuTypeLabel?: string;
  cpu?: string;
  memory?: string;
  /** The RuntimeClass worker Pods run under (e.g. gVisor's "gvisor"); default the cluster's default runtime. */
  runtimeClass?: string;
  /** Size of each worker's memory-backed /tmp (Kubernetes has no per-Pod process limit: the kubelet's podPidsLimit). */
  tmpMb?: number;
  stopGraceMs?: number;
  /** How soon a watch that ended is started again (after a re-list). */
  rewatchMs?: number;
  /**
   * How long start waits for a load-balanced worker's Pod to get an IP (scheduled, its network set up) before it
   * gives up and deletes the Pod. Default 5 minutes: scheduling may wait for a node to be added.
   */
  podAddressTimeoutMs?: number;
  /** How long an ended Pod is kept for its last log lines before it is deleted and its exit reported. */
  logDrainMs?: number;
  /** Wait between reads of a Pod's log (container not started yet, follow cut short). */
  logRetryMs?: number;
  /**
   * How old a worker Secret without a Pod must be for adoption to delete it as a leftover (younger: its Pod may be
   * being created by a replica right now). Default 60 s.
   */
  leftoverSecretMs?: number;
  /** How network volumes reach the nodes: ReadWriteMany claims of a StorageClass; without it a worker with a volume is refused. */
  volumes?: KubernetesVolumeConfig;
  /**
   * The nodes' model cache (docs/models.md, "Node caches"): a worker whose endpoint names models gets it as a
   * hostPath, filled by an init container first; unset, workers get no model cache.
   */
  models?: NodeModelCache;
  log?(message: string): void;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

interface Watched {
  name: string;
  handle: Mutable<WorkerHandle>;
  /** Where its output goes; undefined: nobody reads it. */
  onLog?: (line: WorkerLogLine) => void;
  /** Adopted Pods: their output from this time on. */
  logsSince?: string;
  /** A worker image the node pulls: a container waiting on a failed pull ends the worker with it. */
  pulled?: { image: string; credentials?: RegistryCredentials };
  follow?: LogFollow;
  /** Its exit was read: its last lines are being read, then the Pod goes. */
  ending: boolean;
  /** Resolves with the Pod's address once it has one (load-balanced workers). */
  addressed: Promise<string>;
  setAddress(address: string): void;
  settle(exit: WorkerExit): void;
}

export function createKubernetesDriver(options: KubernetesDriverOptions): WorkerDriver {
  const kc = options.kubeConfig ?? loadDefault();
  const api = kc.makeApiClient(CoreV1Api);
  const namespace = options.namespace;
  const log = options.log ?? (() => undefined);
  const stopGraceMs = options.stopGraceMs ?? 10_000;
  const podAddressTimeoutMs = options.podAddressTimeoutMs ?? 300_000;
  const logDrainMs = options.logDrainMs ?? 5000;
  const selector = `${POD_LABELS.managed}=true,${POD_LABELS.session}=${podLabels({ endpointId: "x", workerId: "x" }, options.session)[POD_LABELS.session]}`;
  /** By Pod name. */
  const watched = new Map<string, Watched>();
  const images = new Map<string, Promise<string>>();
  let watching: Promise<AbortController> | undefined;
  let closed = false;
  /** Secret deletions under way: close() waits for them. */
  const secretDeletions = new Set<Promise<void>>();

  const removeSecret = (name: string): Promise<void> => {
    const deletion = (async () => {
      try {
        await api.deleteNamespacedSecret({ name, namespace });
      } catch (err) {
        // Gone already (collected with its Pod, or never made): what deleting it was for. Otherwise it is left to
        // the garbage collector (it is owned by its Pod) or the next adoption.
        if (statusOf(err) !== 404) log(`could not delete Secret ${name}: ${apiErrorMessage(err)}`);
      }
    })();
    secretDeletions.add(deletion);
    void deletion.then(() => secretDeletions.delete(deletion));
    return deletion;
  };

  const remove = async (name: string, gracePeriodSeconds?: number) => {
    try {
      await api.deleteNamespacedPod({ name, namespace, gracePeriodSeconds });
    } catch (err) {
      // Gone already: what deleting it was for.
      if (statusOf(err) !== 404) log(`could not delete Pod ${name}: ${apiErrorMessage(err)}`);
    }
  };

  /** What one Pod's state means for the worker watching it. */
  const observe = (type: string, pod: V1Pod) => {
    const name = pod.metadata?.name;
    const w = name === undefined ? undefined : watched.get(name);
    if (!w) return;
    if (type === "DELETED") return w.settle({ code: null, signal: null });
    const address = lbAddressOf(pod);
    if (address) w.setAddress(address);
    // Its container runs (or ran): its output can be read now. A Pending Pod's log answers 400.
    if (w.onLog && !w.follow && pod.status?.phase && pod.status.phase !== "Pending") {
      w.follow = followPodLog({
        kc,
        api,
        namespace,
        pod: w.name,
        container: WORKER_CONTAINER,
        onLog: w.onLog,
        sinceTime: w.logsSince,
        retryMs: options.logRetryMs,
        log,
      });
    }
    const exit = exitOfPod(pod, w.pulled);
    if (!exit || w.ending) return;
    w.ending = true;
    if (pod.status?.phase === "Failed") log(`worker Pod ${name} failed: ${pod.status?.reason ?? ""} ${pod.status?.message ?? ""}`.trim());
    if (exit.pullFailure) log(`worker Pod ${name}: ${exit.pullFailure}`);
    if (exit.startFailure) log(`worker Pod ${name}: ${exit.startFailure}`);
    void (async () => {
      // Its last lines (a crash's stack) first: deleting the Pod deletes its log.
      if (w.follow) await Promise.race([w.follow.done, new Promise((resolve) => setTimeout(resolve, logDrainMs).unref())]);
      // An ended Pod is kept by Kubernetes (restartPolicy Never): its exit and output are read, now it goes.
      await remove(name!, 0);
      w.settle(exit);
    })();
  };

  /** Every Pod of this session as the API has it now: ends what vanished or ended meanwhile. */
  const relist = async () => {
    // A Pod created while the list is under way may be missing from it without having vanished.
    const known = [...watched.values()];
    const list = await api.listNamespacedPod({ namespace, labelSelector: selector });
    const names = new Set(list.items.map((p) => p.metadata?.name));
    for (const w of known) if (!names.has(w.name)) w.settle({ code: null, signal: null });
    for (const pod of list.items) observe("MODIFIED", pod);
    return list.metadata?.resourceVersion;
  };

  const watch = () => {
    if (watching || closed) return;
    watching = (async () => {
      const resourceVersion = await relist().catch((err: unknown) => {
        log(`could not list worker Pods: ${apiErrorMessage(err)}`);
        return undefined;
      });
      return new Watch(kc).watch(
        `/api/v1/namespaces/${namespace}/pods`,
        { labelSelector: selector, ...(resourceVersion ? { resourceVersion } : {}) },
        (type: string, pod: V1Pod) => observe(type, pod),
        () => {
          // The watch ended (the API server closed it, the connection dropped): list again, then watch again.
          watching = undefined;
          if (!closed && watched.size > 0) setTimeout(watch, options.rewatchMs ?? 1000).unref();
        },
      );
    })();
    watching.catch((err: unknown) => {
      watching = undefined;
      log(`could not watch worker Pods: ${apiErrorMessage(err)}`);
      if (!closed && watched.size > 0) setTimeout(watch, options.rewatchMs ?? 1000).unref();
    });
  };

  const handleOf = (workerId: string, name: string, output: Pick<Watched, "onLog" | "logsSince" | "pulled">): Watched => {
    let settle!: (exit: WorkerExit) => void;
    const exited = new Promise<WorkerExit>((resolve) => (settle = resolve));
    let addressKnown!: (address: string) => void;
    let addressLost!: (err: Error) => void;
    const addressed = new Promise<string>((resolve, reject) => ((addressKnown = resolve), (addressLost = reject)));
    // Nobody may be waiting for it (queue endpoints): that is no unhandled rejection.
    addressed.catch(() => undefined);
    const handle: Mutable<WorkerHandle> = {
      workerId,
      exited,
      async stop(graceMs) {
        await remove(name, Math.ceil(graceMs / 1000));
        const timeout = new Promise<WorkerExit>((resolve) => setTimeout(() => resolve({ code: null, signal: "timeout" }), graceMs + 5000).unref());
        return Promise.race([exited, timeout]);
      },
      kill() {
        void remove(name, 0);
      },
    };
    const w: Watched = {
      name,
      handle,
      ...output,
      ending: false,
      addressed,
      setAddress(address) {
        handle.address ??= address;
        addressKnown(address);
      },
      settle: (exit) => {
        if (watched.get(name) !== w) return;
        watched.delete(name);
        w.follow?.stop();
        // Its credentials are of no use to anybody now.
        void removeSecret(name);
        addressLost(new Error(`it ended (exit code ${exit.code}, signal ${exit.signal}) before it had an IP`));
        settle(exit);
      },
    };
    watched.set(name, w);
    watch();
    return w;
  };

  /** A load-balanced worker's address: its Pod's IP, once it has one; the Pod is deleted if it gets none in time. */
  const addressOf = async (w: Watched, endpointName: string): Promise<string> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`it got no IP within ${podAddressTimeoutMs / 1000} s (not scheduled, or its network not set up)`)),
        podAddressTimeoutMs,
      );
      timer.unref();
    });
    try {
      return await Promise.race([w.addressed, timeout]);
    } catch (err) {
      await remove(w.name, 0);
      w.settle({ code: null, signal: null });
      throw new UserError(`The Pod ${w.name} of load-balanced endpoint ${endpointName} cannot be reached: ${errorMessage(err)}`, {
        hint: `See why with \`kubectl describe pod\` on such a Pod (no node with the resources or GPU type it asks for, an image that cannot be pulled); the service starts another one.`,
        cause: err,
      });
    } finally {
      clearTimeout(timer);
    }
  };

  const claimLabels = () => ({
    [POD_LABELS.managed]: "true",
    [POD_LABELS.session]: podLabels({ endpointId: "x", workerId: "x" }, options.session)[POD_LABELS.session]!,
  });

  /** The volume's claim, made when missing and grown when it asks for less than the volume's size. */
  const ensureClaim = async (volume: LaunchVolume, endpointName: string) => {
    const body = volumeClaim(volume, options.volumes!, { ...claimLabels(), "svc.volume": volume.id }) as V1PersistentVolumeClaim;
    try {
      await api.createNamespacedPersistentVolumeClaim({ namespace, body });
      log(`network volume ${volume.id} is PersistentVolumeClaim ${body.metadata!.name} (${options.volumes!.storageClass}, ReadWriteMany, ${volume.sizeGb}Gi)`);
      return;
    } catch (err) {
      if (statusOf(err) !== 409) {
        throw new UserError(`Kubernetes refused the PersistentVolumeClaim of endpoint ${endpointName}'s network volume: ${apiErrorMessage(err)}`, {
          hint: "The service needs to create, get, patch and delete PersistentVolumeClaims in its namespace (deploy/kubernetes/rbac.yaml).",
          cause: err,
        });
      }
    }
    // It exists (an earlier worker's): the volume may have grown since.
    await growClaim(volume);
  };

  const growClaim = async (volume: LaunchVolume) => {
    const name = clusterVolumeName(volume.id);
    let claim: V1PersistentVolumeClaim;
    try {
      claim = await api.readNamespacedPersistentVolumeClaim({ name, namespace });
    } catch (err) {
      // No worker of it ran yet: its claim will be made at the size asked then.
      if (statusOf(err) === 404) return;
      throw err;
    }
    if (!claimBelow(claim.spec?.resources?.requests?.storage, volume.sizeGb)) return;
    await api.patchNamespacedPersistentVolumeClaim(
      { name, namespace, body: { spec: { resources: { requests: { storage: `${volume.sizeGb}Gi` } } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    log(`PersistentVolumeClaim ${name} grows to ${volume.sizeGb}Gi (the StorageClass must allow volume expansion)`);
  };

  /** Set once listing nodes was forbidden: asked no more. */
  let nodesForbidden = false;
  /** Refused when no schedulable node is in the volume's data center; unchecked when the service may not list nodes. */
  const checkDataCenter = async (launch: WorkerLaunch) => {
    const dataCenter = launch.placement?.dataCenter;
    if (!dataCenter || nodesForbidden) return;
    let nodes;
    try {
      nodes = await api.listNode({ labelSelector: `${DATA_CENTER_LABEL}=${dataCenter}` });
    } catch (err) {
      // Listing nodes needs a ClusterRole (deploy/kubernetes/rbac.yaml); without it the Pod's nodeSelector still holds.
      if (statusOf(err) === 403) nodesForbidden = true;
      log(`could not list nodes to check data center ${dataCenter}${nodesForbidden ? " (not checked again)" : ""}: ${apiErrorMessage(err)}`);
      return;
    }
    const refused = dataCenterRefusal(
      launch.endpointName,
      dataCenter,
      nodes.items.map((n) => ({ labels: n.metadata?.labels ?? {}, schedulable: !n.spec?.unschedulable })),
      "Kubernetes",
    );
    if (refused) throw new UserError(refused);
  };

  const imageFor = (launch: WorkerLaunch) => {
    if (launch.image) return Promise.resolve(launch.image);
    if (options.image) return Promise.resolve(options.image);
    const kind = imageKindOf(launch.computeType);
    let image = images.get(kind);
    if (!image) {
      image = (async () => {
        if (!options.registry) return workerImageName(kind);
        const { repo, tag } = registryTag(options.registry, kind);
        const digest = await registryDigest(options.registry, repo, tag);
        if (!digest)
          throw new UserError(`The registry at ${options.registry} has no ${repo}:${tag}`, {
            hint: `Push the worker images first: svc images build --registry ${options.registry}`,
          });
        return `${repo}@${digest}`;
      })();
      image.catch(() => images.delete(kind));
      images.set(kind, image);
    }
    return image;
  };

  return {
    name: "kubernetes",
    pullsImages: true,
    nodeModelCache: Boolean(options.models),
    async isolation() {
      return `RuntimeClass ${options.runtimeClass ?? "(the cluster's default)"}; uid 1000, no capabilities, no privilege escalation, RuntimeDefault seccomp, read-only root, /tmp ${options.tmpMb ?? DEFAULT_CONTAINER_LIMITS.tmpMb} MiB in memory, the instance's memory and CPU; processes: the kubelet's podPidsLimit`;
    },

    async start(launch) {
      if (closed) throw new UserError("The Kubernetes driver is closed");
      const volumeRefused = clusterVolumeRefusal(launch, "Kubernetes", Boolean(options.volumes));
      if (volumeRefused) throw new UserError(volumeRefused);
      // Its claim before its Pod: a Pod naming a claim that does not exist yet waits unscheduled.
      if (launch.volume) {
        await checkDataCenter(launch);
        await ensureClaim(launch.volume, launch.endpointName);
      }
      const pod = workerPod(launch, {
        image: await imageFor(launch),
        session: options.session,
        gpuTypeLabel: options.gpuTypeLabel ?? "svc.gpu-type",
        cpu: options.cpu ?? "1",
        memory: options.memory ?? "1Gi",
        claimFor: clusterVolumeName,
        terminationGraceSeconds: Math.ceil(stopGraceMs / 1000),
        runtimeClassName: options.runtimeClass,
        tmpMb: options.tmpMb,
        models: options.models,
      });
      const secret = workerSecret(launch, options.session);
      let madeSecret: V1Secret;
      try {
        madeSecret = await api.createNamespacedSecret({ namespace, body: secret });
      } catch (err) {
        throw new UserError(`Kubernetes refused the Secret of endpoint ${launch.endpointName}'s worker: ${apiErrorMessage(err)}`, {
          hint: "The service needs to create, get, list, update and delete Secrets in its namespace (deploy/kubernetes/rbac.yaml).",
          cause: err,
        });
      }
      let made: V1Pod;
      try {
        made = await api.createNamespacedPod({ namespace, body: pod });
      } catch (err) {
        await removeSecret(secret.metadata!.name!);
        throw new UserError(`Kubernetes refused the Pod of endpoint ${launch.endpointName}: ${apiErrorMessage(err)}`, { cause: err });
      }
      log(`worker ${launch.workerId} of endpoint ${launch.endpointName} is Pod ${pod.metadata!.name}`);
      // Watched from now: the Pod may end (and its event pass) while the Secret is being given its owner.
      const w = handleOf(launch.workerId, pod.metadata!.name!, {
        onLog: launch.onLog,
        pulled: launch.image ? { image: launch.image, credentials: launch.registryAuth } : undefined,
      });
      // Owned by its Pod: Kubernetes deletes it with the Pod even when this service is not there to.
      try {
        const owner = { apiVersion: "v1", kind: "Pod", name: made.metadata!.name!, uid: made.metadata!.uid! };
        await api.replaceNamespacedSecret({
          name: secret.metadata!.name!,
          namespace,
          body: { ...madeSecret, metadata: { ...madeSecret.metadata, ownerReferences: [owner] } },
        });
      } catch (err) {
        // Still deleted by this driver when the worker ends, and by an adoption after a restart: worth a note.
        // Gone already (the worker ended at once, and the driver deleted it): nothing to own.
        if (statusOf(err) !== 404) log(`could not make Pod ${pod.metadata!.name} the owner of its Secret: ${apiErrorMessage(err)}`);
      }
      // The service's proxy needs the worker's address before it gets traffic: known once the Pod has an IP.
      if (launch.loadBalanced) await addressOf(w, launch.endpointName);
      return w.handle;
    },

    async adopt(onLog) {
      const list = await api.listNamespacedPod({ namespace, labelSelector: selector });
      const found: AdoptedWorker[] = [];
      // Its output from now on: what it wrote before, the earlier service read.
      const logsSince = new Date().toISOString();
      const owned = new Set([...watched.values()].map((w) => w.handle.workerId));
      for (const pod of list.items) {
        const labels = pod.metadata?.labels ?? {};
        const workerId = labels[POD_LABELS.worker];
        const endpointId = labels[POD_LABELS.endpoint];
        const name = pod.metadata?.name;
        if (!workerId || !endpointId || !name || owned.has(workerId) || watched.has(name)) continue;
        const revision = pod.metadata?.annotations?.[REVISION_ANNOTATION];
        let exit = exitOfPod(pod);
        // A load-balanced worker with no IP yet was still starting: nobody can reach it, so it goes, and the
        // service starts another (waiting here would hold the service's start up).
        if (!exit && isLoadBalancedPod(pod) && !lbAddressOf(pod)) exit = { code: null, signal: null };
        if (exit) {
          await remove(name, 0);
          await removeSecret(name);
          const ended = exit;
          found.push({
            handle: { workerId, exited: Promise.resolve(ended), stop: async () => ended, kill: () => undefined },
            endpointId,
            revision,
            ended: true,
          });
          continue;
        }
        const w = handleOf(workerId, name, { onLog: onLog && ((line) => onLog(endpointId, workerId, line)), logsSince });
        observe("MODIFIED", pod);
        found.push({ handle: w.handle, endpointId, revision });
      }
      // Secrets whose Pod is gone (the service was killed between the two, or the Pod was deleted meanwhile), but
      // not one a replica may be making a Pod for right now.
      const secrets = await api.listNamespacedSecret({ namespace, labelSelector: selector });
      const pods = new Set(list.items.map((p) => p.metadata?.name));
      const young = Date.now() - (options.leftoverSecretMs ?? 60_000);
      for (const secret of secrets.items) {
        const name = secret.metadata?.name;
        const created = secret.metadata?.creationTimestamp ? new Date(secret.metadata.creationTimestamp).getTime() : 0;
        if (!name || watched.has(name) || pods.has(name) || created > young) continue;
        await removeSecret(name);
      }
      return found;
    },

    async removeVolume(volumeId) {
      if (!options.volumes) return;
      const name = clusterVolumeName(volumeId);
      try {
        await api.deleteNamespacedPersistentVolumeClaim({ name, namespace });
        log(`PersistentVolumeClaim ${name} deleted with its network volume`);
      } catch (err) {
        // Never made (no worker of it ran): nothing to delete.
        if (statusOf(err) !== 404) throw new UserError(`Could not delete PersistentVolumeClaim ${name}: ${apiErrorMessage(err)}`, { cause: err });
      }
    },

    async resizeVolume(volume) {
      if (options.volumes) await growClaim(volume);
    },

    async close() {
      closed = true;
      await Promise.all([...watched.values()].map((w) => w.handle.stop(stopGraceMs)));
      // Those whose end the watch did not report in time: nothing more is read of them.
      for (const w of [...watched.values()]) w.follow?.stop();
      await Promise.all([...secretDeletions]);
      (await watching?.catch(() => undefined /* a watch that never started has nothing to abort */))?.abort();
    },
  } satisfies WorkerDriver;
}

function loadDefault(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}
