// The Pod of one worker on Kubernetes: what the kubernetes driver creates. Pure; snapshot-tested.
//
// One Pod per worker, never restarted by Kubernetes (`restartPolicy: Never`: the service's scaler decides what
// replaces a worker, with its backoff and its queue in view), svc's labels (so one service finds its own Pods,
// and a replica that takes over finds the dead one's), the artifact by URL and the cluster's address (never a
// path or an address of the host that started it), requests and limits, GPUs as `nvidia.com/gpu` with the GPU
// types as node affinity (required, and preferred in their priority order), the network volume as a
// PersistentVolumeClaim, a load-balanced worker's HTTP port declared (the service reaches it at the Pod's IP).
// What must stay secret (the worker token, the owner's API key, the values of the user's secrets) is not on the
// Pod, which anyone who may read Pods reads: it is in a Secret of the worker's own (workerSecret, the Pod's name
// and labels), which the Pod's variables reference (`secretKeyRef`).

import { dockerConfigJson, ImagePullError, pullFailureReason, type RegistryCredentials } from "./registry-auth.js";
import type { V1Container, V1EnvVar, V1Pod, V1PodSpec, V1Secret, V1SecurityContext } from "@kubernetes/client-node";
import { UserError, errorMessage } from "../errors.js";
import { applyProtocolEnv } from "./env.js";
import { fetchArgs, fetcherReason, HUB_TOKEN_KEY, NODE_MODELS_MOUNT, wantsNodeModels, type NodeModelCache } from "./node-models.js";
import { PROVIDER_VOLUME_MOUNT } from "./provider-env.js";
import { VOLUME_MOUNT } from "./image-names.js";
import { DEFAULT_CONTAINER_LIMITS, WORKER_GID, WORKER_HOME, WORKER_TMP, WORKER_UID, writableRootGb } from "./isolation.js";
import { DATA_CENTER_LABEL, type Placement } from "./placement.js";
import type { WorkerExit, WorkerLaunch } from "./types.js";

export const POD_LABELS = {
  managed: "svc.managed",
  session: "svc.session",
  endpoint: "svc.endpoint",
  worker: "svc.worker",
} as const;
export const REVISION_ANNOTATION = "svc.revision";
/** The container port a load-balanced worker's HTTP server listens on in its Pod. */
export const LB_POD_PORT = 8080;
/** The worker's container in its Pod (the one container: its log is the worker's output). */
export const WORKER_CONTAINER = "worker";
/** The init container that fetches the endpoint's models into the node's cache before the worker starts. */
export const MODELS_INIT_CONTAINER = "svc-models";
const MODELS_VOLUME = "svc-models";

export interface PodPlan {
  image: string;
  session: string;
  /** Node label whose value names a node's GPU type (`svc.gpu-type=A100`). */
  gpuTypeLabel: string;
  cpu: string;
  memory: string;
  /** A network volume's claim, by the volume's name (`svc-vol-<name>`). */
  claimFor(volume: string): string;
  terminationGraceSeconds: number;
  /** The RuntimeClass Pods run under (gVisor's, e.g. "gvisor"), when the operator names one. */
  runtimeClassName?: string;
  /** Size of the worker's memory-backed /tmp in MiB (default DEFAULT_CONTAINER_LIMITS.tmpMb). */
  tmpMb?: number;
  /** The nodes' model cache: a worker whose endpoint names models gets it, filled by an init container first. */
  models?: NodeModelCache;
}

/** A DNS-1123 label from any text: lower case, [a-z0-9-], at most `max` characters. Pure. */
export function dnsLabel(text: string, max = 63): string {
  const cleaned = text
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^-+|-+$/g, "");
  return cleaned.slice(0, max).replace(/-+$/, "") || "x";
}

/** Label values: at most 63 characters of [A-Za-z0-9_.-], starting and ending alphanumeric. Pure. */
function labelValue(text: string): string {
  return (
    text
      .replace(/[^A-Za-z0-9_.-]+/g, "-")
      .slice(0, 63)
      .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "") || "x"
  );
}

