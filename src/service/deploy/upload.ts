// issue 5: receiving a build artifact. The body is streamed to a temporary file while it is hashed and
// counted; it is accepted only when its size is within the limit, its sha256 is the one the client announced,
// and it is a gzip tar holding a readable svc_manifest.json.

import { createHash } from "node:crypto";
import { createReadStream, createWriteStream, existsSync } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import tarStream from "tar-stream";
import { MANIFEST_FILE, type Manifest } from "../../sdk/manifest.js";
import { HttpProblem } from "../http.js";

/** The spec's deployment artifact limit: 1.5 GB. */
export const MAX_ARTIFACT_BYTES = 1_500_000_000;

export function artifactLimit(env: NodeJS.ProcessEnv = process.env): number {
  const value = Number(env.SVC_MAX_ARTIFACT_BYTES);
  return Number.isInteger(value) && value > 0 ? value : MAX_ARTIFACT_BYTES;
}

export interface ReceivedArtifact {
  sha256: string;
  size: number;
  path: string;
  manifest: Manifest;
}

/** Stream the request body into `<dataDir>/artifacts/<sha256>.tar.gz`, checking as it goes. */
export async function receiveArtifact(req: IncomingMessage, dataDir: string, expectedSha: string, maxBytes: number): Promise<ReceivedArtifact> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > maxBytes) {
    req.resume();
    throw new HttpProblem(413, `The artifact is ${declared} bytes; the limit is ${maxBytes} bytes`);
  }
  const dir = join(dataDir, "artifacts");
  await mkdir(dir, { recursive: true });
  const temp = join(dir, `upload-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}.tmp`);
  const hash = createHash("sha256");
  let size = 0;
  try {
    await pipeline(
      req,
      async function* (source: AsyncIterable<Buffer>) {
        for await (const chunk of source) {
          size += chunk.length;
          if (size > maxBytes) throw new HttpProblem(413, `The artifact is larger than the limit of ${maxBytes} bytes`);
          hash.update(chunk);
          yield chunk;
        }
      },
      createWriteStream(temp),
    );
    const sha256 = hash.digest("hex");
    if (sha256 !== expectedSha) {
      throw new HttpProblem(422, "The artifact's checksum does not match", { errors: [`x-svc-sha256 says ${expectedSha}, the body's sha256 is ${sha256}`] });
    }
    const manifest = await readManifest(temp);
    const path = join(dir, `${sha256}.tar.gz`);
    if (existsSync(path)) await rm(temp, { force: true });
    else await rename(temp, path);
    return { sha256, size, path, manifest };
  } catch (err) {
    await rm(temp, { force: true });
    if (err instanceof HttpProblem) throw err;
    // The client went away mid-upload (it will retry): nothing was accepted.
    throw new HttpProblem(400, `The upload did not complete: ${(err as Error).message}`);
  }
}

/** The manifest inside an artifact; a 422 when the file is not a gzip tar holding one. */
export async function readManifest(file: string): Promise<Manifest> {
  let text: string | undefined;
  const extract = tarStream.extract();
  extract.on("entry", (header, stream, next) => {
    const name = header.name.replace(/^\.\//, "");
    if (name === MANIFEST_FILE && header.type === "file") {
      const parts: Buffer[] = [];
      stream.on("data", (d: unknown) => parts.push(d as Buffer));
      stream.on("end", () => {
        text = Buffer.concat(parts).toString("utf8");
        next();
      });
    } else {
      stream.on("end", () => next());
      stream.resume();
    }
  });
  try {
    await pipeline(createReadStream(file), createGunzip(), extract);
  } catch (err) {
    throw new HttpProblem(422, "The artifact is not a gzip tar archive", { errors: [(err as Error).message] });
  }
  if (text === undefined) throw new HttpProblem(422, `The artifact has no ${MANIFEST_FILE}`, { errors: ["build it with `svc build`"] });
  let manifest: Manifest;
  try {
    manifest = JSON.parse(text) as Manifest;
  } catch {
    throw new HttpProblem(422, `The artifact's ${MANIFEST_FILE} is not valid JSON`);
  }
  if (!manifest || typeof manifest.resources !== "object" || manifest.resources === null || typeof manifest.fingerprint !== "string") {
    throw new HttpProblem(422, `The artifact's ${MANIFEST_FILE} is not a svc manifest`, { errors: ["resources and fingerprint are required"] });
  }
  manifest.routes ??= {};
  return manifest;
}
