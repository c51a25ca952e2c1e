// Safe extraction of a deployment artifact (.tar.gz). The artifact comes from a user's build and, for remote
// workers, over the network: treat it as hostile. Only regular files and directories are written; links,
// devices, absolute or escaping paths are refused; size, entry count and compression ratio are bounded.
// Extraction goes to a temporary sibling directory that is renamed into place only when complete, so a
// failure never leaves a partial tree behind.

import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { basename, dirname, join, resolve, sep } from "node:path";
import { get as httpGet, type IncomingMessage } from "node:http";
import { get as httpsGet } from "node:https";
import tarStream from "tar-stream";
import { UserError, errorMessage } from "../errors.js";

export interface ExtractLimits {
  /** Total uncompressed bytes of all files (default 4 GiB). */
  maxBytes: number;
  /** Number of tar entries, directories included (default 200 000). */
  maxEntries: number;
  /** Refuse when uncompressed/compressed exceeds this... (default 200) */
  maxRatio: number;
  /** ...once at least this many bytes have been unpacked (default 16 MiB): small inputs may compress well. */
  ratioMinBytes: number;
}

export const DEFAULT_EXTRACT_LIMITS: ExtractLimits = {
  maxBytes: 4 * 1024 ** 3,
  maxEntries: 200_000,
  maxRatio: 200,
  ratioMinBytes: 16 * 1024 ** 2,
};

export interface ExtractOptions extends Partial<ExtractLimits> {
  /** Bearer token sent when `source` is an http(s) URL (the worker's token). */
  token?: string;
}

export interface ExtractResult {
  dir: string;
  files: number;
  bytes: number;
}

/** A refused or broken artifact: the user's build (or whoever serves it) must change. */
export class UnsafeArtifactError extends UserError {
  constructor(source: string, reason: string) {
    super(`Refusing artifact ${source}: ${reason}`, {
      hint: "Rebuild it with `svc build`; artifacts may hold only regular files and directories with relative paths.",
    });
  }
}

/**
 * The safe relative path of a tar entry, or a reason to refuse it. Pure, so every rule is testable alone.
 * Leading "./" is dropped; "" (the root itself) yields null.
 */
export function entryPath(name: string): { path: string | null } | { refused: string } {
  if (name.includes("\0")) return { refused: `entry name contains a NUL byte` };
  if (name.startsWith("/") || name.startsWith("\\") || /^[A-Za-z]:/.test(name)) {
    return { refused: `absolute path "${name}"` };
  }
  const segments = name.split(/[\\/]+/).filter((s) => s !== "" && s !== ".");
  if (segments.includes("..")) return { refused: `path "${name}" has a ".." segment` };
  return { path: segments.length === 0 ? null : segments.join("/") };
}

/** File mode without owner-specific or special bits: executables stay executable, nothing is setuid. */
export function safeMode(mode: number | undefined, type: "file" | "directory"): number {
  if (type === "directory") return 0o755;
  return (mode ?? 0) & 0o111 ? 0o755 : 0o644;
}

const ALLOWED_TYPES = new Set(["file", "contiguous-file", "directory"]);

/**
 * A tar entry as a worker takes it: its safe relative path (null for the root itself), or why it is refused (a
 * link, a device or fifo, an absolute or escaping path). The one rule for unpacking and for checking an upload. Pure.
 */
export function checkEntry(header: {
  name: string;
  type?: string | null;
  linkname?: string | null;
}): { path: string | null; type: "file" | "directory" } | { refused: string } {
  const type = header.type ?? "file";
  if (!ALLOWED_TYPES.has(type)) return { refused: `a ${type}${header.linkname ? ` (to "${header.linkname}")` : ""}; only files and directories are allowed` };
  const checked = entryPath(header.name);
  if ("refused" in checked) return checked;
  return { path: checked.path, type: type === "directory" ? "directory" : "file" };
}

/** Why unpacking must stop after `bytes` uncompressed from `compressed` bytes, or undefined. Pure. */
export function expansionRefusal(bytes: number, compressed: number, limits: ExtractLimits): { status: 413 | 422; reason: string } | undefined {
  if (bytes > limits.maxBytes) return { status: 413, reason: `more than ${limits.maxBytes} bytes uncompressed` };
  if (bytes >= limits.ratioMinBytes && bytes / Math.max(compressed, 1) > limits.maxRatio)
    return { status: 422, reason: `compression ratio above ${limits.maxRatio}:1 (a zip bomb?)` };
  return undefined;
}