export function podName(launch: Pick<WorkerLaunch, "endpointName" | "workerId">): string {
  return `svc-${dnsLabel(launch.endpointName, 20)}-${dnsLabel(launch.workerId, 40)}`;
}

export function podLabels(launch: Pick<WorkerLaunch, "endpointId" | "workerId">, session: string): Record<string, string> {
  return {
    [POD_LABELS.managed]: "true",
    [POD_LABELS.session]: labelValue(session),
    [POD_LABELS.endpoint]: labelValue(launch.endpointId),
    [POD_LABELS.worker]: labelValue(launch.workerId),
  };
}

/** The protocol variables that are credentials: in the worker's Secret, never on its Pod. */
const SECRET_PROTOCOL_VARIABLES = ["SVC_WORKER_TOKEN", "SVC_API_KEY", "RUNPOD_AI_API_KEY"];

/** The worker's variables, split into those that may show on its Pod and those kept in its Secret. Pure. */
export function workerEnv(launch: WorkerLaunch, models?: NodeModelCache): { plain: Record<string, string>; secret: Record<string, string> } {
  // An image brings its own code: only svc's runtime fetches an artifact.
  if (!launch.artifactUrl && !launch.image)
    throw new UserError(`Endpoint ${launch.endpointName}'s artifact has no URL a Pod could fetch`, {
      hint: "Deploy it again: artifacts are named by their sha256.",
    });
  // HOME in the writable /tmp (svc's image has a read-only root filesystem), unless the endpoint names its own.
  const env: Record<string, string> = { ...(launch.image ? {} : { HOME: WORKER_HOME }), ...launch.environment };
  applyProtocolEnv(env, launch, {
    apiUrl: launch.apiUrl,
    artifact: launch.artifactUrl ?? "",
    volumePath: launch.volume || launch.volumeName ? VOLUME_MOUNT : undefined,
    modelCache: wantsNodeModels(launch, models) ? NODE_MODELS_MOUNT : undefined,
    // A load-balanced worker listens on every interface of its Pod; the service reaches it at the Pod's IP.
    http: launch.loadBalanced ? { host: "0.0.0.0", port: LB_POD_PORT } : undefined,
  });
  const hidden = new Set([...SECRET_PROTOCOL_VARIABLES, ...(launch.secretNames ?? [])]);
  const plain: Record<string, string> = {};
  const secret: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) (hidden.has(name) ? secret : plain)[name] = value;
  return { plain, secret };
}

/**
 * The worker's Secret: the values its Pod must not show, one key per variable, named and labelled as its Pod (so
 * that the service finds and removes it with the Pod, and a leftover by its labels). An image pulled with registry
 * credentials: the same Secret is also the Pod's image pull secret (type dockerconfigjson, its `.dockerconfigjson`
 * key beside the variables), so it lives and goes with the worker. Pure.
 */
export function workerSecret(launch: WorkerLaunch, session: string): V1Secret {
  const pull = launch.image && launch.registryAuth ? dockerConfigJson(launch.registryAuth, launch.image) : undefined;
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: podName(launch), labels: podLabels(launch, session) },
    type: pull ? "kubernetes.io/dockerconfigjson" : "Opaque",
    // The hub's token for the Pod's model fetcher under a key of its own: no variable of the worker names it.
    stringData: {
      ...workerEnv(launch).secret,
      ...(pull ? { [DOCKER_CONFIG_JSON_KEY]: pull } : {}),
      ...(launch.models?.length && launch.modelHub?.token ? { [HUB_TOKEN_KEY]: launch.modelHub.token } : {}),
    },
  };
}

/** The key of a dockerconfigjson Secret that holds the registry credentials (Kubernetes names it). */
export const DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson";

/** CPU and memory a worker's Pod requests (and is limited to): its CPU instance's, else the driver's defaults. Pure. */
export function podSize(placement: Placement | undefined, plan: Pick<PodPlan, "cpu" | "memory">): { cpu: string; memory: string } {
  return { cpu: placement?.cpus ? String(placement.cpus) : plan.cpu, memory: placement?.memoryMb ? `${placement.memoryMb}Mi` : plan.memory };
}

