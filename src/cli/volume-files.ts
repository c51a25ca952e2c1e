// Files of network volumes from the CLI (`svc volume cp|ls|rm`): the service's S3 API (/s3/<volume>/<key>),
// authenticated with the CLI's own API key as a bearer token, so no access key is needed. What a command
// means is planned from its arguments first (pure); the transfers follow.

import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, readdir, stat } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ApiError, UsageError } from "../errors.js";
import { elements, elementText } from "../service/volumes/s3-xml.js";
import { apiFetch, serviceTarget, type ServiceTarget } from "./target.js";
import { findVolume, noSuchVolume } from "./volume-names.js";

/** Files larger than this go up in parts (S3 refuses a single upload over 5 GiB). */
export const MULTIPART_THRESHOLD = 100 * 1024 * 1024;
export const PART_BYTES = 64 * 1024 * 1024;

export interface VolumePath {
  /** The volume as the user named it: id or name. */
  volume: string;
  /** A key or key prefix ("" for the volume's top). */
  path: string;
}

/**
 * `<volume>:<path>` as a volume path, or undefined for a local path. A local path with a colon in its first
 * segment is written `./a:b`. Pure.
 */
export function parseVolumePath(arg: string): VolumePath | undefined {
  const m = /^([A-Za-z0-9][A-Za-z0-9 ._-]{0,63}):(.*)$/.exec(arg);
  if (!m || arg.startsWith(".") || arg.startsWith("/")) return undefined;
  return { volume: m[1]!, path: m[2]!.replace(/^\/+/, "") };
}

export type CopyPlan = { direction: "up"; local: string; remote: VolumePath } | { direction: "down"; remote: VolumePath; local: string };

/** Which way `svc volume cp <from> <to>` copies: exactly one side is `<volume>:<path>`. Pure. */
export function planCopy(from: string, to: string): CopyPlan {
  const source = parseVolumePath(from);
  const target = parseVolumePath(to);
  if (source && target) throw new UsageError("Both sides name a volume: copy between a local path and <volume>:<path>");
  if (!source && !target)
    throw new UsageError(
      "Neither side names a volume: write one as <volume>:<path> (a volume id or name)",
      "Example: svc volume cp ./weights.bin models:llama/weights.bin",
    );
  return source ? { direction: "down", remote: source, local: to } : { direction: "up", local: from, remote: target! };
}

/** The key a local file goes to: the path given, or under it when it names a folder ("" or ending in "/"). Pure. */
export function uploadKey(path: string, fileName: string): string {
  return path === "" || path.endsWith("/") ? `${path}${fileName}` : path;
}

/** An S3 error answer as the CLI's API error. */
async function failure(response: Response, what: string): Promise<never> {
  const text = await response.text();
  const code = elementText(text, "Code");
  const message = elementText(text, "Message");
  throw new ApiError({
    title: code ?? response.statusText,
    status: response.status,
    detail: `${what}: ${message ?? (text.slice(0, 300) || response.statusText)}`,
  });
}

const encodeKey = (key: string) => key.split("/").map(encodeURIComponent).join("/");

export class VolumeFiles {
  private readonly ids = new Map<string, string>();

  constructor(private readonly target: ServiceTarget = serviceTarget()) {}

  /** A volume's id from its id or name (among the user's own). */
  async volumeId(ref: string): Promise<string> {
    const known = this.ids.get(ref);
    if (known) return known;
    const response = await apiFetch(this.target, "/v2/network-volumes");
    if (!response.ok) await failure(response, "listing your network volumes");
    const volumes = (await response.json()) as Array<{ id: string; name: string }>;
    // Names need not be unique: picking one of several would copy to (or delete from) a volume the user did not mean.
    const found = findVolume(volumes, ref);
    if (!found) throw noSuchVolume(volumes, ref);
    this.ids.set(ref, found.id);
    return found.id;
  }

  private async s3(method: string, volumeId: string, key: string, init: RequestInit & { query?: string } = {}): Promise<Response> {
    const path = `/s3/${volumeId}${key === "" ? "" : `/${encodeKey(key)}`}${init.query ? `?${init.query}` : ""}`;
    return apiFetch(this.target, path, { ...init, method });
  }