class ByteCounter extends Transform {
  bytes = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    done(null, chunk);
  }
}

/** Extract a local .tar.gz into `destDir`, which must not exist yet. */
async function extractLocal(source: string, destDir: string, limits: ExtractLimits): Promise<ExtractResult> {
  const parent = dirname(resolve(destDir));
  await mkdir(parent, { recursive: true });
  const temp = join(parent, `.${basename(destDir)}.partial-${randomBytes(6).toString("hex")}`);
  await mkdir(temp, { mode: 0o755 });
  const root = resolve(temp);
  let files = 0;
  let bytes = 0;
  let entries = 0;
  const compressed = new ByteCounter();
  const extract = tarStream.extract();
  const refuse = (reason: string) => new UnsafeArtifactError(source, reason);
  const feeding = pipeline(createReadStream(source), compressed, createGunzip(), extract);
  // The loop below reports the first error; the feeding side's own error must not go unhandled meanwhile.
  let feedError: unknown;
  feeding.catch((err) => (feedError = err));

  try {
    for await (const entry of extract) {
      const header = entry.header;
      if (++entries > limits.maxEntries) throw refuse(`more than ${limits.maxEntries} entries`);
      const checked = checkEntry(header);
      if ("refused" in checked) throw refuse(checked.refused.startsWith("a ") ? `entry "${header.name}" is ${checked.refused}` : checked.refused);
      const type = checked.type;
      if (checked.path === null) {
        entry.resume();
        continue;
      }
      const target = resolve(root, checked.path);
      if (!target.startsWith(root + sep)) throw refuse(`path "${header.name}" escapes the destination`);
      if (type === "directory") {
        await mkdir(target, { recursive: true, mode: 0o755 });
        entry.resume();
        continue;
      }
      if ((header.size ?? 0) + bytes > limits.maxBytes) {
        throw refuse(`more than ${limits.maxBytes} bytes uncompressed`);
      }
      await mkdir(dirname(target), { recursive: true, mode: 0o755 });
      const guard = new Transform({
        transform(chunk: Buffer, _enc, done) {
          bytes += chunk.length;
          const stop = expansionRefusal(bytes, compressed.bytes, limits);
          if (stop) return done(refuse(stop.reason));
          done(null, chunk);
        },
      });
      // "wx" never follows or reuses an existing file: a duplicate entry is refused.
      await pipeline(entry, guard, createWriteStream(target, { flags: "wx", mode: safeMode(header.mode, "file") }));
      files++;
    }
    await feeding;
    await rm(destDir, { recursive: true, force: true }).catch(() => undefined /* what it leaves makes the rename below fail, with its reason */);
    await rename(temp, destDir);
    return { dir: resolve(destDir), files, bytes };
  } catch (err) {
    extract.destroy();
    await feeding.catch(() => undefined /* its error is feedError, reported below */);
    await rm(temp, { recursive: true, force: true });
    const cause = feedError ?? err;
    if (err instanceof UnsafeArtifactError) throw err;
    if (cause instanceof UnsafeArtifactError) throw cause;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") throw refuse(`duplicate entry (${errorMessage(err)})`);
    if (code === "ENOENT" && !(await stat(source).catch(() => null))) {
      throw new UserError(`Artifact not found: ${source}`, { hint: "Build it first with `svc build`." });
    }
    throw new UnsafeArtifactError(source, `not a valid .tar.gz (${errorMessage(cause)})`);
  }
}

function isUrl(source: string): boolean {
  return /^https?:\/\//i.test(source);
}

