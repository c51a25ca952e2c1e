// `svc images build|list|prune`: the worker base images, built locally from this machine's Node and the svc
// runtime, cached by content hash; `--server` also builds the image of `svc server` itself (deploy/swarm/);
// `--registry` pushes them for engines that run them by digest (registry.ts). The work is in
// src/drivers/images.ts; this file parses flags and renders.

import type { Command } from "commander";
import { connectDocker } from "../../drivers/docker-engine.js";
import { ensureServerImage, ensureWorkerImages, listWorkerImages, pruneWorkerImages, type EnsuredImage, type WorkerImageInfo } from "../../drivers/images.js";
import { WORKER_IMAGE_KINDS, type ImageKind } from "../../drivers/image-names.js";
import { alignRows, alignTable, createOutput, formatDuration } from "../output.js";
import { pushWorkerImage, registryProblem, type PushedImage } from "../../drivers/registry.js";
import { UsageError } from "../../errors.js";

interface BuildFlags {
  cpu?: boolean;
  gpu?: boolean;
  server?: boolean;
  all?: boolean;
  registry?: string;
  json?: boolean;
}

/** Which images `svc images build` builds: the flags given; no flag: both worker images. Pure. */
export function kindsFromFlags(flags: BuildFlags): ImageKind[] {
  const noWorkerFlag = !flags.cpu && !flags.gpu;
  const workers = flags.all || (noWorkerFlag && !flags.server) ? [...WORKER_IMAGE_KINDS] : WORKER_IMAGE_KINDS.filter((kind) => flags[kind]);
  return flags.server ? [...workers, "server"] : workers;
}

const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

export function renderBuilt(images: readonly EnsuredImage[]): string {
  return alignRows(
    images.map((i) => [
      i.name,
      i.hashTag.split(":")[1]!,
      i.id.replace(/^sha256:/, "").slice(0, 12),
      i.cached ? "cached" : `built in ${formatDuration(i.durationMs)}`,
    ]),
  ).join("\n");
}

export function renderList(images: readonly WorkerImageInfo[]): string {
  if (images.length === 0) return "No svc worker images. Build them with `svc images build`.";
  const rows = images.map((i) => [
    i.kind,
    i.tags.join(", ") || "<untagged>",
    i.id.replace(/^sha256:/, "").slice(0, 12),
    megabytes(i.sizeBytes),
    i.createdAt,
    String(i.containers),
  ]);
  return alignTable(["KIND", "TAGS", "ID", "SIZE", "CREATED", "CONTAINERS"], rows);
}

export function register(program: Command): void {
  const images = program
    .command("images")
    .description("Build, list and prune the worker images and the server image (built locally; pushed to a registry with --registry)");

  images
    .command("build")
    .description("Build the worker images from this machine's Node and the svc runtime (cached: unchanged inputs build nothing)")
    .option("--cpu", "the CPU image (svc-worker-cpu)")
    .option("--gpu", "the GPU image (svc-worker-gpu)")
    .option("--all", "both worker images (the default)")
    .option("--server", "the image of `svc server` itself (svc-server), as deploy/swarm/svc-stack.yml runs it")
    .option("--registry <host:port>", "then push them to this registry (drivers given it run them by digest)")
    .option("--json", "print the images as JSON")
    .action(async (flags: BuildFlags) => {
      const out = createOutput({ json: flags.json });
      const problem = flags.registry === undefined ? undefined : registryProblem(flags.registry);
      if (problem) throw new UsageError(`--registry ${problem}`, "Pass the registry's host and port, e.g. --registry 127.0.0.1:5000.");
      const docker = await connectDocker();
      const kinds = kindsFromFlags(flags);
      const workerKinds = kinds.filter((kind) => kind !== "server");
      const built =
        workerKinds.length === 0
          ? []
          : await out.step(`Building worker image${workerKinds.length > 1 ? "s" : ""} (${workerKinds.join(", ")})`, () =>
              ensureWorkerImages(docker, workerKinds),
            );
      if (kinds.includes("server")) built.push(await out.step("Building the server image", () => ensureServerImage(docker)));
      if (!flags.registry) return out.result(built, () => renderBuilt(built));
      const registry = flags.registry;
      const pushed: PushedImage[] = [];
      for (const image of built) pushed.push(await out.step(`Pushing ${image.name} to ${registry}`, () => pushWorkerImage(docker, image, registry)));
      const rows = built.map((image, i) => ({ ...image, pushed: pushed[i]! }));
      out.result(rows, () => `${renderBuilt(built)}\n${alignRows(pushed.map((p) => [p.tag, p.reference])).join("\n")}`);
    });

  images
    .command("list")
    .description("List the svc worker and server images in the local engine")
    .option("--json", "print the images as JSON")
    .action(async (flags: { json?: boolean }) => {
      const out = createOutput({ json: flags.json });
      const list = await listWorkerImages(await connectDocker());
      out.result(list, () => renderList(list));
    });

  images
    .command("prune")
    .description("Remove svc images no container uses (those of this svc version are kept unless --all)")
    .option("--all", "also remove unused images of this svc version")
    .option("--json", "print what was removed as JSON")
    .action(async (flags: { all?: boolean; json?: boolean }) => {
      const out = createOutput({ json: flags.json });
      const result = await pruneWorkerImages(await connectDocker(), { all: flags.all });
      out.result({ removed: result.removed, kept: result.kept.length }, () =>
        result.removed.length === 0
          ? "Nothing to prune."
          : `Removed ${result.removed.length} image(s):\n${result.removed.map((i) => `  ${i.tags.join(", ") || i.id}`).join("\n")}`,
      );
    });
}
