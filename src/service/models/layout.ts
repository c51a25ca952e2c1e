// Where a model's files go in the host's model cache, laid out exactly as the `huggingface_hub` library lays out
// its own cache, so that library (and transformers, diffusers...) finds them offline with HF_HUB_CACHE pointing
// at it:
//
//   <root>/hub/models--<org>--<name>/blobs/<etag>                   one file's bytes, named by its etag (the
//                                                                    sha256 of an LFS file, else its git blob id)
//   <root>/hub/models--<org>--<name>/snapshots/<commit>/<file>      a relative link to its blob
//   <root>/hub/models--<org>--<name>/refs/<revision>                the commit a branch or tag named
//
// and svc's own index of what it fetched (<root>/svc-models.json). All pure: the I/O is in cache.ts.

import { posix } from "node:path";
import type { ModelRef } from "svc/internal";

/** The folder of the cache that huggingface_hub reads (HF_HUB_CACHE), under the cache's root (HF_HOME). */
export const HUB_DIR = "hub";
/** svc's index of the models in the cache: sizes, when each was last used. */
export const INDEX_FILE = "svc-models.json";

/** One file of a model's revision as the hub lists it. */
export interface ModelFile {
  /** Its path in the repository ("config.json", "onnx/model.onnx"). */
  name: string;
  size: number;
  /** Its blob's name in the cache: the sha256 of an LFS file, the git blob id of another. */
  etag: string;
  /** The sha256 the hub gives for an LFS file: the fetched bytes must have it. */
  sha256?: string;
}

/** A model's revision as the hub resolves it: its commit and files. */
export interface ModelListing {
  commit: string;
  files: ModelFile[];
}

/** huggingface_hub's folder of a model repository: "models--org--name". Pure. */
export function repoFolderName(repo: string): string {
  return `models--${repo.split("/").join("--")}`;
}

/** The paths of one model file in the cache, relative to the hub folder (HF_HUB_CACHE). Pure. */
export function filePaths(repo: string, commit: string, file: ModelFile): { blob: string; partial: string; link: string; target: string } {
  const folder = repoFolderName(repo);
  const link = posix.join(folder, "snapshots", commit, file.name);
  const blob = posix.join(folder, "blobs", file.etag);
  // Relative, as huggingface_hub makes them: the cache can be mounted anywhere.
  return { blob, partial: `${blob}.incomplete`, link, target: posix.relative(posix.dirname(link), blob) };
}

/** The ref file of a branch or tag (none for a commit named as the revision). Pure. */
export function refPath(ref: ModelRef, commit: string): string | undefined {
  return ref.revision === commit ? undefined : posix.join(repoFolderName(ref.repo), "refs", ref.revision);
}

/** The snapshot folder of a commit. Pure. */
export function snapshotPath(repo: string, commit: string): string {
  return posix.join(repoFolderName(repo), "snapshots", commit);
}

const ETAG = /^[0-9a-f]{40}$|^[0-9a-f]{64}$/;
const COMMIT = /^[0-9a-f]{40}$/;

/**
 * What is wrong with a listing the hub gave, before anything is written from it (a file name that climbs out of
 * the snapshot, an etag that is no hash, a commit that is no commit); empty: nothing. Pure.
 */
export function listingProblems(listing: ModelListing): string[] {
  const problems: string[] = [];
  if (!COMMIT.test(listing.commit)) problems.push(`the hub named commit "${listing.commit}", which is not a 40-digit hash`);
  for (const f of listing.files) {
    const parts = f.name.split("/");
    if (f.name.startsWith("/") || parts.some((p) => p === "" || p === "." || p === "..") || f.name.includes("\\") || f.name.includes("\0"))
      problems.push(`the hub listed a file "${f.name}" whose path leaves the snapshot`);
    if (!ETAG.test(f.etag)) problems.push(`the hub gave file "${f.name}" the etag "${f.etag}", which is no hash`);
    if (!Number.isSafeInteger(f.size) || f.size < 0) problems.push(`the hub gave file "${f.name}" no size`);
    if (f.sha256 !== undefined && !/^[0-9a-f]{64}$/.test(f.sha256)) problems.push(`the hub gave file "${f.name}" the sha256 "${f.sha256}", which is no sha256`);
  }
  return problems;
}

/** The listing's bytes, each blob once (two names of one content share a blob). Pure. */
export function listingBytes(listing: ModelListing): number {
  const blobs = new Map(listing.files.map((f) => [f.etag, f.size]));
  let total = 0;
  for (const size of blobs.values()) total += size;
  return total;
}

/** A byte count as the status line says it: "120 MB", "1.5 GB", "900 kB". Pure. */
export function formatBytes(bytes: number): string {
  const units: Array<[number, string]> = [
    [1e12, "TB"],
    [1e9, "GB"],
    [1e6, "MB"],
    [1e3, "kB"],
  ];
  for (const [size, unit] of units) if (bytes >= size) return `${Number((bytes / size).toFixed(bytes >= 10 * size ? 0 : 1))} ${unit}`;
  return `${bytes} B`;
}

/** "120 of 200 MB": done and total in the total's unit. Pure. */
export function progressText(done: number, total: number): string {
  const unit = formatBytes(total).split(" ")[1]!;
  const scale = { TB: 1e12, GB: 1e9, MB: 1e6, kB: 1e3, B: 1 }[unit]!;
  const whole = (n: number) => Number((n / scale).toFixed(total >= 10 * scale ? 0 : 1));
  return `${whole(done)} of ${whole(total)} ${unit}`;
}
