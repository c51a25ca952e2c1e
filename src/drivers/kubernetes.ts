// Workers as Kubernetes Pods (`svc server --workers kubernetes`), through the official client
// (@kubernetes/client-node): one Pod per worker (kubernetes-pod.ts builds it), its end seen by one watch of this
// service's Pods (re-listed and watched again whenever the watch ends), ended Pods deleted once their exit is
// read, stop as a Pod deletion with its grace period (Kubernetes sends SIGTERM, then kills), adoption by labels.

import { CoreV1Api, KubeConfig, Watch, type V1Pod } from "@kubernetes/client-node";
import { UserError } from "../errors.js";
import { registryDigest, registryTag } from "./registry.js";
import { imageKindOf, workerImageName } from "./images.js";
import { podLabels, POD_LABELS, REVISION_ANNOTATION, workerPod, dnsLabel } from "./kubernetes-pod.js";
import type { AdoptedWorker, WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch } from "./types.js";

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
  stopGraceMs?: number;
  /** How soon a watch that ended is started again (after a re-list). */
  rewatchMs?: number;
  log?(message: string): void;
}

/** A Pod's end as a worker exit, or undefined while it runs. Pure. */
export function exitOfPod(pod: V1Pod): WorkerExit | undefined {
  const phase = pod.status?.phase;
  if (phase !== "Succeeded" && phase !== "Failed") return undefined;
  const terminated = pod.status?.containerStatuses?.[0]?.state?.terminated;
  return { code: typeof terminated?.exitCode === "number" ? terminated.exitCode : phase === "Succeeded" ? 0 : null, signal: terminated?.signal === undefined ? null : String(terminated.signal) };
}

interface Watched {
  name: string;
  settle(exit: WorkerExit): void;
}

