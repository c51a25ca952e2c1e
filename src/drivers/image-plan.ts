// An image's plan from its inputs, pure (the second of the three steps in images.ts): the entries of its root
// filesystem, its config (Cmd, Env, WorkingDir, User, Labels), its content hash, and whether an image of this
// engine already is it (cached), needs only a tag, or must be built.

import { createHash } from "node:crypto";
import { dirname } from "node:path";
import { SVC_VERSION } from "../version.js";
import { LABELS } from "./docker-engine.js";
import {
  ARTIFACT_MOUNT,
  CA_BUNDLE,
  IMAGE_LAYOUT_VERSION,
  imageRepo,
  NODE_IN_IMAGE,
  RUNTIME_ENTRY_IN_IMAGE,
  RUNTIME_ROOT,
  SERVER_DATA_DIR,
  SERVER_PORT,
  VOLUME_MOUNT,
  WORKER_USER,
  type ImageKind,
  type WorkerImageKind,
} from "./image-names.js";
import type { ImageFile, ImageInputs, ServerImageInputs } from "./image-inputs.js";

export interface ImageEntry {
  /** Absolute path inside the image. */
  path: string;
  type: "file" | "directory";
  mode: number;
  uid: number;
  gid: number;
  file?: ImageFile;
}

export interface ImageConfig {
  /** The server image's (`node svc.js`); worker images have none. */
  entrypoint?: string[];
  cmd: string[];
  env: Record<string, string>;
  workingDir: string;
  user: string;
  labels: Record<string, string>;
}

export interface ImagePlan {
  kind: ImageKind;
  repo: string;
  /** Content hash of every entry and the config (hex, 64). */
  hash: string;
  /** `<repo>:<hash prefix>` */
  hashTag: string;
  /** `<repo>:<svc version>` */
  versionTag: string;
  entries: ImageEntry[];
  config: ImageConfig;
}

function textFile(path: string, text: string, mode = 0o644): ImageFile {
  const content = Buffer.from(text);
  return { path, mode, content, size: content.length, sha256: createHash("sha256").update(content).digest("hex") };
}

export function imageConfig(kind: WorkerImageKind, hasCaBundle: boolean): ImageConfig {
  const env: Record<string, string> = {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: WORKER_USER.home,
    NODE_ENV: "production",
    SVC_IMAGE_KIND: kind,
  };
  if (hasCaBundle) env.NODE_EXTRA_CA_CERTS = CA_BUNDLE;
  if (kind === "gpu") {
    // Read by the NVIDIA container runtime at run time; plain runc ignores it. Which GPUs a container sees is
    // never the image's to say (no NVIDIA_VISIBLE_DEVICES=all): its device request and environment name them.
    env.NVIDIA_DRIVER_CAPABILITIES = "compute,utility";
  }
  return {
    cmd: [NODE_IN_IMAGE, RUNTIME_ENTRY_IN_IMAGE],
    env,
    workingDir: WORKER_USER.home,
    user: `${WORKER_USER.uid}:${WORKER_USER.gid}`,
    labels: { [LABELS.managed]: "true", [LABELS.imageKind]: kind },
  };
}

