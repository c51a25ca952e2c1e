// Receiving a build artifact: one pass over the body (hash, size, a temporary file, and the archive read with a
// worker's rules), bounded in bytes, expansion, entries, manifest size and idle time; see receiveArtifact.

import { createHash } from "node:crypto";
import { once } from "node:events";
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, readdir, rename, rm } from "node:fs/promises";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../store/private-files.js";
import type { IncomingMessage } from "node:http";
import { join } from "node:path";
import { DEFAULT_EXTRACT_LIMITS } from "../../artifact/extract.js";
import { ArchiveInspector, ArchiveRefused, DEFAULT_MANIFEST_LIMIT, type InspectLimits } from "../../artifact/inspect.js";
import { MANIFEST_FILE, type Manifest } from "svc/internal";
import { OVERSIZE_DRAIN_BYTES } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import { errorMessage } from "../../errors.js";

/** The spec's deployment artifact limit: 1.5 GB. */
export const MAX_ARTIFACT_BYTES = 1_500_000_000;

export interface ReceivedArtifact {
  sha256: string;
  size: number;
  path: string;
  manifest: Manifest;
}

/** An upload that sends nothing for this long is cut off (408): it holds a temporary file and a request slot. */
export const UPLOAD_IDLE_MS = 60_000;

export interface UploadLimits {
  /** Compressed bytes (the artifact limit). */
  maxBytes: number;
  /** How the archive may expand; defaults: the worker's extraction limits, the manifest at 4 MiB. */
  inspect?: Partial<InspectLimits>;
  idleMs?: number;
}

/** `upload-*.tmp` files an earlier process left behind (a crash mid-upload): removed at start. How many. */
export async function sweepUploads(dataDir: string): Promise<number> {
  const dir = join(dataDir, "artifacts");
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    // No artifacts directory yet: nothing was ever uploaded.
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw err;
  }
  const stale = names.filter((n) => /^upload-.*\.tmp$/.test(n));
  await Promise.all(stale.map((n) => rm(join(dir, n), { force: true })));
  return stale.length;
}

/** Read and discard what is left of a refused body (up to a cap) so the client reads the answer. */
async function drainRest(req: IncomingMessage): Promise<void> {
  if (req.readableEnded || req.destroyed) return;
  let read = 0;
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    req.on("data", (chunk: Buffer) => {
      read += chunk.length;
      if (read > OVERSIZE_DRAIN_BYTES) {
        stop();
        setImmediate(() => req.destroy());
      }
    });
    req.once("end", stop);
    req.once("close", stop);
    req.once("error", stop);
    req.resume();
  });
}

/**
 * Read the request body once, as it arrives: hash and count it, write it to a temporary file, and inspect the
 * archive inside with a worker's rules (ArchiveInspector). Accepted only when it is within every limit, its
 * sha256 is the one announced, and it is a gzip tar of files and directories holding a readable svc manifest;
 * then it moves to `<dataDir>/artifacts/<sha256>.tar.gz`. Nothing of a refused upload is kept.
 */