/**
 * How the worker's container is confined (isolation.ts): no privilege escalation, every capability dropped, the
 * runtime's default seccomp profile; for svc's own image also its non-root user and a read-only root filesystem
 * (a prebuilt image keeps its user, and a writable root where its template allows one, as on Docker). Pure.
 */
export function workerSecurityContext(launch: Pick<WorkerLaunch, "image" | "containerDiskInGb">): V1SecurityContext {
  return {
    ...(launch.image ? {} : { runAsNonRoot: true, runAsUser: WORKER_UID, runAsGroup: WORKER_GID }),
    readOnlyRootFilesystem: writableRootGb(launch) === 0,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
  };
}

/** The worker's Pod. Pure. */
export function workerPod(launch: WorkerLaunch, plan: PodPlan): V1Pod {
  const { plain, secret } = workerEnv(launch, plan.models);
  const name = podName(launch);
  const models = wantsNodeModels(launch, plan.models) ? plan.models : undefined;
  const env: V1EnvVar[] = [
    ...Object.entries(plain).map(([key, value]) => ({ name: key, value })),
    ...Object.keys(secret).map((key) => ({ name: key, valueFrom: { secretKeyRef: { name, key } } })),
  ];
  const volume = launch.volume?.id ?? launch.volumeName;
  const gpu = launch.computeType === "GPU";
  const { cpu, memory } = podSize(launch.placement, plan);
  // A writable root is bounded by the kubelet (it evicts a Pod that writes past its ephemeral-storage limit).
  const disk = writableRootGb(launch);
  const limits: Record<string, string> = {
    cpu,
    memory,
    ...(gpu ? { "nvidia.com/gpu": String(launch.placement?.gpus || 1) } : {}),
    ...(disk > 0 ? { "ephemeral-storage": `${disk}Gi` } : {}),
  };
  const dataCenter = launch.placement?.dataCenter;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      labels: podLabels(launch, plan.session),
      annotations: launch.revision ? { [REVISION_ANNOTATION]: launch.revision } : {},
    },
    spec: {
      restartPolicy: "Never",
      terminationGracePeriodSeconds: plan.terminationGraceSeconds,
      automountServiceAccountToken: false,
      // The kubelet pulls the image with the worker Secret's registry credentials (workerSecret).
      ...(launch.image && launch.registryAuth ? { imagePullSecrets: [{ name }] } : {}),
      ...(plan.runtimeClassName ? { runtimeClassName: plan.runtimeClassName } : {}),
      ...(models ? { initContainers: [modelsInitContainer(launch, models, name)] } : {}),
      containers: [
        {
          name: WORKER_CONTAINER,
          image: plan.image,
          env,
          resources: { requests: { cpu, memory }, limits },
          securityContext: workerSecurityContext(launch),
          ...(launch.loadBalanced ? { ports: [{ name: "http", containerPort: LB_POD_PORT }] } : {}),
          volumeMounts: [
            ...(volume ? [{ name: "network-volume", mountPath: VOLUME_MOUNT }] : []),
            // A provider worker finds the volume where the provider mounts it too.
            ...(volume && launch.protocol === "provider" ? [{ name: "network-volume", mountPath: PROVIDER_VOLUME_MOUNT }] : []),
            { name: "tmp", mountPath: WORKER_TMP },
            ...(launch.shmSizeMb ? [{ name: "shm", mountPath: "/dev/shm" }] : []),
            ...(models ? [{ name: MODELS_VOLUME, mountPath: NODE_MODELS_MOUNT, readOnly: true }] : []),
          ],
        } satisfies V1Container,
      ],
      volumes: [
        ...(volume ? [{ name: "network-volume", persistentVolumeClaim: { claimName: plan.claimFor(volume) } }] : []),
        // The worker's private /tmp, in memory (it counts against the container's memory limit), bounded.
        { name: "tmp", emptyDir: { medium: "Memory", sizeLimit: `${plan.tmpMb ?? DEFAULT_CONTAINER_LIMITS.tmpMb}Mi` } },
        // The bigger /dev/shm its template allows (a Pod has no shm size of its own: memory mounted there).
        ...(launch.shmSizeMb ? [{ name: "shm", emptyDir: { medium: "Memory", sizeLimit: `${launch.shmSizeMb}Mi` } }] : []),
        // The node's model cache, made by the kubelet where the node has none yet.
        ...(models ? [{ name: MODELS_VOLUME, hostPath: { path: models.path, type: "DirectoryOrCreate" } }] : []),
      ],
      ...(gpu ? gpuAffinity(launch.gpuTypeIds, plan.gpuTypeLabel) : {}),
      // Where its volume is: the workers of an endpoint with a network volume run in that volume's data center.
      ...(dataCenter ? { nodeSelector: { [DATA_CENTER_LABEL]: dataCenter } } : {}),
    },
  };
}