/** Entries of a root filesystem: the directories given, then the files with their parent directories; sorted. */
function layout(directories: readonly ImageEntry[], files: readonly ImageFile[]): ImageEntry[] {
  const entries = new Map<string, ImageEntry>();
  for (const d of directories) entries.set(d.path, d);
  for (const file of files) {
    for (let dir = dirname(file.path); dir !== "/"; dir = dirname(dir)) {
      if (!entries.has(dir)) entries.set(dir, { path: dir, type: "directory", mode: 0o755, uid: 0, gid: 0 });
    }
    entries.set(file.path, { path: file.path, type: "file", mode: file.mode, uid: 0, gid: 0, file });
  }
  return [...entries.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The plan of one image: its entries, and the hash of all of them with its config, naming it. */
function planOf(kind: ImageKind, entries: ImageEntry[], baseConfig: ImageConfig, version: string): ImagePlan {
  const hash = createHash("sha256")
    .update(JSON.stringify({ layout: IMAGE_LAYOUT_VERSION, kind, version, config: baseConfig }))
    .update("\n");
  for (const e of entries) hash.update(`${e.type} ${e.path} ${e.mode.toString(8)} ${e.uid}:${e.gid} ${e.file?.sha256 ?? ""}\n`);
  const digest = hash.digest("hex");
  const repo = imageRepo(kind);
  const config: ImageConfig = { ...baseConfig, labels: { ...baseConfig.labels, [LABELS.imageHash]: digest, [LABELS.version]: version } };
  return { kind, repo, hash: digest, hashTag: `${repo}:${digest.slice(0, 20)}`, versionTag: `${repo}:${version}`, entries, config };
}

const NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n";

/** Every entry of the root filesystem and the image config, with the hash that names them. */
export function planWorkerImage(kind: WorkerImageKind, inputs: ImageInputs, version = SVC_VERSION): ImagePlan {
  const { uid, gid } = WORKER_USER;
  const files: ImageFile[] = [
    ...inputs.system,
    ...inputs.runtime,
    // Only what the runtime reads (version.js reads "version"); the real package.json would churn the hash.
    textFile(`${RUNTIME_ROOT}/package.json`, `${JSON.stringify({ name: "svc", version, type: "module", private: true })}\n`),
    textFile("/etc/passwd", `root:x:0:0:root:/root:/sbin/nologin\n${WORKER_USER.name}:x:${uid}:${gid}:svc worker:${WORKER_USER.home}:/sbin/nologin\n`),
    textFile("/etc/group", `root:x:0:\n${WORKER_USER.name}:x:${gid}:\n`),
    textFile("/etc/nsswitch.conf", NSSWITCH),
  ];
  const directory = (path: string, mode = 0o755, owner = 0): ImageEntry => ({ path, type: "directory", mode, uid: owner, gid: owner });
  // Writable places: /tmp for everyone (artifact extraction), the worker's home and the volume mount point
  // (Docker copies a mount point's owner into a fresh named volume, so the worker can write to it).
  const directories = [
    directory("/tmp", 0o1777),
    directory(WORKER_USER.home, 0o755, uid),
    directory(VOLUME_MOUNT, 0o755, uid),
    directory(dirname(ARTIFACT_MOUNT)),
  ];
  return planOf(kind, layout(directories, files), imageConfig(kind, inputs.hasCaBundle), version);
}

/** The server image's config: `svc server` on all interfaces of the container, its data directory set. Pure. */
export function serverImageConfig(hasCaBundle: boolean): ImageConfig {
  const env: Record<string, string> = {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: "/root",
    NODE_ENV: "production",
    SVC_IMAGE_KIND: "server",
    SVC_DATA_DIR: SERVER_DATA_DIR,
  };
  if (hasCaBundle) env.NODE_EXTRA_CA_CERTS = CA_BUNDLE;
  return {
    entrypoint: [NODE_IN_IMAGE, `${RUNTIME_ROOT}/bin/svc.js`],
    cmd: ["server", "--host", "0.0.0.0", "--port", String(SERVER_PORT)],
    env,
    workingDir: SERVER_DATA_DIR,
    // Root: the server drives the engine through its socket (root:docker on the host, a gid that differs per
    // host), which is root's power anyway.
    user: "0:0",
    labels: { [LABELS.managed]: "true", [LABELS.imageKind]: "server" },
  };
}

/** The server image: svc's dist/, bin/, templates/ and production packages on this machine's Node. Pure. */
export function planServerImage(inputs: ServerImageInputs, version = SVC_VERSION): ImagePlan {
  const files: ImageFile[] = [
    ...inputs.system,
    ...inputs.app,
    // version.js reads "version"; "type" makes dist/ ES modules. The real package.json would churn the hash.
    textFile(`${RUNTIME_ROOT}/package.json`, `${JSON.stringify({ name: "svc", version, type: "module", private: true, bin: { svc: "bin/svc.js" } })}\n`),
    textFile("/etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"),
    textFile("/etc/group", "root:x:0:\n"),
    textFile("/etc/nsswitch.conf", NSSWITCH),
  ];
  const directory = (path: string, mode = 0o755): ImageEntry => ({ path, type: "directory", mode, uid: 0, gid: 0 });
  return planOf(
    "server",
    layout([directory("/tmp", 0o1777), directory("/root", 0o700), directory(SERVER_DATA_DIR, 0o700)], files),
    serverImageConfig(inputs.hasCaBundle),
    version,
  );
}

/** `docker import` changes (Dockerfile instructions) for the config. */
export function importChanges(config: ImageConfig): string[] {
  return [
    ...(config.entrypoint ? [`ENTRYPOINT ${JSON.stringify(config.entrypoint)}`] : []),
    `CMD ${JSON.stringify(config.cmd)}`,
    ...Object.entries(config.env).map(([key, value]) => `ENV ${key}=${value}`),
    `WORKDIR ${config.workingDir}`,
    `USER ${config.user}`,
    ...Object.entries(config.labels).map(([key, value]) => `LABEL ${key}=${value}`),
  ];
}

export interface ExistingImage {
  id: string;
  tags: string[];
}

export type ImageAction = { action: "cached"; id: string } | { action: "tag"; id: string } | { action: "build" };

/** Reuse the image built from the same inputs (adding the version tag when it moved elsewhere); else build. */
export function planImageAction(plan: ImagePlan, existing: readonly ExistingImage[]): ImageAction {
  const same = existing.find((image) => image.tags.includes(plan.hashTag));
  if (!same) return { action: "build" };
  return same.tags.includes(plan.versionTag) ? { action: "cached", id: same.id } : { action: "tag", id: same.id };
}
