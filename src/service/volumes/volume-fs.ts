// A volume's files as S3 objects: keys map to paths under the volume's directory, and nothing the S3 API does
// leaves it. Keys with empty, "." or ".." segments are refused; every directory on the way is opened and its
// real location checked to be inside the volume before anything happens in it, and the operation then goes
// through the open directory (/proc/self/fd/N/<name> on Linux), so a worker that swaps a directory for a
// symbolic link meanwhile cannot send a write elsewhere. Files are opened first and checked where they really
// are, so a link to a file outside the volume is not read either.
//
// Names starting with ".svc-" are the API's own (uploads being written, multipart parts): not addressable as
// keys and never listed.

import { constants, existsSync, type Dirent } from "node:fs";
import { chmod, lstat, mkdir, open, readdir, readlink, realpath, rename, rmdir, unlink, type FileHandle } from "node:fs/promises";
import { randomBytes, createHash } from "node:crypto";
import { S3Error } from "./s3-errors.js";

/** Names of the API's own files and folders inside a volume. */
export const RESERVED_PREFIX = ".svc-";
/** Modes of what the API creates: every worker of the volume may change it (see drivers/volume-dir.ts). */
const DIR_MODE = 0o777;
const FILE_MODE = 0o666;
const MAX_KEY_BYTES = 1024;
const MAX_NAME_BYTES = 255;
const PROC_FD = existsSync("/proc/self/fd");

/** A key's path segments, or the S3 error it is. `folder`: the key ends with "/" (a folder marker). Pure. */
export function keySegments(key: string): { segments: string[]; folder: boolean } {
  if (key === "") throw new S3Error("InvalidArgument", "The object key is empty");
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new S3Error("InvalidArgument", `An object key is at most ${MAX_KEY_BYTES} bytes`);
  if (key.includes("\0")) throw new S3Error("InvalidArgument", "An object key may not contain NUL");
  const folder = key.endsWith("/");
  const segments = (folder ? key.slice(0, -1) : key).split("/");
  for (const s of segments) {
    if (s === "" || s === "." || s === "..") {
      throw new S3Error("InvalidArgument", `The key "${key}" has an empty, "." or ".." segment: keys are paths inside the volume`);
    }
    if (s.startsWith(RESERVED_PREFIX)) throw new S3Error("InvalidArgument", `Names starting with "${RESERVED_PREFIX}" are reserved by the service`);
    if (Buffer.byteLength(s) > MAX_NAME_BYTES) throw new S3Error("InvalidArgument", `Each "/"-separated part of a key is at most ${MAX_NAME_BYTES} bytes`);
  }
  return { segments, folder };
}

