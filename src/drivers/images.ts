// Worker base images, built locally with no registry: a root filesystem made of this machine's Node binary and
// the shared libraries it links (ldd), CA certificates, a minimal /etc with a non-root user, and the svc worker
// runtime (the dist/ files the runtime reaches plus the production packages it imports), streamed as a tar into
// `docker import` with Cmd/Env/WorkingDir/User/Labels set. The endpoint's artifact is never baked in: drivers
// mount it at run time, so code changes never need an image build.
//
// Images are cached by content hash: `<repo>:<hash>` names exactly one set of inputs, and `<repo>:<svc version>`
// (the manifest's imageName) points at the newest build. Same inputs again: nothing is built.
//
// The server image (`svc-server`, `svc images build --server`) is made the same way from the same Node: svc's
// dist/, bin/ and templates/ and every production package (the native better-sqlite3 included), with `svc server`
// as its entry. It is what `deploy/swarm/svc-stack.yml` runs (docs/cluster.md).
//
// Three steps: collectImageInputs / collectServerInputs (read the host), planWorkerImage / planServerImage /
// planImageAction (pure), applyImagePlan (talks to the engine).
//
// What the images are called is in image-names.ts, the inputs read from the host in image-inputs.ts, the plan in
// image-plan.ts; this module applies a plan to the engine and ensures, lists and prunes images.

import { createReadStream } from "node:fs";
import { pipeline } from "node:stream/promises";
import type Docker from "dockerode";
import tarStream from "tar-stream";
import { UserError, asError } from "../errors.js";
import { SVC_VERSION } from "../version.js";
import { dockerMessage, LABELS } from "./docker-engine.js";
import { FIXED_MTIME, type ImageKind, type WorkerImageKind } from "./image-names.js";
import { collectImageInputs, collectServerInputs, type CollectOptions, type ImageInputs } from "./image-inputs.js";
import { planImageAction, planServerImage, planWorkerImage, importChanges, type ImagePlan } from "./image-plan.js";

function splitTag(tag: string): { repo: string; tag: string } {
  const at = tag.lastIndexOf(":");
  return { repo: tag.slice(0, at), tag: tag.slice(at + 1) };
}

/** The root filesystem as a tar stream (entries in plan order; mtimes fixed). */
export function rootfsTar(plan: ImagePlan): NodeJS.ReadableStream {
  const pack = tarStream.pack();
  void (async () => {
    for (const entry of plan.entries) {
      const header = { name: entry.path.slice(1), mode: entry.mode, uid: entry.uid, gid: entry.gid, mtime: FIXED_MTIME };
      if (entry.type === "directory") {
        pack.entry({ ...header, type: "directory" });
        continue;
      }
      const file = entry.file!;
      if (file.content) {
        pack.entry({ ...header, type: "file", size: file.size }, file.content);
        continue;
      }
      const sink = pack.entry({ ...header, type: "file", size: file.size });
      await pipeline(createReadStream(file.source!), sink);
    }
    pack.finalize();
  })().catch((err: unknown) => pack.destroy(asError(err)));
  // A streamx Readable: pipe() is all dockerode uses.
  return pack as unknown as NodeJS.ReadableStream;
}

const imageTitle = (kind: ImageKind) => (kind === "server" ? "server image" : `${kind} worker image`);

async function importTar(docker: Docker, plan: ImagePlan): Promise<string> {
  const { repo, tag } = splitTag(plan.hashTag);
  let messages: Array<{ status?: string; error?: string; errorDetail?: { message?: string } }>;
  try {
    const progress = await docker.importImage(rootfsTar(plan), { repo, tag, changes: importChanges(plan.config), message: `svc ${imageTitle(plan.kind)}` });
    messages = await new Promise((resolve, reject) =>
      docker.modem.followProgress(progress, (err, output) => (err ? reject(err) : resolve(output as typeof messages))),
    );
  } catch (err) {
    throw new UserError(`Docker could not import the ${imageTitle(plan.kind)}: ${dockerMessage(err)}`, { cause: err });
  }
  const failure = messages.find((m) => m.error || m.errorDetail);
  if (failure) throw new UserError(`Docker could not import the ${imageTitle(plan.kind)}: ${failure.error ?? failure.errorDetail?.message}`);
  const inspected = await docker.getImage(plan.hashTag).inspect();
  return inspected.Id;
}

export async function existingWorkerImages(docker: Docker, kind?: ImageKind): Promise<Docker.ImageInfo[]> {
  return docker.listImages({ filters: { label: [kind ? `${LABELS.imageKind}=${kind}` : LABELS.imageKind] } });
}

export interface EnsuredImage {
  kind: ImageKind;
  id: string;
  /** `<repo>:<svc version>` */
  name: string;
  hashTag: string;
  hash: string;
  /** True when an image with the same inputs already existed (nothing was built). */
  cached: boolean;
  durationMs: number;
}

/**
 * Images of the same kind and svc version that a new build replaced: each is a full root filesystem (~100 MB,
 * one layer), and while svc itself is being developed every compile changes the runtime's hash. Pure.
 */