export function createKubernetesDriver(options: KubernetesDriverOptions): WorkerDriver {
  const kc = options.kubeConfig ?? loadDefault();
  const api = kc.makeApiClient(CoreV1Api);
  const namespace = options.namespace;
  const log = options.log ?? (() => undefined);
  const stopGraceMs = options.stopGraceMs ?? 10_000;
  const selector = `${POD_LABELS.managed}=true,${POD_LABELS.session}=${podLabels({ endpointId: "x", workerId: "x" }, options.session)[POD_LABELS.session]}`;
  const watched = new Map<string, Watched>();
  const handles = new Map<string, WorkerHandle>();
  const images = new Map<string, Promise<string>>();
  let watching: Promise<AbortController> | undefined;
  let closed = false;

  const remove = async (name: string, gracePeriodSeconds?: number) => {
    try {
      await api.deleteNamespacedPod({ name, namespace, gracePeriodSeconds });
    } catch (err) {
      // Gone already: what deleting it was for.
      if (statusOf(err) !== 404) log(`could not delete Pod ${name}: ${(err as Error).message}`);
    }
  };

  /** What one Pod's state means for the worker watching it. */
  const observe = (type: string, pod: V1Pod) => {
    const name = pod.metadata?.name;
    const w = name === undefined ? undefined : [...watched.values()].find((x) => x.name === name);
    if (!w) return;
    if (type === "DELETED") return w.settle({ code: null, signal: null });
    const exit = exitOfPod(pod);
    if (exit) {
      if (pod.status?.phase === "Failed") log(`worker Pod ${name} failed: ${pod.status?.reason ?? ""} ${pod.status?.message ?? ""}`.trim());
      // An ended Pod is kept by Kubernetes (restartPolicy Never): its exit is read, now it goes.
      void remove(name!, 0);
      return w.settle(exit);
    }
  };

  /** Every Pod of this session as the API has it now: ends what vanished or ended meanwhile. */
  const relist = async () => {
    const list = await api.listNamespacedPod({ namespace, labelSelector: selector });
    const names = new Set(list.items.map((p) => p.metadata?.name));
    for (const w of [...watched.values()]) if (!names.has(w.name)) w.settle({ code: null, signal: null });
    for (const pod of list.items) observe("MODIFIED", pod);
    return list.metadata?.resourceVersion;
  };

  const watch = () => {
    if (watching || closed) return;
    watching = (async () => {
      const resourceVersion = await relist().catch((err: unknown) => {
        log(`could not list worker Pods: ${(err as Error).message}`);
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
      log(`could not watch worker Pods: ${(err as Error).message}`);
      if (!closed && watched.size > 0) setTimeout(watch, options.rewatchMs ?? 1000).unref();
    });
  };

  const handleOf = (workerId: string, name: string): WorkerHandle => {
    let settle!: (exit: WorkerExit) => void;
    const exited = new Promise<WorkerExit>((resolve) => (settle = resolve));
    const handle: WorkerHandle = {
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
    watched.set(workerId, {
      name,
      settle: (exit) => {
        if (!watched.delete(workerId)) return;
        handles.delete(workerId);
        settle(exit);
      },
    });
    handles.set(workerId, handle);
    watch();
    return handle;
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
        if (!digest) throw new UserError(`The registry at ${options.registry} has no ${repo}:${tag}`, { hint: `Push the worker images first: svc images build --registry ${options.registry}` });
        return `${repo}@${digest}`;
      })();
      image.catch(() => images.delete(kind));
      images.set(kind, image);
    }
    return image;
  };

  return {
    name: "kubernetes",

    async start(launch) {
      if (closed) throw new UserError("The Kubernetes driver is closed");
      if (launch.loadBalanced) {
        throw new UserError(`Endpoint ${launch.endpointName} is load-balanced: the Kubernetes driver runs queue endpoints only for now`, { hint: "Run load-balanced endpoints with --workers process, docker or swarm." });
      }
      const pod = workerPod(launch, {
        image: await imageFor(launch),
        session: options.session,
        gpuTypeLabel: options.gpuTypeLabel ?? "svc.gpu-type",
        cpu: options.cpu ?? "1",
        memory: options.memory ?? "1Gi",
        claimFor: (volume) => `svc-vol-${dnsLabel(volume, 50)}`,
        terminationGraceSeconds: Math.ceil(stopGraceMs / 1000),
      });
      try {
        await api.createNamespacedPod({ namespace, body: pod });
      } catch (err) {
        throw new UserError(`Kubernetes refused the Pod of endpoint ${launch.endpointName}: ${(err as Error).message}`, { cause: err });
      }
      log(`worker ${launch.workerId} of endpoint ${launch.endpointName} is Pod ${pod.metadata!.name}`);
      return handleOf(launch.workerId, pod.metadata!.name!);
    },

    async adopt() {
      const list = await api.listNamespacedPod({ namespace, labelSelector: selector });
      const found: AdoptedWorker[] = [];
      for (const pod of list.items) {
        const labels = pod.metadata?.labels ?? {};
        const workerId = labels[POD_LABELS.worker];
        const endpointId = labels[POD_LABELS.endpoint];
        const name = pod.metadata?.name;
        if (!workerId || !endpointId || !name || handles.has(workerId)) continue;
        const revision = pod.metadata?.annotations?.[REVISION_ANNOTATION];
        const exit = exitOfPod(pod);
        if (exit) {
          await remove(name, 0);
          found.push({ handle: { workerId, exited: Promise.resolve(exit), stop: async () => exit, kill: () => undefined }, endpointId, revision, ended: true });
          continue;
        }
        found.push({ handle: handleOf(workerId, name), endpointId, revision });
      }
      return found;
    },

    async close() {
      closed = true;
      await Promise.all([...handles.values()].map((h) => h.stop(stopGraceMs)));
      (await watching?.catch(() => undefined))?.abort();
    },
  } satisfies WorkerDriver;
}

function loadDefault(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}

function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown; statusCode?: unknown }).code ?? (err as { statusCode?: unknown }).statusCode;
  return typeof code === "number" ? code : undefined;
}
