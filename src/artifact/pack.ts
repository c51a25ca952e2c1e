// Deterministic .tar.gz of a directory: the same tree gives the same bytes, whatever the file times, owners,
// umask or directory listing order. Entries are sorted, directories included, owners 0/0 with empty names,
// one fixed mtime, modes normalized to 0644 (0755 for directories and executables). No links: a symlink to a
// file inside the tree is stored as that file; any other symlink is refused.

import { createReadStream, createWriteStream } from "node:fs";
import { lstat, readdir, readFile, realpath, rm, stat, writeFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { createGzip, gzip, gzipSync } from "node:zlib";
import { Transform } from "node:stream";
import tar from "tar-stream";
import { UserError, asError } from "../errors.js";

/** Every entry gets this mtime (2000-01-01T00:00:00Z): fixed, and not 0, which some tools flag as suspicious. */
export const FIXED_MTIME = new Date(Date.UTC(2000, 0, 1));

const SMALL_FILE_BYTES = 1024 * 1024;
// Level 4: about twice as fast as zlib's default 6 for ~4% more bytes (measured on bundles); builds run often.
const GZIP_LEVEL = 4;
/** Artifacts up to this much content are tarred and gzipped in memory. */
const IN_MEMORY_BYTES = 64 * 1024 * 1024;
// tar-stream emits 512-byte headers and small bodies; gzip costs a thread-pool round trip per write, so feed
// it large chunks (measured: ~2x faster packing). Chunking does not change the compressed bytes.
const COALESCE_BYTES = 1024 * 1024;

/** Past this many tar bytes, the archive is gzipped in two members at once (one per core). */
const PARALLEL_GZIP_BYTES = 256 * 1024;
const gzipAsync = promisify(gzip);

/**
 * gzip of `tar`, in two members compressed at the same time on the thread pool when it is large enough: a
 * multi-member gzip is one stream to every reader (RFC 1952; node's gunzip, GNU tar, Docker), and the split is
 * by size alone, so the bytes stay deterministic. Measured on a 20-endpoint app: gzip was ~15% of `svc build`.
 */
async function gzipInParts(tar: Buffer): Promise<Buffer> {
  if (tar.length < PARALLEL_GZIP_BYTES) return gzipSync(tar, { level: GZIP_LEVEL });
  const half = Math.floor(tar.length / 2);
  const parts = await Promise.all([gzipAsync(tar.subarray(0, half), { level: GZIP_LEVEL }), gzipAsync(tar.subarray(half), { level: GZIP_LEVEL })]);
  return Buffer.concat(parts);
}

function coalesce(limit: number): Transform {
  let parts: Buffer[] = [];
  let size = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      parts.push(chunk);
      size += chunk.length;
      if (size >= limit) {
        this.push(Buffer.concat(parts));
        parts = [];
        size = 0;
      }
      callback();
    },
    flush(callback) {
      if (size > 0) this.push(Buffer.concat(parts));
      callback();
    },
  });
}

export interface PackEntry {
  /** Path inside the archive, forward slashes, directories end with "/". */
  name: string;
  type: "file" | "directory";
  mode: number;
  size: number;
  /** Absolute path of the bytes to store (files only; a resolved symlink target). */
  source?: string;
  /** The bytes themselves, for files held in memory. */
  data?: Uint8Array;
}

function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** List what the archive will hold (sorted), resolving in-tree symlinks to files. */
export async function planEntries(root: string): Promise<PackEntry[]> {
  const realRoot = await realpath(root);
  const entries: PackEntry[] = [];
  const walk = async (dir: string): Promise<void> => {
    const names = (await readdir(dir)).sort(compareNames);
    // Stat a directory's entries in parallel, then emit them in sorted order.
    const infos = await Promise.all(names.map((name) => describe(join(dir, name))));
    for (const [index, info] of infos.entries()) {
      if (!info) continue;
      entries.push(info.entry);
      if (info.entry.type === "directory") await walk(join(dir, names[index]!));
    }
  };
  const describe = async (full: string): Promise<{ entry: PackEntry } | undefined> => {
    const rel = relative(root, full).split(sep).join("/");
    let info = await lstat(full);
    let source = full;
    if (info.isSymbolicLink()) {
      const target = await realpath(full).catch(() => undefined /* a link to nowhere: refused below */);
      const inside = target !== undefined && (target === realRoot || target.startsWith(realRoot + sep));
      const targetInfo = target ? await stat(target) : undefined;
      if (!target || !inside || !targetInfo?.isFile()) {
        throw new UserError(`Cannot pack ${rel}: it is a symbolic link${target ? ` to ${target}` : " that points nowhere"}`, {
          hint: "Artifacts hold no links. Replace the link with the file itself.",
        });
      }
      info = targetInfo;
      source = target;
    }
    if (info.isDirectory()) return { entry: { name: `${rel}/`, type: "directory", mode: 0o755, size: 0 } };
    if (info.isFile()) return { entry: { name: rel, type: "file", mode: info.mode & 0o111 ? 0o755 : 0o644, size: info.size, source } };
    // Sockets, FIFOs and devices never belong in an artifact: skipped.
    return undefined;
  };
  await walk(root);
  return entries;
}