/** Download an http(s) artifact to `file`, sending the worker's bearer token. */
export async function downloadArtifact(url: string, file: string, token?: string, maxBytes = DEFAULT_EXTRACT_LIMITS.maxBytes): Promise<void> {
  const get = url.toLowerCase().startsWith("https:") ? httpsGet : httpGet;
  const response = await new Promise<IncomingMessage>((resolvePromise, reject) => {
    const req = get(url, { headers: token ? { authorization: `Bearer ${token}` } : {} }, resolvePromise);
    req.on("error", reject);
  });
  if (response.statusCode !== 200) {
    response.resume();
    throw new UserError(`Cannot download artifact ${url}: HTTP ${response.statusCode}`);
  }
  let received = 0;
  const limit = new Transform({
    transform(chunk: Buffer, _enc, done) {
      received += chunk.length;
      if (received > maxBytes) return done(new UserError(`Artifact ${url} is larger than ${maxBytes} bytes`));
      done(null, chunk);
    },
  });
  try {
    await pipeline(response, limit, createWriteStream(file, { mode: 0o600 }));
  } catch (err) {
    await rm(file, { force: true });
    throw err;
  }
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash("sha256");
  await pipeline(createReadStream(file), hash);
  return hash.digest("hex");
}

/**
 * Extract `source` (a local .tar.gz path or an http(s) URL) into `destDir`. `destDir` is replaced when it
 * exists. Throws UnsafeArtifactError (a UserError) for a refused artifact; leaves nothing behind on failure.
 */
export async function extractArtifact(source: string, destDir: string, options: ExtractOptions = {}): Promise<ExtractResult> {
  const limits = limitsOf(options);
  if (!isUrl(source)) return extractLocal(source, destDir, limits);
  const parent = dirname(resolve(destDir));
  await mkdir(parent, { recursive: true });
  const temp = join(parent, `.download-${randomBytes(6).toString("hex")}.tar.gz`);
  try {
    await downloadArtifact(source, temp, options.token, limits.maxBytes);
    return await extractLocal(temp, destDir, limits);
  } finally {
    await rm(temp, { force: true });
  }
}

function limitsOf(options: ExtractOptions): ExtractLimits {
  return {
    maxBytes: options.maxBytes ?? DEFAULT_EXTRACT_LIMITS.maxBytes,
    maxEntries: options.maxEntries ?? DEFAULT_EXTRACT_LIMITS.maxEntries,
    maxRatio: options.maxRatio ?? DEFAULT_EXTRACT_LIMITS.maxRatio,
    ratioMinBytes: options.ratioMinBytes ?? DEFAULT_EXTRACT_LIMITS.ratioMinBytes,
  };
}

async function exists(path: string): Promise<boolean> {
  return (await stat(path).catch(() => null)) !== null;
}

/**
 * Extract once per content: the tree lands in `<cacheDir>/<sha256 of the .tar.gz>` and later calls (from this
 * or another process) reuse it. Returns the directory. With `sha256`, the artifact must have that digest (the
 * one it was deployed with) or it is refused before anything is unpacked. Concurrent extractions of the same artifact race
 * safely: each writes its own temporary tree and the first rename wins.
 */
export async function extractArtifactCached(source: string, cacheDir: string, options: ExtractOptions & { sha256?: string } = {}): Promise<string> {
  const limits = limitsOf(options);
  await mkdir(cacheDir, { recursive: true, mode: 0o700 });
  let local = source;
  let downloaded: string | undefined;
  if (isUrl(source)) {
    downloaded = join(cacheDir, `.download-${randomBytes(6).toString("hex")}.tar.gz`);
    await downloadArtifact(source, downloaded, options.token, limits.maxBytes);
    local = downloaded;
  }
  try {
    const digest = await sha256File(local);
    // The service names an artifact by the sha256 it was deployed with: a file changed since is not that code.
    if (options.sha256 !== undefined && digest !== options.sha256.toLowerCase())
      throw new UnsafeArtifactError(source, `its sha256 is ${digest}, not the ${options.sha256} it was deployed with`);
    const dir = join(cacheDir, digest);
    if (await exists(dir)) return dir;
    try {
      await extractIntoNew(local, dir, limits);
    } catch (err) {
      // Another process finished the same artifact first: theirs is as good as ours.
      if (await exists(dir)) return dir;
      throw err;
    }
    return dir;
  } finally {
    if (downloaded) await rm(downloaded, { force: true });
  }
}

/** Like extractLocal, but never replaces an existing directory (the cache's "first one wins"). */
async function extractIntoNew(source: string, dir: string, limits: ExtractLimits): Promise<void> {
  const staging = `${dir}.staging-${randomBytes(6).toString("hex")}`;
  await extractLocal(source, staging, limits);
  try {
    await rename(staging, dir);
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException).code;
    if ((code === "ENOTEMPTY" || code === "EEXIST") && (await exists(dir))) return;
    throw err;
  }
}
