// Bytes a network volume holds, and its size as a limit: what the S3 API checks before each write and what
// `GET /v2/network-volumes/{id}` reports. Workers write into the directory directly, so the count is measured by
// walking it (every regular file's size, hidden upload parts included), kept for a few seconds, and moved by
// the S3 API's own writes in between. Writes in flight reserve their bytes, so parallel uploads cannot together
// pass the size.

import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { UserError } from "../../errors.js";
import { S3Error } from "./s3-errors.js";

/** One "GB" of a volume's `size`: 1 GiB. */
export const GB_BYTES = 1024 ** 3;
/**
 * Tests only: how many bytes one "GB" of `size` stands for (so a test fills a 10 GB volume with a few MB). Read
 * by `svc server`; unset, a GB is GB_BYTES.
 */
export const TEST_GB_BYTES_ENV = "SVC_TEST_VOLUME_GB_BYTES";
/** How long a measured count is trusted (workers' writes are seen within this). */
export const USAGE_TTL_MS = 3000;

/** Sum of the sizes of the regular files under `dir` (symbolic links count as themselves, not their targets). */
export async function measureBytes(dir: string): Promise<number> {
  let total = 0;
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw err;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) total += await measureBytes(path);
    else if (e.isFile()) total += (await lstat(path).catch(() => undefined))?.size ?? 0;
  }
  return total;
}

export class VolumeUsage {
  private readonly measured = new Map<string, { bytes: number; at: number; pending?: Promise<number> }>();
  private readonly reserved = new Map<string, number>();
  /** Smaller sizes being decided (a shrink in progress, per volume): writes are admitted only under the least. */
  private readonly caps = new Map<string, number[]>();

  constructor(
    /** Bytes in one GB of `size`. */
    readonly gbBytes: number = GB_BYTES,
    private readonly ttlMs: number = USAGE_TTL_MS,
    /**
     * The volume's size as stored now. A write looks its volume up before it reads the request and stats the
     * object it replaces; a resize stored meanwhile must still hold for it, so the size is read again at the check.
     */
    private readonly storedSize: (volumeId: string) => number | undefined = () => undefined,
  ) {}

  limitBytes(sizeGb: number): number {
    return sizeGb * this.gbBytes;
  }

  /** Bytes the volume holds now (measured at most ttlMs ago). */
  async used(volumeId: string, dir: string, now = Date.now()): Promise<number> {
    const known = this.measured.get(volumeId);
    if (known && now - known.at < this.ttlMs) return known.bytes;
    if (known?.pending) return known.pending;
    const pending = measureBytes(dir);
    this.measured.set(volumeId, { bytes: known?.bytes ?? 0, at: 0, pending });
    try {
      const bytes = await pending;
      this.measured.set(volumeId, { bytes, at: Date.now() });
      return bytes;
    } catch (err) {
      this.measured.delete(volumeId);
      throw err;
    }
  }

  /**
   * Bytes the volume holds, measured now rather than taken from the cache, plus the bytes of writes in flight
   * (they were admitted under the current size and will land): what a shrink must leave room for.
   */
  async committed(volumeId: string, dir: string): Promise<number> {
    if (!this.measured.get(volumeId)?.pending) this.measured.delete(volumeId);
    const used = await this.used(volumeId, dir);
    return used + (this.reserved.get(volumeId) ?? 0);
  }

  /**
   * Reserve `bytes` more for a write that replaces `replacing` bytes (an overwritten object): EntityTooLarge when
   * the volume would hold more than its size. `release(written)` ends the reservation; `written` is the change the
   * write made (0 when it failed).
   */
  async reserve(volume: { id: string; size: number }, dir: string, bytes: number, replacing = 0): Promise<(written: number) => void> {
    const used = await this.used(volume.id, dir);
    const inFlight = this.reserved.get(volume.id) ?? 0;
    const size = Math.min(this.storedSize(volume.id) ?? volume.size, ...(this.caps.get(volume.id) ?? []));
    const limit = this.limitBytes(size);
    if (used + inFlight + bytes - replacing > limit) {
      throw new S3Error(
        "EntityTooLarge",
        `This write would pass the size of network volume ${volume.id} (${size} GB = ${limit} bytes; ${used + inFlight} bytes used or being written, ${bytes - replacing} more asked): grow the volume (PATCH size) or delete files first`,
        { fields: { MaxSizeAllowed: String(Math.max(0, limit - used - inFlight + replacing)), ProposedSize: String(bytes) } },
      );
    }
    this.reserved.set(volume.id, inFlight + bytes);
    let released = false;
    return (written: number) => {
      if (released) return;
      released = true;
      this.reserved.set(volume.id, (this.reserved.get(volume.id) ?? bytes) - bytes);
      this.adjust(volume.id, written);
    };
  }

  /**
   * While a shrink to `sizeGb` is decided: writes are admitted only under it, from before its bytes are measured
   * (committed()) until the new size is stored or refused. Otherwise a write admitted under the old size just
   * after the measurement would land uncounted and pass the new size. The returned function lifts the cap (call
   * it once the size is stored, or when the shrink is refused: the old size holds again).
   */
  capAdmissions(volumeId: string, sizeGb: number): () => void {
    const caps = this.caps.get(volumeId) ?? [];
    caps.push(sizeGb);
    this.caps.set(volumeId, caps);
    let lifted = false;
    return () => {
      if (lifted) return;
      lifted = true;
      caps.splice(caps.indexOf(sizeGb), 1);
      if (caps.length === 0 && this.caps.get(volumeId) === caps) this.caps.delete(volumeId);
    };
  }

  /** The S3 API changed the volume by `delta` bytes. */
  adjust(volumeId: string, delta: number): void {
    const known = this.measured.get(volumeId);
    if (known && !known.pending) known.bytes = Math.max(0, known.bytes + delta);
  }

  forget(volumeId: string): void {
    this.measured.delete(volumeId);
  }
}

/** SVC_TEST_VOLUME_GB_BYTES as a number of bytes, when set to a positive whole number; undefined otherwise. Pure. */
export function testVolumeGbBytes(env: Record<string, string | undefined>): number | undefined {
  const text = env[TEST_GB_BYTES_ENV];
  if (text === undefined || text === "") return undefined;
  if (!/^[1-9]\d*$/.test(text)) throw new UserError(`${TEST_GB_BYTES_ENV} must be a positive whole number of bytes, not "${text}"`);
  return Number(text);
}