  /** Upload one file to a key; parts for a large one. */
  async upload(localFile: string, volumeId: string, key: string): Promise<number> {
    const size = (await stat(localFile)).size;
    if (size <= MULTIPART_THRESHOLD) {
      const response = await this.s3("PUT", volumeId, key, {
        body: Readable.toWeb(createReadStream(localFile)) as ReadableStream,
        headers: { "content-length": String(size) },
        duplex: "half",
      } as RequestInit);
      if (!response.ok) await failure(response, `uploading ${localFile}`);
      return size;
    }
    const created = await this.s3("POST", volumeId, key, { query: "uploads" });
    if (!created.ok) await failure(created, `starting the upload of ${localFile}`);
    const uploadId = elementText(await created.text(), "UploadId")!;
    try {
      const parts: string[] = [];
      for (let n = 1, at = 0; at < size; n++, at += PART_BYTES) {
        const end = Math.min(size, at + PART_BYTES);
        const response = await this.s3("PUT", volumeId, key, {
          query: `partNumber=${n}&uploadId=${uploadId}`,
          body: Readable.toWeb(createReadStream(localFile, { start: at, end: end - 1 })) as ReadableStream,
          headers: { "content-length": String(end - at) },
          duplex: "half",
        } as RequestInit);
        if (!response.ok) await failure(response, `uploading part ${n} of ${localFile}`);
        parts.push(`<Part><PartNumber>${n}</PartNumber><ETag>${response.headers.get("etag")!.replace(/&/g, "&amp;").replace(/</g, "&lt;")}</ETag></Part>`);
      }
      const done = await this.s3("POST", volumeId, key, {
        query: `uploadId=${uploadId}`,
        body: `<CompleteMultipartUpload>${parts.join("")}</CompleteMultipartUpload>`,
      });
      if (!done.ok) await failure(done, `completing the upload of ${localFile}`);
    } catch (err) {
      // Best effort: an upload left unaborted only keeps its parts until aborted; the error that matters is rethrown.
      await this.s3("DELETE", volumeId, key, { query: `uploadId=${uploadId}` }).catch(() => undefined);
      throw err;
    }
    return size;
  }

  /** Download a key into a local file (its folders made). */
  async download(volumeId: string, key: string, localFile: string): Promise<number> {
    const response = await this.s3("GET", volumeId, key);
    if (!response.ok) await failure(response, `downloading ${key}`);
    await mkdir(dirname(localFile), { recursive: true });
    let size = 0;
    const body = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream);
    body.on("data", (chunk: Buffer) => (size += chunk.length));
    await pipeline(body, createWriteStream(localFile));
    return size;
  }

  /** Whether a key is a file of the volume. */
  async exists(volumeId: string, key: string): Promise<boolean> {
    const response = await this.s3("HEAD", volumeId, key);
    if (response.status === 404) return false;
    if (!response.ok) await failure(response, `looking for ${key}`);
    return true;
  }

  /** Files (and, with `delimiter`, folders) under a prefix, every page. */
  async list(
    volumeId: string,
    prefix: string,
    delimiter?: string,
  ): Promise<{ objects: Array<{ key: string; size: number; lastModified: string }>; folders: string[] }> {
    const objects: Array<{ key: string; size: number; lastModified: string }> = [];
    const folders: string[] = [];
    let token: string | undefined;
    do {
      const query = new URLSearchParams({ "list-type": "2", prefix, ...(delimiter ? { delimiter } : {}), ...(token ? { "continuation-token": token } : {}) });
      const response = await this.s3("GET", volumeId, "", { query: query.toString().replace(/\+/g, "%20") });
      if (!response.ok) await failure(response, "listing the volume");
      const xml = await response.text();
      for (const c of elements(xml, "Contents"))
        objects.push({ key: elementText(c, "Key")!, size: Number(elementText(c, "Size")), lastModified: elementText(c, "LastModified")! });
      for (const p of elements(xml, "CommonPrefixes")) folders.push(elementText(p, "Prefix")!);
      token = elementText(xml, "IsTruncated") === "true" ? elementText(xml, "NextContinuationToken") : undefined;
    } while (token);
    return { objects, folders };
  }

  async remove(volumeId: string, key: string): Promise<void> {
    const response = await this.s3("DELETE", volumeId, key);
    if (!response.ok) await failure(response, `deleting ${key}`);
  }
}

/** Every file under a local folder, as paths relative to it with "/" separators. */
export async function localFiles(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string) => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) await walk(path);
      else if (e.isFile()) out.push(relative(root, path).split(sep).join("/"));
    }
  };
  await walk(root);
  return out.sort();
}