export function supersededImages(plan: ImagePlan, currentId: string, images: readonly Docker.ImageInfo[]): string[] {
  return images
    .filter(
      (i) => i.Id !== currentId && i.Labels?.[LABELS.imageKind] === plan.kind && i.Labels?.[LABELS.version] === plan.versionTag.slice(plan.repo.length + 1),
    )
    .map((i) => i.Id);
}

export async function applyImagePlan(docker: Docker, plan: ImagePlan): Promise<{ id: string; cached: boolean }> {
  const images = await existingWorkerImages(docker, plan.kind);
  const action = planImageAction(
    plan,
    images.map((i) => ({ id: i.Id, tags: i.RepoTags ?? [] })),
  );
  const id = action.action === "build" ? await importTar(docker, plan) : action.id;
  if (action.action !== "cached") {
    const { repo, tag } = splitTag(plan.versionTag);
    await docker.getImage(id).tag({ repo, tag });
    for (const old of supersededImages(plan, id, images)) {
      // Not forced: the engine keeps an image a container (even a stopped one) still uses.
      await docker
        .getImage(old)
        .remove()
        .catch(() => undefined /* still in use (or gone): kept until a later build */);
    }
  }
  return { id, cached: action.action !== "build" };
}

/** Build (or find cached) the worker image of `kind`. */
export async function ensureWorkerImage(docker: Docker, kind: WorkerImageKind, options: CollectOptions & { inputs?: ImageInputs } = {}): Promise<EnsuredImage> {
  const started = Date.now();
  const inputs = options.inputs ?? (await collectImageInputs(options));
  const plan = planWorkerImage(kind, inputs);
  const { id, cached } = await applyImagePlan(docker, plan);
  return { kind, id, name: plan.versionTag, hashTag: plan.hashTag, hash: plan.hash, cached, durationMs: Date.now() - started };
}

/** Build (or find cached) the server image, `svc-server:<svc version>`. */
export async function ensureServerImage(docker: Docker, options: CollectOptions = {}): Promise<EnsuredImage> {
  const started = Date.now();
  const plan = planServerImage(await collectServerInputs(options));
  const { id, cached } = await applyImagePlan(docker, plan);
  return { kind: "server", id, name: plan.versionTag, hashTag: plan.hashTag, hash: plan.hash, cached, durationMs: Date.now() - started };
}

/** Both kinds share one collection of inputs. */
export async function ensureWorkerImages(docker: Docker, kinds: readonly WorkerImageKind[], options: CollectOptions = {}): Promise<EnsuredImage[]> {
  const inputs = await collectImageInputs(options);
  const out: EnsuredImage[] = [];
  for (const kind of kinds) out.push(await ensureWorkerImage(docker, kind, { ...options, inputs }));
  return out;
}

export interface WorkerImageInfo {
  kind: ImageKind;
  id: string;
  tags: string[];
  hash: string;
  version: string;
  createdAt: string;
  sizeBytes: number;
  /** Containers (running or stopped) made from it. */
  containers: number;
}

export async function listWorkerImages(docker: Docker): Promise<WorkerImageInfo[]> {
  const [images, containers] = await Promise.all([existingWorkerImages(docker), docker.listContainers({ all: true })]);
  const uses = new Map<string, number>();
  for (const c of containers) uses.set(c.ImageID, (uses.get(c.ImageID) ?? 0) + 1);
  return images
    .map((image) => ({
      kind: (image.Labels?.[LABELS.imageKind] ?? "cpu") as ImageKind,
      id: image.Id,
      tags: (image.RepoTags ?? []).filter((t) => t !== "<none>:<none>").sort(),
      hash: image.Labels?.[LABELS.imageHash] ?? "",
      version: image.Labels?.[LABELS.version] ?? "",
      createdAt: new Date(image.Created * 1000).toISOString(),
      sizeBytes: image.Size,
      containers: uses.get(image.Id) ?? 0,
    }))
    .sort((a, b) => (a.kind === b.kind ? b.createdAt.localeCompare(a.createdAt) : a.kind < b.kind ? -1 : 1));
}

/** Which images prune removes: unused ones, keeping those tagged with the current version unless `all`. Pure. */
export function planPrune(images: readonly WorkerImageInfo[], options: { all?: boolean; version?: string } = {}): WorkerImageInfo[] {
  const version = options.version ?? SVC_VERSION;
  return images.filter((image) => image.containers === 0 && (options.all || !image.tags.some((t) => t.endsWith(`:${version}`))));
}

export async function pruneWorkerImages(docker: Docker, options: { all?: boolean } = {}): Promise<{ removed: WorkerImageInfo[]; kept: WorkerImageInfo[] }> {
  const images = await listWorkerImages(docker);
  const doomed = planPrune(images, options);
  const removed: WorkerImageInfo[] = [];
  for (const image of doomed) {
    try {
      // force: an image with several tags (version + hash) is only removable by id that way; unused, checked above.
      await docker.getImage(image.id).remove({ force: true });
      removed.push(image);
    } catch (err) {
      throw new UserError(`Could not remove worker image ${image.tags[0] ?? image.id}: ${dockerMessage(err)}`, { cause: err });
    }
  }
  return { removed, kept: images.filter((i) => !removed.includes(i)) };
}
