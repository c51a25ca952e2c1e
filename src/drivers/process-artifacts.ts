// The process driver's artifact cache: each artifact extracted once (and per content, verified against the sha256
// it was deployed with) into a directory only the service can write, which workers get as SVC_ARTIFACT_DIR; a
// sandboxed pooled runtime gets those files linked into the code directory of its slot. Apart from the driver
// (process.ts) because what workers may read of the host is decided here.

import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { copyFile, link, mkdir, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { extractArtifactCached } from "../artifact/extract.js";

/**
 * Fill `dest` with `source`'s tree: hard links (the cache's verified files, no copy), copies where the two are on
 * different file systems.
 */
export async function linkTree(source: string, dest: string): Promise<void> {
  for (const entry of await readdir(source, { withFileTypes: true })) {
    const from = join(source, entry.name);
    const to = join(dest, entry.name);
    if (entry.isDirectory()) {
      await mkdir(to, { mode: 0o755 });
      await linkTree(from, to);
    } else if (entry.isFile()) {
      try {
        await link(from, to);
      } catch (err) {
        if (!["EXDEV", "EPERM", "EMLINK"].includes((err as NodeJS.ErrnoException).code ?? "")) throw err;
        await copyFile(from, to);
      }
    }
  }
}

/**
 * Make `dir` a directory only the service can open. One that exists with looser modes (an earlier version's
 * cache, which workers could write) is emptied first: what is in it may not be what its owners deployed.
 */
function privateDir(dir: string): void {
  if (existsSync(dir) && (statSync(dir).mode & 0o077) !== 0) {
    for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/** The sha256 an artifact was deployed with, when its file is named by it (the service keeps them so). Pure. */
export function deployedSha256(artifactPath: string): string | undefined {
  return /^([a-f0-9]{64})\.tar\.gz$/.exec(basename(artifactPath))?.[1];
}

export interface ArtifactDirs {
  /** The cache's directory, made (0700) on first use. */
  root(): string;
  /** The directory `artifactPath` is extracted to, extracted on first use. */
  dir(artifactPath: string): Promise<string>;
  /** Remove the cache if it is the driver's own (none was given). */
  close(): void;
}

/** The extracted artifacts in `cacheDir` (default: a directory of the driver's own under the system's tmp). */
export function createArtifactDirs(cacheDir: string | undefined): ArtifactDirs {
  // The cache is made on first use: a driver is created before the service checks its data directory.
  const ownsCache = cacheDir === undefined;
  let dir = cacheDir;
  let cacheReady = false;
  const extracted = new Map<string, Promise<string>>();
  const root = () => {
    dir ??= mkdtempSync(join(tmpdir(), "svc-artifact-cache-"));
    if (!cacheReady) privateDir(dir);
    cacheReady = true;
    return dir;
  };
  return {
    root,
    dir(artifactPath) {
      let pending = extracted.get(artifactPath);
      if (!pending) {
        pending = extractArtifactCached(artifactPath, root(), { sha256: deployedSha256(artifactPath) });
        extracted.set(artifactPath, pending);
        pending.catch(() => extracted.delete(artifactPath));
      }
      return pending;
    },
    close() {
      if (ownsCache && dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