/**
 * The init container that fetches the endpoint's models into the node's cache (`svc models fetch`, which takes the
 * cache's lock: Pods on one node download each file once). Root, as the node's cache directory is root's (the
 * kubelet makes it), with no capability; its last log lines become its termination message when it fails, which
 * the worker's start failure quotes. The hub's token from the worker's Secret, never on the Pod. Pure.
 */
export function modelsInitContainer(launch: WorkerLaunch, models: NodeModelCache, secretName: string): V1Container {
  return {
    name: MODELS_INIT_CONTAINER,
    image: models.image,
    args: fetchArgs(launch),
    env: launch.modelHub?.token ? [{ name: "SVC_MODEL_HUB_TOKEN", valueFrom: { secretKeyRef: { name: secretName, key: HUB_TOKEN_KEY } } }] : [],
    volumeMounts: [{ name: MODELS_VOLUME, mountPath: NODE_MODELS_MOUNT }],
    terminationMessagePolicy: "FallbackToLogsOnError",
    securityContext: {
      runAsUser: 0,
      runAsGroup: 0,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    },
  };
}

/**
 * Where a GPU worker may run, from its GPU types in priority order: only on nodes of the named types (required),
 * the earlier types preferred (weights from 100 down); "ANY" among them lifts the requirement (any GPU node will
 * do) and keeps the preference for the named ones. Pure.
 */
export function gpuAffinity(gpuTypeIds: readonly string[], label: string): Pick<V1PodSpec, "affinity"> {
  const named = gpuTypeIds.filter((t) => t !== "ANY");
  const any = named.length < gpuTypeIds.length;
  if (named.length === 0) return {};
  const prefer = named.length > 1 || any;
  return {
    affinity: {
      nodeAffinity: {
        ...(any
          ? {}
          : { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: label, operator: "In", values: named }] }] } }),
        ...(prefer
          ? {
              preferredDuringSchedulingIgnoredDuringExecution: named.map((type, i) => ({
                weight: Math.max(1, 100 - Math.floor((i * 100) / named.length)),
                preference: { matchExpressions: [{ key: label, operator: "In", values: [type] }] },
              })),
            }
          : {}),
      },
    },
  };
}

/** The kubelet's reasons for a container that waits on an image it could not pull. */
const PULL_WAITING = new Set(["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"]);

/**
 * A Pod's end as a worker exit, or undefined while it runs. A Pod of a worker image whose container waits on a
 * failed pull ends here too, carrying the failed pull (naming the image and its credentials): the kubelet would
 * retry with its own backoff, the scaler retries with the endpoint's and says why it waits. Pure.
 */
