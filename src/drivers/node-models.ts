// Node model caches (docs/models.md, "Node caches"): on Swarm and Kubernetes each node fetches the models an
// endpoint names into a directory of its own (the operator's SVC_NODE_MODEL_CACHE) before the workers that need
// them start, with `svc models fetch` in svc's server image; workers get that directory read-only. What both
// drivers share: the setting, the fetcher's image and command line. Pure.

import { MODELS_MOUNT, serverImageName } from "./image-names.js";
import { registryTag } from "./registry.js";
import type { WorkerLaunch } from "./types.js";

/** The operator's node cache: the directory on every node, and the image its fetcher runs. */
export interface NodeModelCache {
  /** Absolute path on each node. */
  path: string;
  /** An image whose entry point is `svc` (the server image's is `node /opt/svc/bin/svc.js`). */
  image: string;
}

/** Where the fetcher writes the node's cache, and where workers read it (read-only). */
export const NODE_MODELS_MOUNT = MODELS_MOUNT;

/** The key of the worker's Secret that holds the hub's token for its Pod's fetcher (never a worker variable). */
export const HUB_TOKEN_KEY = "svc-model-hub-token";

/**
 * The node cache of a driver: unset without a path; the fetcher's image the operator's, else the server image
 * of this svc version from the registry the workers' images come from, else as built here. Pure.
 */
export function nodeModelCacheOf(path: string | undefined, image: string | undefined, registry: string | undefined): NodeModelCache | undefined {
  if (!path) return undefined;
  if (image) return { path, image };
  if (registry) {
    const { repo, tag } = registryTag(registry, "server");
    return { path, image: `${repo}:${tag}` };
  }
  return { path, image: serverImageName() };
}

/**
 * What the service says at start when a node cache is set for workers that do not use one (process, Docker: they
 * share the service's own cache on this host), rather than ignoring the setting silently; undefined when it applies
 * or is not set. Pure.
 */
export function nodeModelCacheUnused(workers: string, path: string | undefined): string | undefined {
  if (!path || workers === "swarm" || workers === "kubernetes") return undefined;
  return `SVC_NODE_MODEL_CACHE (${path}) is for Swarm and Kubernetes nodes only; ${workers} workers read the models from this host's cache (<data dir>/models)`;
}

/** The fetcher's arguments after the image's entry point (`svc`), writing into `cacheDir`. Pure. */
export function fetchArgs(launch: Pick<WorkerLaunch, "models" | "modelHub">, cacheDir = NODE_MODELS_MOUNT): string[] {
  return ["models", "fetch", "--cache", cacheDir, ...(launch.modelHub ? ["--hub", launch.modelHub.url] : []), ...(launch.models ?? [])];
}

/** Whether a launch's worker gets the node's cache: its endpoint names models and the driver has a node cache. Pure. */
export function wantsNodeModels(launch: Pick<WorkerLaunch, "models">, cache: NodeModelCache | undefined): cache is NodeModelCache {
  return cache !== undefined && (launch.models?.length ?? 0) > 0;
}

/**
 * The fetcher's line worth reporting from its output or termination message: its last error line (`svc` prints
 * "error: ..." and then what to do), else its last line. Pure.
 */
export function fetcherReason(text: string | undefined): string | undefined {
  const lines = (text ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  return lines.filter((l) => l.startsWith("error:")).at(-1) ?? lines.at(-1);
}
