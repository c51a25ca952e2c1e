// Reading an artifact as it arrives, without writing its files anywhere: the service checks an upload with the
// same rules a worker's extraction applies (extract.ts), so an artifact no worker would unpack is refused at the
// door instead of failing every worker later. Compressed bytes are fed in as they come (backpressure respected);
// every limit stops the reading at once; every stream's error ends in the returned promise, never as an
// unhandled 'error' event.

import type { EventEmitter } from "node:events";
import type { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import tarStream from "tar-stream";
import { MANIFEST_FILE } from "svc/internal";
import { checkEntry, expansionRefusal, type ExtractLimits } from "./extract.js";

export interface InspectLimits extends ExtractLimits {
  /** The manifest is read into memory: it must stay small (default 4 MiB). */
  maxManifestBytes: number;
}

export const DEFAULT_MANIFEST_LIMIT = 4 * 1024 * 1024;

/** Why an archive is refused: 413 for a size limit, 422 for content no worker would accept. */
export class ArchiveRefused extends Error {
  constructor(
    readonly status: 413 | 422,
    detail: string,
    readonly entries: string[] = [],
  ) {
    super(detail);
  }
}

export interface Inspection {
  /** The manifest's text, when the archive holds one at its root. */
  manifest?: string;
  entries: number;
  /** Uncompressed bytes of all files. */
  bytes: number;
}

/** Resolves at `event` or at any end of the emitter (error, close): the caller reads the outcome from its state. */
function settled(emitter: EventEmitter, event: string): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      emitter.off(event, done);
      emitter.off("error", done);
      emitter.off("close", done);
      resolve();
    };
    emitter.once(event, done);
    emitter.once("error", done);
    emitter.once("close", done);
  });
}

/** At most this many offending entries are named in one answer. */
const MAX_NAMED = 50;

/**
 * Feed compressed bytes with `write` (await it: it waits while the reader is behind), then `end()` for the
 * verdict. `write` and `end` reject with ArchiveRefused as soon as a limit is crossed or the stream is not a gzip
 * tar; after that the inspector has stopped reading.
 */
export class ArchiveInspector {
  private readonly gunzip = createGunzip();
  private readonly tar = tarStream.extract();
  private compressed = 0;
  private bytes = 0;
  private entries = 0;
  private manifest?: string;
  private readonly offending: string[] = [];
  /** Paths seen: a worker refuses an archive naming one twice (it never overwrites). */
  private readonly seen = new Set<string>();
  private failure?: ArchiveRefused;
  private readonly finished: Promise<void>;

  constructor(private readonly limits: InspectLimits) {
    this.gunzip.on("error", (err: NodeJS.ErrnoException) =>
      this.fail(new ArchiveRefused(422, `The artifact is not a gzip tar archive (the gzip stream is cut short or corrupt: ${err.code ?? err.message})`)),
    );
    this.tar.on("error", (err: Error) => this.fail(new ArchiveRefused(422, `The artifact is not a gzip tar archive (${err.message})`)));
    this.tar.on("entry", (header, stream, next) => this.entry(header, stream as unknown as Readable, next));
    this.gunzip.pipe(this.tar);
    this.finished = settled(this.tar, "finish");
  }

  private fail(refusal: ArchiveRefused): void {
    if (this.failure) return;
    this.failure = refusal;
    this.gunzip.unpipe(this.tar);
    this.gunzip.destroy();
    this.tar.destroy();
  }

  private entry(header: tarStream.Header, stream: Readable, next: (err?: Error | null) => void): void {
    if (this.failure) return;
    if (++this.entries > this.limits.maxEntries) return this.fail(new ArchiveRefused(413, `The artifact has more than ${this.limits.maxEntries} entries`));
    const checked = checkEntry(header);
    let isManifest = false;
    if ("refused" in checked) {
      this.offend(`${header.name}: ${checked.refused}`);
    } else if (checked.path !== null && checked.type === "file") {
      if (this.seen.has(checked.path)) this.offend(`${header.name}: a second entry for ${checked.path}; a worker never overwrites a file`);
      this.seen.add(checked.path);
      // Its announced size alone may cross the limit: no need to read it to know.
      if (this.bytes + (header.size ?? 0) > this.limits.maxBytes)
        return this.fail(new ArchiveRefused(413, `The artifact expands to more than ${this.limits.maxBytes} bytes`));
      if (checked.path === MANIFEST_FILE) {
        isManifest = true;
        if ((header.size ?? 0) > this.limits.maxManifestBytes) {
          return this.fail(new ArchiveRefused(413, `The artifact's ${MANIFEST_FILE} is ${header.size} bytes; the limit is ${this.limits.maxManifestBytes}`));
        }
      }
    }
    const parts: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => {
      if (this.failure) return;
      this.bytes += chunk.length;
      const stop = expansionRefusal(this.bytes, this.compressed, this.limits);
      if (stop?.status === 413) return this.fail(new ArchiveRefused(413, `The artifact expands to more than ${this.limits.maxBytes} bytes`));
      if (stop) return this.fail(new ArchiveRefused(422, `The artifact expands more than ${this.limits.maxRatio} times its size (a compression bomb?)`));
      if (isManifest) parts.push(chunk);
    });
    stream.on("end", () => {
      if (isManifest && !this.failure) this.manifest = Buffer.concat(parts).toString("utf8");
      next();
    });
    stream.on("error", () => undefined);
    stream.resume();
  }

  private offend(what: string): void {
    if (this.offending.length < MAX_NAMED) this.offending.push(what);
  }

  /** Feed the next compressed bytes; waits while the reader is behind. */
  async write(chunk: Buffer): Promise<void> {
    if (this.failure) throw this.failure;
    this.compressed += chunk.length;
    if (!this.gunzip.write(chunk)) {
      await settled(this.gunzip, "drain");
    }
    if (this.failure) throw this.failure;
  }

  /** No more bytes: the verdict. */
  async end(): Promise<Inspection> {
    if (this.failure) throw this.failure;
    this.gunzip.end();
    // Gunzip's end flows into the tar reader; its failure destroys the reader: either way the reader settles.
    await this.finished;
    if (this.failure) throw this.failure;
    if (this.offending.length > 0) {
      throw new ArchiveRefused(
        422,
        `The artifact holds entries no worker would unpack (${this.offending.length}${this.offending.length === MAX_NAMED ? " or more" : ""})`,
        this.offending,
      );
    }
    return { manifest: this.manifest, entries: this.entries, bytes: this.bytes };
  }

  /** Stop reading (the upload failed elsewhere). */
  abort(): void {
    this.fail(new ArchiveRefused(422, "The upload was abandoned"));
  }
}