function headerOf(entry: PackEntry) {
  return {
    name: entry.name,
    type: entry.type,
    mode: entry.mode,
    size: entry.type === "file" ? entry.size : 0,
    mtime: FIXED_MTIME,
    uid: 0,
    gid: 0,
    uname: "",
    gname: "",
  };
}

/** Every file's bytes (null for directories), read a few at a time. */
async function readAll(entries: readonly PackEntry[]): Promise<Array<Uint8Array | null>> {
  const out: Array<Uint8Array | null> = new Array(entries.length).fill(null);
  let next = 0;
  const worker = async () => {
    while (next < entries.length) {
      const index = next++;
      const entry = entries[index]!;
      if (entry.type === "file") out[index] = entry.data ?? (await readFile(entry.source!));
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  return out;
}

/** Feed every entry to a tar-stream pack, then finalize it. */
async function writeEntries(pack: tar.Pack, entries: readonly PackEntry[]): Promise<void> {
  for (const entry of entries) {
    const header = headerOf(entry);
    if (entry.type === "directory") {
      pack.entry(header);
      continue;
    }
    if (entry.data || entry.size <= SMALL_FILE_BYTES) {
      // One read beats a stream per file: artifacts hold thousands of small files.
      const data = entry.data ?? (await readFile(entry.source!));
      await new Promise<void>((resolve, reject) => pack.entry({ ...header, size: data.length }, data, (err) => (err ? reject(err) : resolve())));
      continue;
    }
    await new Promise<void>((resolve, reject) => {
      const sink = pack.entry(header, (err) => (err ? reject(err) : resolve()));
      const source = createReadStream(entry.source!);
      source.on("error", reject);
      source.pipe(sink);
    });
  }
  pack.finalize();
}

/**
 * Entries for files held in memory (e.g. fresh bundles), with their parent directories.
 * `files` maps archive paths ("endpoints/api/handler.mjs") to contents.
 */
export function memoryEntries(files: ReadonlyMap<string, Uint8Array>): PackEntry[] {
  const entries = new Map<string, PackEntry>();
  for (const [name, data] of files) {
    const parts = name.split("/");
    for (let i = 1; i < parts.length; i++) {
      const dir = `${parts.slice(0, i).join("/")}/`;
      if (!entries.has(dir)) entries.set(dir, { name: dir, type: "directory", mode: 0o755, size: 0 });
    }
    entries.set(name, { name, type: "file", mode: 0o644, size: data.length, data });
  }
  return [...entries.values()];
}

/** One sorted list without duplicates; a later list wins for the same name. */
export function mergeEntries(...lists: ReadonlyArray<readonly PackEntry[]>): PackEntry[] {
  const byName = new Map<string, PackEntry>();
  for (const list of lists) for (const entry of list) byName.set(entry.name, entry);
  // Byte order of full names: a directory ("a/") always precedes its contents ("a/x").
  return [...byName.values()].sort((a, b) => compareNames(a.name, b.name));
}

/** Pack entries into `outFile` (.tar.gz), in the order given. Returns the archive's size in bytes. */
export async function packEntries(entries: readonly PackEntry[], outFile: string, options: { inMemoryBytes?: number } = {}): Promise<number> {
  const total = entries.reduce((sum, e) => sum + e.size, 0);
  const pack = tar.pack();
  try {
    if (total <= (options.inMemoryBytes ?? IN_MEMORY_BYTES)) {
      // Small artifacts (the common case): tar in memory, one synchronous gzip. Streaming gzip pays a
      // thread-pool round trip per chunk, which dominated packing time for typical apps.
      const contents = await readAll(entries);
      const chunks: Buffer[] = [];
      const collecting = (async () => {
        for await (const chunk of pack) chunks.push(chunk as Buffer);
      })();
      entries.forEach((entry, index) => {
        const data = contents[index];
        if (data) pack.entry({ ...headerOf(entry), size: data.length }, data);
        else pack.entry(headerOf(entry));
      });
      pack.finalize();
      await collecting;
      await writeFile(outFile, await gzipInParts(Buffer.concat(chunks)));
    } else {
      const writing = pipeline(pack, coalesce(COALESCE_BYTES), createGzip({ level: GZIP_LEVEL, chunkSize: 256 * 1024 }), createWriteStream(outFile));
      await Promise.all([
        writeEntries(pack, entries).catch((err: unknown) => {
          pack.destroy(asError(err));
          throw err;
        }),
        writing,
      ]);
    }
  } catch (err) {
    pack.destroy();
    await rm(outFile, { force: true });
    throw err;
  }
  return (await stat(outFile)).size;
}

/** Pack the directory `root` into `outFile` (.tar.gz). Returns the archive's size in bytes and its entries. */
export async function packDirectory(root: string, outFile: string, options: { inMemoryBytes?: number } = {}): Promise<{ bytes: number; entries: PackEntry[] }> {
  const entries = mergeEntries(await planEntries(root));
  return { bytes: await packEntries(entries, outFile, options), entries };
}