/** Whether `path` is `root` or inside it. Pure. */
export function inside(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`);
}

/** An opened directory of the volume, checked to be inside it. */
export class VolumeDir {
  constructor(
    private readonly handle: FileHandle,
    /** Where it really is (for messages, and the fallback without /proc). */
    readonly realPath: string,
  ) {}

  /** A path naming `name` in this very directory, whatever happens to the path it was opened by. */
  at(name: string): string {
    return PROC_FD ? `/proc/self/fd/${this.handle.fd}/${name}` : `${this.realPath}/${name}`;
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}

/** Where an open file or directory really is. */
async function whereIs(handle: FileHandle, openedAs: string): Promise<string> {
  return PROC_FD ? readlink(`/proc/self/fd/${handle.fd}`) : realpath(openedAs);
}

const isMissing = (err: unknown) => ["ENOENT", "ENOTDIR"].includes((err as NodeJS.ErrnoException).code ?? "");

export interface ObjectStat {
  size: number;
  mtimeMs: number;
  etag: string;
}

/**
 * An ETag for a file as it is now: it changes whenever its content is replaced or written (size, modification
 * time in nanoseconds, inode), without reading it. Not an MD5 of the content, so it carries a part count as
 * multipart ETags do (clients then never compare it with one). Pure.
 */
export function etagOf(st: { ino: bigint | number; size: bigint | number; mtimeNs?: bigint; mtimeMs: bigint | number }): string {
  const hash = createHash("md5")
    .update(`${st.ino}:${st.size}:${st.mtimeNs ?? st.mtimeMs}`)
    .digest("hex");
  return `"${hash}-1"`;
}

export class VolumeFs {
  private constructor(readonly root: string) {}

  /** The volume at `dir` (its real path: links above it are the operator's). */
  static async open(dir: string): Promise<VolumeFs> {
    return new VolumeFs(await realpath(dir));
  }

  /**
   * The directory `segments` name, opened and checked; undefined when it (or one above it) does not exist and
   * `create` is false. With `create`, missing directories are made (open to every worker).
   */
  async dir(segments: string[], create = false): Promise<VolumeDir | undefined> {
    let current = await this.openDir(this.root);
    for (const segment of segments) {
      let next: VolumeDir | undefined;
      try {
        if (create) {
          const made = await mkdir(current.at(segment)).then(
            () => true,
            (err: NodeJS.ErrnoException) => {
              if (err.code === "EEXIST") return false;
              throw err;
            },
          );
          if (made) await chmod(current.at(segment), DIR_MODE);
        }
        next = await this.openDir(current.at(segment));
      } catch (err) {
        await current.close();
        if (err instanceof S3Error) throw err;
        if (isMissing(err) && !create) return undefined;
        if ((err as NodeJS.ErrnoException).code === "ENOTDIR" || (err as NodeJS.ErrnoException).code === "EEXIST") {
          throw new S3Error("InvalidRequest", `"${segments.join("/")}" cannot be a folder: a file of the volume has the name "${segment}" there`);
        }
        throw err;
      }
      await current.close();
      current = next;
    }
    return current;
  }

  private async openDir(path: string): Promise<VolumeDir> {
    const handle = await open(path, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      const real = await whereIs(handle, path);
      if (!inside(this.root, real)) throw new S3Error("AccessDenied", "The key leads outside the volume (through a symbolic link)");
      return new VolumeDir(handle, real);
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  /** The file of a key, opened for reading and checked; undefined when there is none (or it is a folder). */
  async openFile(key: string): Promise<{ handle: FileHandle; stat: ObjectStat } | undefined> {
    const { segments, folder } = keySegments(key);
    if (folder) return undefined;
    const dir = await this.dir(segments.slice(0, -1));
    if (!dir) return undefined;
    let handle: FileHandle;
    try {
      handle = await open(dir.at(segments.at(-1)!), constants.O_RDONLY | constants.O_NONBLOCK);
    } catch (err) {
      if (isMissing(err) || (err as NodeJS.ErrnoException).code === "ELOOP") return undefined;
      throw err;
    } finally {
      await dir.close();
    }
    try {
      const real = await whereIs(handle, `${dir.realPath}/${segments.at(-1)}`);
      if (!inside(this.root, real)) throw new S3Error("AccessDenied", "The key leads outside the volume (through a symbolic link)");
      const st = await handle.stat({ bigint: true });
      if (!st.isFile()) {
        await handle.close();
        return undefined;
      }
      return { handle, stat: { size: Number(st.size), mtimeMs: Number(st.mtimeMs), etag: etagOf(st) } };
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  /** The file of a key as it is now, or undefined. */
  async stat(key: string): Promise<ObjectStat | undefined> {
    const opened = await this.openFile(key).catch((err: unknown) => {
      if (err instanceof S3Error && err.code === "AccessDenied") return undefined;
      throw err;
    });
    await opened?.handle.close();
    return opened?.stat;
  }

  /**
   * A new file for a key's content: written beside where it goes under a reserved name, then `commit` puts it
   * in place (replacing the file there) or `discard` removes it.
   */
  async create(key: string): Promise<PendingFile> {
    const { segments, folder } = keySegments(key);
    if (folder) throw new S3Error("InvalidArgument", "A key ending with / is a folder: it has no content");
    return createIn((await this.dir(segments.slice(0, -1), true))!, segments.at(-1)!);
  }

  /**
   * The folder of a multipart upload (`.svc-multipart/<id>`), opened without following links; undefined when
   * it does not exist and `create` is false.
   */
  async uploadDir(uploadId: string, create = false): Promise<VolumeDir | undefined> {
    if (!/^[0-9a-f]{32}$/.test(uploadId)) return undefined;
    let current = await this.openDir(this.root);
    for (const name of [`${RESERVED_PREFIX}multipart`, uploadId]) {
      try {
        if (create)
          await mkdir(current.at(name)).catch((err: NodeJS.ErrnoException) => {
            if (err.code !== "EEXIST") throw err;
          });
        const next = await this.openChild(current, name);
        await current.close();
        current = next;
      } catch (err) {
        await current.close();
        const code = (err as NodeJS.ErrnoException).code;
        // A link or a file in its place, written there by a worker: the request's fault to name, not the service's.
        if (code === "ELOOP" || (code === "ENOTDIR" && create)) {
          throw new S3Error(
            "InvalidRequest",
            `The volume's "${RESERVED_PREFIX}multipart" is not a folder of the service's (a link or file was written there): remove it to upload in parts`,
          );
        }
        if (isMissing(err) && !create) return undefined;
        throw err;
      }
    }
    return current;
  }

  /** Remove a multipart upload's folder and its parts; false when there was none. */
  async removeUpload(uploadId: string): Promise<boolean> {
    const dir = await this.uploadDir(uploadId);
    if (!dir) return false;
    try {
      // Its entries are the API's own files: parts and parts being written (unlink never follows a link).
      // A part already gone is what was wanted.
      for (const name of await readdir(dir.at("."))) await unlink(dir.at(name)).catch(() => undefined);
    } finally {
      await dir.close();
    }
    // Empty by now: rmdir removes nothing else, wherever the path leads.
    // Not empty (a part being written meanwhile) or already gone: the upload is aborted either way.
    await rmdir(dir.realPath).catch(() => undefined);
    return true;
  }

  /** Make the folder a key ending with "/" names (S3 clients' folder markers). */
  async makeFolder(key: string): Promise<void> {
    const { segments } = keySegments(key);
    await (await this.dir(segments, true))!.close();
  }

  /** Remove a key's file; false when there was none. Empty folders are left: workers may use them. */
  async remove(key: string): Promise<{ removed: boolean; bytes: number }> {
    const { segments, folder } = keySegments(key);
    const dir = await this.dir(segments.slice(0, -1));
    if (!dir) return { removed: false, bytes: 0 };
    try {
      if (folder) {
        // A folder marker goes with its folder when that is empty, as the marker object would in S3.
        const removed = await rmdir(dir.at(segments.at(-1)!)).then(
          () => true,
          () => false,
        );
        return { removed, bytes: 0 };
      }
      const stat = await this.stat(key);
      try {
        await unlink(dir.at(segments.at(-1)!));
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // A folder of that name is no object: nothing to delete, as S3 answers for a missing key.
        if (isMissing(err) || code === "EISDIR" || code === "EPERM") return { removed: false, bytes: 0 };
        throw err;
      }
      return { removed: true, bytes: stat?.size ?? 0 };
    } finally {
      await dir.close();
    }
  }

  /**
   * Every object under the folder of `prefix`, in S3's order (by the UTF-8 bytes of the key), from after
   * `after`, skipping keys that start with `skip()` (a folder rolled up into a common prefix). Symbolic links
   * are not followed; the API's own files are not listed.
   */
  async *objects(prefix: string, after: string, skip: () => string | undefined): AsyncGenerator<{ key: string } & ObjectStat> {
    const base = prefix.slice(0, prefix.lastIndexOf("/") + 1);
    const segments = base === "" ? [] : base.slice(0, -1).split("/");
    if (segments.some((s) => s === "" || s === "." || s === ".." || s.startsWith(RESERVED_PREFIX))) return;
    const dir = await this.dir(segments).catch((err: unknown) => {
      if (err instanceof S3Error) return undefined;
      throw err;
    });
    if (!dir) return;
    yield* this.walk(dir, base, prefix, after, skip);
  }

  private async *walk(
    dir: VolumeDir,
    base: string,
    prefix: string,
    after: string,
    skip: () => string | undefined,
  ): AsyncGenerator<{ key: string } & ObjectStat> {
    try {
      let entries: Dirent[];
      try {
        entries = await readdir(dir.at("."), { withFileTypes: true });
      } catch (err) {
        if (isMissing(err)) return;
        throw err;
      }
      const named = entries
        .filter((e) => !e.name.startsWith(RESERVED_PREFIX) && (e.isFile() || e.isDirectory()))
        .map((e) => ({ entry: e, key: Buffer.from(`${base}${e.name}${e.isDirectory() ? "/" : ""}`) }))
        .sort((a, b) => Buffer.compare(a.key, b.key));
      for (const { entry, key: keyBytes } of named) {
        const key = keyBytes.toString();
        const compatible = key.startsWith(prefix) || (entry.isDirectory() && prefix.startsWith(key));
        if (!compatible) continue;
        const skipping = skip();
        if (skipping !== undefined && key.startsWith(skipping)) continue;
        if (entry.isDirectory()) {
          // Every key under it sorts at or before `after`: nothing there to list.
          if (Buffer.compare(keyBytes, Buffer.from(after)) < 0 && !after.startsWith(key)) continue;
          let child: VolumeDir;
          try {
            child = await this.openChild(dir, entry.name);
          } catch (err) {
            if (isMissing(err) || (err as NodeJS.ErrnoException).code === "ELOOP" || err instanceof S3Error) continue;
            throw err;
          }
          yield* this.walk(child, key, prefix, after, skip);
          continue;
        }
        if (Buffer.compare(keyBytes, Buffer.from(after)) <= 0) continue;
        const st = await lstatIn(dir, entry.name);
        if (st) yield { key, size: Number(st.size), mtimeMs: Number(st.mtimeMs), etag: etagOf(st) };
      }
    } finally {
      await dir.close();
    }
  }

  /** A subdirectory, never through a symbolic link. */
  private async openChild(dir: VolumeDir, name: string): Promise<VolumeDir> {
    const handle = await open(dir.at(name), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      const real = await whereIs(handle, `${dir.realPath}/${name}`);
      if (!inside(this.root, real)) throw new S3Error("AccessDenied", "outside the volume");
      return new VolumeDir(handle, real);
    } catch (err) {
      await handle.close();
      throw err;
    }
  }
}

export async function lstatIn(dir: VolumeDir, name: string) {
  // Absent (or unreadable) is "no such object" to the caller.
  const st = await lstat(dir.at(name), { bigint: true }).catch(() => undefined);
  return st?.isFile() ? st : undefined;
}

/** A new file that becomes `name` in `dir` once committed (written under a reserved name until then). */
export async function createIn(dir: VolumeDir, name: string): Promise<PendingFile> {
  const temp = `${RESERVED_PREFIX}upload-${randomBytes(8).toString("hex")}`;
  try {
    const handle = await open(dir.at(temp), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, FILE_MODE);
    await handle.chmod(FILE_MODE);
    return new PendingFile(dir, temp, name, handle);
  } catch (err) {
    await dir.close();
    throw err;
  }
}

/** A file being written for a key (VolumeFs.create). */
export class PendingFile {
  constructor(
    private readonly dir: VolumeDir,
    private readonly temp: string,
    private readonly name: string,
    readonly handle: FileHandle,
  ) {}

  /** Put it in place of the key's file; its stat afterwards. */
  async commit(): Promise<ObjectStat> {
    try {
      await this.handle.sync();
      const st = await this.handle.stat({ bigint: true });
      await this.handle.close();
      try {
        await rename(this.dir.at(this.temp), this.dir.at(this.name));
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EISDIR" || code === "ENOTEMPTY" || code === "EEXIST") {
          throw new S3Error("InvalidRequest", `A folder of the volume has this key's name ("${this.name}"): a key cannot be both a file and a folder here`);
        }
        throw err;
      }
      return { size: Number(st.size), mtimeMs: Number(st.mtimeMs), etag: etagOf(st) };
    } catch (err) {
      // The temporary file may not exist yet; the write's own error is rethrown.
      await unlink(this.dir.at(this.temp)).catch(() => undefined);
      throw err;
    } finally {
      await this.dir.close();
    }
  }

  async discard(): Promise<void> {
    // An aborted write: its handle and temporary file go, whatever state they are in.
    await this.handle.close().catch(() => undefined);
    await unlink(this.dir.at(this.temp)).catch(() => undefined);
    await this.dir.close().catch(() => undefined);
  }
}