export async function receiveArtifact(req: IncomingMessage, dataDir: string, expectedSha: string, limits: UploadLimits): Promise<ReceivedArtifact> {
  const maxBytes = limits.maxBytes;
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > maxBytes) {
    req.resume();
    throw new HttpProblem(413, `The artifact is ${declared} bytes; the limit is ${maxBytes} bytes`, { headers: { connection: "close" } });
  }
  const dir = join(dataDir, "artifacts");
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const temp = join(dir, `upload-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}.tmp`);
  const hash = createHash("sha256");
  const inspector = new ArchiveInspector({ ...DEFAULT_EXTRACT_LIMITS, maxManifestBytes: DEFAULT_MANIFEST_LIMIT, ...limits.inspect });
  // Readable by workers: a container runs as another user and reads the artifact from a mount.
  const out = createWriteStream(temp, { mode: PRIVATE_FILE_MODE });
  const outFailed = new Promise<never>((_, reject) => out.once("error", reject));
  outFailed.catch(() => undefined /* raced below: only keeps an early failure from going unhandled */);
  let size = 0;
  let idle: NodeJS.Timeout | undefined;
  const idleMs = limits.idleMs ?? UPLOAD_IDLE_MS;
  const stalled = new Promise<never>((_, reject) => {
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(
        () => reject(new HttpProblem(408, `The upload sent nothing for ${Math.round(idleMs / 1000)} s; it was cut off`, { headers: { connection: "close" } })),
        idleMs,
      );
    };
    arm();
    req.on("data", arm);
  });
  stalled.catch(() => undefined /* raced below: only keeps an early failure from going unhandled */);
  try {
    // Chunk by chunk, the request paused while one is written and inspected. Not `for await`: leaving that loop
    // destroys the request, and a refused body must still be read to its end for the client to get the answer.
    const reading = new Promise<void>((resolve, reject) => {
      let failed = false;
      let queue = Promise.resolve();
      const onData = (chunk: Buffer) => {
        if (failed) return;
        req.pause();
        queue = queue
          .then(async () => {
            size += chunk.length;
            if (size > maxBytes) throw new HttpProblem(413, `The artifact is larger than the limit of ${maxBytes} bytes`, { headers: { connection: "close" } });
            hash.update(chunk);
            if (!out.write(chunk)) await Promise.race([once(out, "drain"), outFailed]);
            await inspector.write(chunk);
          })
          .then(
            () => void req.resume(),
            (err: unknown) => {
              failed = true;
              req.off("data", onData);
              reject(err);
            },
          );
      };
      req.on("data", onData);
      req.once("end", () => void queue.then(resolve, reject));
      req.once("error", reject);
      req.once("aborted", () => reject(new Error("the client aborted the upload")));
    });
    reading.catch(() => undefined /* raced below: only keeps an early failure from going unhandled */);
    await Promise.race([reading, stalled, outFailed]);
    out.end();
    await Promise.race([once(out, "finish"), outFailed]);
    const sha256 = hash.digest("hex");
    if (sha256 !== expectedSha) {
      throw new HttpProblem(422, "The artifact's checksum does not match", { errors: [`x-svc-sha256 says ${expectedSha}, the body's sha256 is ${sha256}`] });
    }
    const inspection = await inspector.end();
    const manifest = parseManifest(inspection.manifest);
    const path = join(dir, `${sha256}.tar.gz`);
    if (existsSync(path)) await rm(temp, { force: true });
    else await rename(temp, path);
    return { sha256, size, path, manifest };
  } catch (err) {
    inspector.abort();
    out.destroy();
    await rm(temp, { force: true });
    const refusal =
      err instanceof HttpProblem
        ? err
        : err instanceof ArchiveRefused
          ? new HttpProblem(err.status, err.message, { errors: err.entries, headers: { connection: "close" } })
          : // The client went away mid-upload (it will retry): nothing was accepted.
            new HttpProblem(400, `The upload did not complete: ${errorMessage(err)}`);
    // Let a client that writes its whole body before reading get the answer (one that stalled sends no more).
    if (refusal.status !== 400 && refusal.status !== 408) await drainRest(req);
    throw refusal;
  } finally {
    clearTimeout(idle);
  }
}

/** The manifest's text as a svc manifest, or a 422 saying what is wrong. */
export function parseManifest(text: string | undefined): Manifest {
  if (text === undefined) throw new HttpProblem(422, `The artifact has no ${MANIFEST_FILE}`, { errors: ["build it with `svc build`"] });
  let manifest: Manifest;
  try {
    manifest = JSON.parse(text) as Manifest;
  } catch {
    throw new HttpProblem(422, `The artifact's ${MANIFEST_FILE} is not valid JSON`);
  }
  if (
    !manifest ||
    typeof manifest !== "object" ||
    typeof manifest.resources !== "object" ||
    manifest.resources === null ||
    typeof manifest.fingerprint !== "string"
  ) {
    throw new HttpProblem(422, `The artifact's ${MANIFEST_FILE} is not a svc manifest`, { errors: ["resources and fingerprint are required"] });
  }
  manifest.routes ??= {};
  return manifest;
}