export function exitOfPod(pod: V1Pod, pulled?: { image: string; credentials?: RegistryCredentials }): WorkerExit | undefined {
  const phase = pod.status?.phase;
  const fetcher = modelsFetchFailure(pod);
  if (fetcher) return { code: null, signal: null, startFailure: fetcher };
  const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
  if (pulled && phase === "Pending" && waiting?.reason && PULL_WAITING.has(waiting.reason)) {
    const why = pullFailureReason(waiting.message || waiting.reason);
    return { code: null, signal: null, pullFailure: new ImagePullError(pulled.image, why, pulled.credentials).message };
  }
  if (phase !== "Succeeded" && phase !== "Failed") return undefined;
  const terminated = pod.status?.containerStatuses?.[0]?.state?.terminated;
  return {
    code: typeof terminated?.exitCode === "number" ? terminated.exitCode : phase === "Succeeded" ? 0 : null,
    signal: terminated?.signal === undefined ? null : String(terminated.signal),
  };
}

/**
 * Why the Pod's model fetcher (its init container) keeps its worker from ever starting: it failed (its last error
 * line, from the termination message the kubelet fills with its log), or its node cannot pull its image;
 * undefined while it runs or once it succeeded. Pure.
 */
export function modelsFetchFailure(pod: V1Pod): string | undefined {
  const status = pod.status?.initContainerStatuses?.find((c) => c.name === MODELS_INIT_CONTAINER);
  if (!status) return undefined;
  const node = pod.spec?.nodeName ? ` on node ${pod.spec.nodeName}` : "";
  const terminated = status.state?.terminated;
  if (terminated && terminated.exitCode !== 0) {
    const why = fetcherReason(terminated.message) ?? terminated.reason ?? `exit code ${terminated.exitCode}`;
    return `the fetch of its models${node} failed (exit code ${terminated.exitCode}): ${why.replace(/^error: /, "")}`;
  }
  const waiting = status.state?.waiting;
  if (waiting?.reason && PULL_WAITING.has(waiting.reason)) {
    const image = status.image ? ` ${status.image}` : "";
    const why = pullFailureReason(waiting.message || waiting.reason);
    return `the model fetcher's image${image} cannot be pulled${node}: ${why}; build and push it (svc images build --server) or name another with SVC_MODELS_FETCH_IMAGE`;
  }
  return undefined;
}

/**
 * Where the service reaches a load-balanced worker's HTTP server: its Pod's IP, at the port the Pod declares for
 * it. Undefined for a Pod of a queue endpoint, or one without an IP yet. Pure.
 */
export function lbAddressOf(pod: V1Pod): string | undefined {
  const port = pod.spec?.containers.find((c) => c.name === WORKER_CONTAINER)?.ports?.find((p) => p.name === "http")?.containerPort;
  const ip = pod.status?.podIP;
  if (port === undefined || !ip) return undefined;
  return `http://${ip.includes(":") ? `[${ip}]` : ip}:${port}`;
}

/** Whether the Pod serves a load-balanced endpoint (it declares the HTTP port). Pure. */
export function isLoadBalancedPod(pod: V1Pod): boolean {
  return pod.spec?.containers.some((c) => c.ports?.some((p) => p.name === "http")) ?? false;
}

/** The HTTP status of a failed API call (the client's ApiException carries it as `code`). */
export function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown; statusCode?: unknown }).code ?? (err as { statusCode?: unknown }).statusCode;
  return typeof code === "number" ? code : undefined;
}

/**
 * A failed API call in one line: the API's own message (its Status body), else the first line of the error (the
 * client's messages run on with the response's body and headers).
 */
export function apiErrorMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  const code = statusOf(err);
  let message: unknown = typeof body === "object" && body !== null ? (body as { message?: unknown }).message : undefined;
  if (typeof body === "string" && message === undefined) {
    try {
      message = (JSON.parse(body) as { message?: unknown }).message;
    } catch {
      // Not a Status: the error's own message says what there is.
    }
  }
  if (typeof message === "string" && message) return code === undefined ? message : `${message} (HTTP ${code})`;
  const first = String(errorMessage(err) ?? err).split("\n");
  const fromClient = /^HTTP-Code: (\d+)$/.exec(first[0] ?? "");
  const said = /^Message: (.*)$/.exec(first[1] ?? "");
  return fromClient && said ? `${said[1]} (HTTP ${fromClient[1]})` : (first[0] ?? "");
}
