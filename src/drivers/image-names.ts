// What svc's images are called and where things sit inside them: the image kinds, repositories and tags, the
// worker's user, the runtime's and the Node binary's paths, the artifact and volume mounts. Apart from the
// building of images (images.ts and the modules it drives) because every driver needs these names and none of
// that machinery.

import { imageNameFor } from "../build/manifest.js";
import { SVC_VERSION } from "../version.js";
import { WORKER_GID, WORKER_UID } from "./isolation.js";

export type WorkerImageKind = "cpu" | "gpu";
export const WORKER_IMAGE_KINDS: readonly WorkerImageKind[] = ["cpu", "gpu"];
/** Every image svc builds: the two worker images and the server's. */
export type ImageKind = WorkerImageKind | "server";

/** Bump when the image layout changes in a way the inputs do not show (it is part of the hash). */
export const IMAGE_LAYOUT_VERSION = 1;
export const WORKER_USER = { name: "svc", uid: WORKER_UID, gid: WORKER_GID, home: "/home/svc" } as const;
export const NODE_IN_IMAGE = "/usr/local/bin/node";
export const RUNTIME_ROOT = "/opt/svc";
export const RUNTIME_ENTRY_IN_IMAGE = `${RUNTIME_ROOT}/dist/runtime/worker.js`;
/** Where drivers mount the endpoint's network volume (docs/worker-protocol.md). */
export const VOLUME_MOUNT = "/svc-volume";
/** Where a container worker finds the host's model cache, read-only (docs/models.md). */
export const MODELS_MOUNT = "/svc-models";
/** Where drivers mount the artifact (read-only). */
export const ARTIFACT_MOUNT = "/svc/artifact.tar.gz";
/** Where the image holds the host's CA certificates. */
export const CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";
/** Every file of an image has this modification time: the same inputs give the same layer. */
export const FIXED_MTIME = new Date(Date.UTC(2000, 0, 1));

export const SERVER_IMAGE_REPO = "svc-server";
/** The server image's data directory (caches only when the state is in PostgreSQL) and port. */
export const SERVER_DATA_DIR = "/var/lib/svc";
export const SERVER_PORT = 8600;

export function workerImageRepo(kind: WorkerImageKind): string {
  return kind === "gpu" ? "svc-worker-gpu" : "svc-worker-cpu";
}

export function imageRepo(kind: ImageKind): string {
  return kind === "server" ? SERVER_IMAGE_REPO : workerImageRepo(kind);
}

/** `svc-server:<svc version>`: the server image's name. */
export function serverImageName(version = SVC_VERSION): string {
  return `${SERVER_IMAGE_REPO}:${version}`;
}

/** `<repo>:<svc version>`: what the manifest's imageName says. */
export function workerImageName(kind: WorkerImageKind, version = SVC_VERSION): string {
  return imageNameFor(kind === "gpu" ? "GPU" : "CPU", version);
}

export function imageKindOf(computeType: "GPU" | "CPU"): WorkerImageKind {
  return computeType === "GPU" ? "gpu" : "cpu";
}
