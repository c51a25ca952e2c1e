// Worker images through a registry: `svc images build --registry host:port` pushes the locally built images;
// a driver given the registry runs `<registry>/<repo>@sha256:<digest>`, pulling it where the engine does not
// have it. A digest names exactly the bytes pushed, so every node of a cluster runs the same image, and a tag
// moved later changes nothing that is running.

import type Docker from "dockerode";
import { UserError, errorMessage } from "../errors.js";
import { SVC_VERSION } from "../version.js";
import { dockerMessage } from "./docker-engine.js";
import { imageRepo, type ImageKind, type WorkerImageKind } from "./image-names.js";
import type { EnsuredImage } from "./images.js";

export interface PushedImage {
  kind: ImageKind;
  /** `<registry>/<repo>:<svc version>` */
  tag: string;
  /** `<registry>/<repo>@sha256:...`: what drivers run. */
  reference: string;
  digest: string;
}

/** `host:port` as given, without a scheme or a path. Pure. */
export function registryProblem(registry: string): string | undefined {
  return /^[a-z0-9.-]+(:\d{1,5})?$/i.test(registry) ? undefined : `"${registry}" is not a registry address (host or host:port, e.g. 127.0.0.1:5000)`;
}

/** Where an image of `kind` lives in `registry`, by svc version. Pure. */
export function registryTag(registry: string, kind: ImageKind, version = SVC_VERSION): { repo: string; tag: string } {
  return { repo: `${registry}/${imageRepo(kind)}`, tag: version };
}

/** Follow a push or pull stream to its end; the digest a push reports; an error event is thrown. */
async function follow(docker: Docker, stream: NodeJS.ReadableStream): Promise<string | undefined> {
  let digest: string | undefined;
  await new Promise<void>((resolve, reject) => {
    docker.modem.followProgress(
      stream,
      (err: Error | null) => (err ? reject(err) : resolve()),
      (event: { error?: string; aux?: { Digest?: string } }) => {
        if (event.aux?.Digest) digest = event.aux.Digest;
        if (event.error) reject(new Error(event.error));
      },
    );
  });
  return digest;
}

export async function pushWorkerImage(docker: Docker, image: EnsuredImage, registry: string): Promise<PushedImage> {
  const { repo, tag } = registryTag(registry, image.kind);
  await docker.getImage(image.id).tag({ repo, tag });
  let digest: string | undefined;
  try {
    digest = await follow(docker, await docker.getImage(`${repo}:${tag}`).push({ tag }));
  } catch (err) {
    // The registry's name for the image means nothing where the push failed: do not leave it in the engine.
    await docker
      .getImage(`${repo}:${tag}`)
      .remove({ noprune: true })
      .catch((removeErr: unknown) => process.emitWarning(`svc: could not remove the tag ${repo}:${tag}: ${dockerMessage(removeErr)}`));
    throw new UserError(`Could not push ${repo}:${tag} to ${registry}: ${dockerMessage(err)}`, {
      hint: "Check that the registry runs and answers at that address, and that this engine may push to it (a registry not on loopback needs TLS or an insecure-registries entry).",
      cause: err,
    });
  }
  if (!digest) throw new UserError(`The registry at ${registry} did not report a digest for ${repo}:${tag}`);
  return { kind: image.kind, tag: `${repo}:${tag}`, reference: `${repo}@${digest}`, digest };
}

/** The digest the registry holds for `repo:tag` (its manifest's), or undefined when it has none. */
export async function registryDigest(registry: string, repo: string, tag: string): Promise<string | undefined> {
  const name = repo.slice(registry.length + 1);
  const response = await fetch(`http://${registry}/v2/${name}/manifests/${encodeURIComponent(tag)}`, {
    method: "HEAD",
    headers: { accept: "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json" },
    signal: AbortSignal.timeout(10_000),
  });
  if (response.status === 404) return undefined;
  if (!response.ok) throw new Error(`the registry answered ${response.status} for ${repo}:${tag}`);
  return response.headers.get("docker-content-digest") ?? undefined;
}

/** The image a driver runs for `kind` from `registry`, by digest, pulled into this engine when missing. */
export async function registryWorkerImage(docker: Docker, registry: string, kind: WorkerImageKind): Promise<string> {
  const { repo, tag } = registryTag(registry, kind);
  let digest: string | undefined;
  try {
    digest = await registryDigest(registry, repo, tag);
  } catch (err) {
    throw new UserError(`Could not ask the registry at ${registry} for ${repo}:${tag}: ${errorMessage(err)}`, {
      hint: "Check that the registry runs at that address.",
      cause: err,
    });
  }
  if (!digest)
    throw new UserError(`The registry at ${registry} has no ${repo}:${tag}`, { hint: `Push the worker images first: svc images build --registry ${registry}` });
  const reference = `${repo}@${digest}`;
  const present = await docker
    .getImage(reference)
    .inspect()
    .then(() => true)
    .catch(() => false);
  if (!present) {
    try {
      await follow(docker, await docker.pull(reference));
    } catch (err) {
      throw new UserError(`Could not pull ${reference}: ${dockerMessage(err)}`, { cause: err });
    }
  }
  return reference;
}
