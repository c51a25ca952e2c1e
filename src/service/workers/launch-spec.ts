// What a worker is started with (the driver's WorkerLaunch): the endpoint's code or image, its configuration and
// secrets, the worker's credentials, its GPUs, volume and models, where it runs, and what its image is allowed.
// Pure: the scaler gathers the parts and starts it.

import type { WorkerBucket, WorkerLaunch, WorkerLogLine } from "../../drivers/types.js";
import { placementOf } from "../../drivers/placement.js";
import type { EndpointRow } from "../store/types.js";
import { artifactUrl } from "../artifacts/route.js";
import type { ScalerDeps } from "./scaler-deps.js";

/** What the scaler gathered for one worker's start. */
export interface LaunchParts {
  workerId: string;
  revision: string;
  keys: { workerToken: string; apiKey?: string; bucket?: WorkerBucket };
  /** The artifact where the driver reads it (a local path, or the endpoint's for an image). */
  artifactPath: string;
  secrets?: { env: Record<string, string> };
  /** Exactly the GPUs it holds; unset where the service assigns none (the driver's default). */
  gpus?: string[];
  /** Models in this host's cache, mounted read-only. */
  models?: readonly string[];
  /** Models the node it lands on fetches into its own cache first. */
  nodeModels?: string[];
  image?: string;
  providerImage?: string;
  onLog(line: WorkerLogLine): void;
}

/** The driver's launch of one worker of `endpoint`. Pure. */
export function workerLaunch(
  deps: Pick<ScalerDeps, "apiUrl" | "volume" | "models" | "modelHub" | "dataCenterOf" | "heartbeatMs" | "containerAllowances" | "registryAuth" | "traces">,
  endpoint: EndpointRow,
  w: LaunchParts,
): WorkerLaunch {
  const r = endpoint.resource;
  return {
    workerId: w.workerId,
    endpointId: endpoint.id,
    endpointName: endpoint.name,
    app: endpoint.app,
    env: endpoint.env,
    artifactPath: w.artifactPath,
    artifactUrl: artifactUrl(deps.apiUrl, endpoint.artifactPath),
    apiUrl: deps.apiUrl,
    workerToken: w.keys.workerToken,
    apiKey: w.keys.apiKey,
    bucket: w.keys.bucket,
    // Secrets after the plain variables: a secret of the same name is the value the user keeps secret.
    environment: { ...r.env, ...w.secrets?.env },
    secretNames: Object.keys(w.secrets?.env ?? {}),
    maxConcurrency: r.maxConcurrency,
    revision: w.revision,
    computeType: r.computeType,
    gpuTypeIds: r.gpuTypeIds,
    // Exactly the GPUs it holds; a CPU worker none. Unassigned (no GPU inventory here): the driver's default.
    gpus: r.computeType === "CPU" ? [] : w.gpus,
    ...launchVolume(deps.volume?.(endpoint)),
    ...(w.models ? { modelCache: deps.models!.root } : {}),
    ...(w.nodeModels ? { models: w.nodeModels, ...(deps.modelHub ? { modelHub: deps.modelHub } : {}) } : {}),
    placement: placementOf(r, deps.dataCenterOf?.(endpoint)),
    loadBalanced: endpoint.type === "lb",
    image: w.image,
    ...(w.providerImage ? { protocol: "provider" as const, heartbeatMs: deps.heartbeatMs } : {}),
    ...(w.image ? deps.containerAllowances?.(endpoint) : {}),
    ...(w.image ? { registryAuth: deps.registryAuth?.(endpoint) } : {}),
    ...(r.snapshot ? { snapshot: true } : {}),
    ...(deps.traces && !w.image ? { traces: deps.traces } : {}),
    onLog: w.onLog,
  };
}

/** A network volume as a launch carries it: the host directory, and its id and size for cluster drivers. Pure. */
function launchVolume(volume: { id: string; sizeGb: number; path: string } | undefined): { volumePath?: string; volume?: { id: string; sizeGb: number } } {
  return volume ? { volumePath: volume.path, volume: { id: volume.id, sizeGb: volume.sizeGb } } : {};
}
