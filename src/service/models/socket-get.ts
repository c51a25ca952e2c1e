// A large file's GET on a socket of its own, its body read straight into the buffers written to disk. Through
// node:http every 64 KB read allocates a buffer and the parser copies the body into another; hundreds of MB of
// fresh memory per file, which glibc hands back to the system between files and the next file faults in again:
// on a virtual machine each fault costs a host round trip, and a 200 MB download spent more time in them than in
// the network. Here the socket reads into three reused 4 MB buffers (one filling, at most two being written at
// their offsets), as curl reads into its one buffer. Only what a model file's download needs: one GET, HTTP/1.1,
// `Connection: close`, a body of a known length (or one that ends with the connection); a chunked or encoded answer
// is left to node:http (hub.ts). docs/design/0022-model-downloads.md has the figures.

import { close, write } from "node:fs";
import { connect as connectTcp, isIP, type Socket } from "node:net";
import { type ConnectionOptions, connect as connectTls } from "node:tls";
import { openPartial, WrittenPrefix } from "./partial-file.js";

/** Bytes per buffer: one write each. */
const BATCH_BYTES = 4 * 1024 * 1024;
/** Buffers being written before the socket is paused (one more is being filled). */
const MAX_WRITES = 2;
/** An answer's status line and headers must fit in this many bytes. */
const MAX_HEAD_BYTES = 64 * 1024;

// Buffers of ended GETs, kept for the next one (a fresh 4 MB buffer is a thousand page faults, each a host round
// trip on a virtual machine); dropped once no GET has ended for a while.
const spareBuffers: Buffer[] = [];
const MAX_SPARE_BUFFERS = 6;
const SPARE_BUFFERS_MS = 30_000;
let dropSpares: NodeJS.Timeout | undefined;
const newBuffer = () => spareBuffers.pop() ?? Buffer.allocUnsafe(BATCH_BYTES);
function keepBuffers(buffers: Buffer[]): void {
  for (const b of buffers) if (b.length === BATCH_BYTES && spareBuffers.length < MAX_SPARE_BUFFERS) spareBuffers.push(b);
  clearTimeout(dropSpares);
  dropSpares = setTimeout(() => {
    spareBuffers.length = 0;
  }, SPARE_BUFFERS_MS);
  dropSpares.unref();
}

export interface SocketAnswer {
  status: number;
  /** Header names in lower case (a repeated header: its last value). */
  headers: Record<string, string>;
  /** Whether `receive` can take the body: not chunked, not encoded. */
  plainBody: boolean;
  /**
   * The body into the file at `path` from byte `start` on (the file cut there first; 0: a new file), as receive.ts's
   * `receiveInto`: `take` sees each read before it is written (false: dropped, and nothing more is read), `written`
   * hears how far the file is whole on disk. Rejects with the connection's error after what arrived is written.
   */
  receive(path: string, start: number, take: (bytes: Buffer) => boolean, written?: (bytes: number) => void): Promise<void>;
  /** Done with it without its body (a redirect, a refusal). */
  close(): void;
}

/** The bytes that end a chunk of the answer's head. */
const HEAD_END = Buffer.from("\r\n\r\n");

/**
 * GET `url` with `headers`; resolves once the status line and headers have arrived. A silence of `idleMs` breaks it.
 * `ca`: certificates to trust besides the system's (an https mirror with a certificate of its own; the tests').
 */
export function socketGet(url: URL, headers: Record<string, string>, idleMs: number, ca?: string | Buffer): Promise<SocketAnswer> {
  for (const [name, value] of Object.entries(headers))
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) return Promise.reject(new Error(`the header ${name} has a line break`));
  const tls = url.protocol === "https:";
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(url.port || (tls ? 443 : 80));
  const request =
    `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n` +
    Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join("") +
    "Connection: close\r\n\r\n";

  return new Promise((resolveHead, rejectHead) => {
    const buffers = new GetBuffers();
    let answer: SocketAnswer | undefined;
    /** Set while the body is received (by `receive`). */
    let body: BodyReceiver | undefined;

    const onread = {
      buffer: () => buffers.space(),
      callback: (n: number): boolean => {
        if (body) return body.read(n);
        buffers.filled += n;
        if (answer) return false; // the head is parsed and receive() not called yet: wait for it
        const end = buffers.gathered().indexOf(HEAD_END);
        if (end < 0) {
          if (buffers.filled >= MAX_HEAD_BYTES) socket.destroy(new Error(`the answer's head is longer than ${MAX_HEAD_BYTES} bytes`));
          return true;
        }
        const head = parseHead(buffers.gathered().subarray(0, end).toString("latin1"));
        if (typeof head === "string") {
          socket.destroy(new Error(head));
          return false;
        }
        // The body's first bytes (or the next head) came with the head.
        buffers.dropFront(end + HEAD_END.length);
        // An informational answer (103 Early Hints) comes before the real one.
        if (head.status < 200) return onread.callback(0);
        const length = head.headers["content-length"];
        buffers.bodyLeft = length === undefined ? undefined : Number(length);
        const plainBody =
          head.headers["transfer-encoding"] === undefined &&
          (head.headers["content-encoding"] ?? "identity") === "identity" &&
          (buffers.bodyLeft === undefined || (Number.isSafeInteger(buffers.bodyLeft) && buffers.bodyLeft >= 0));
        answer = {
          ...head,
          plainBody,
          receive: (path, start, take, written) => {
            if (body) return Promise.reject(new Error("the body is already being received"));
            if (!plainBody) return Promise.reject(new Error("the answer's body is chunked or encoded"));
            body = new BodyReceiver(socket, path, start, take, written, buffers);
            return body.done;
          },
          close: () => {
            socket.destroy();
            buffers.release();
          },
        };
        resolveHead(answer);
        // Reading stops with the head: the body's end (or the connection's) is seen once `receive` reads on.
        return false;
      },
    };
    const socket: Socket = tls
      ? // A TLS socket honours net.Socket's onread (its decrypted bytes land in the buffer given); @types/node leaves
        // the option out of tls.connect's.
        connectTls({ host, port, onread, ALPNProtocols: ["http/1.1"], ...(isIP(host) ? {} : { servername: host }), ...(ca ? { ca } : {}) } as ConnectionOptions)
      : connectTcp({ host, port, onread });
    socket.setTimeout(idleMs, () => socket.destroy(new Error(`no byte for ${Math.round(idleMs / 1000)} s`)));
    socket.once(tls ? "secureConnect" : "connect", () => socket.write(request));
    const noAnswer = (err: unknown) => {
      buffers.release();
      rejectHead(err);
    };
    socket.on("error", (err) => (answer ? body?.broken(err) : noAnswer(err)));
    socket.on("close", () => (answer ? body?.broken(undefined) : noAnswer(new Error("the connection closed before an answer came"))));
  });
}

/** The answer's status line and headers, or what is wrong with them. */
function parseHead(text: string): { status: number; headers: Record<string, string> } | string {
  const lines = text.split("\r\n");
  const statusLine = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "");
  if (!statusLine) return `not an HTTP/1.1 answer: ${JSON.stringify((lines[0] ?? "").slice(0, 80))}`;
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon <= 0) return `a header line without a name: ${JSON.stringify(line.slice(0, 80))}`;
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine[1]), headers };
}

/**
 * A GET's buffers: the one being filled (the head, then the body), those free, those being written; and how many of
 * the body's bytes are still to come.
 */
class GetBuffers {
  private readonly free: Buffer[] = [newBuffer(), newBuffer()];
  private filling = newBuffer();
  /** Bytes in the buffer being filled. */
  filled = 0;
  /** The body's bytes still to come; undefined: until the connection ends. */
  bodyLeft: number | undefined;
  private released = false;

  /** Where the next read lands. */
  space(): Buffer {
    return this.filling.subarray(this.filled);
  }

  /** What the buffer being filled holds. */
  gathered(): Buffer {
    return this.filling.subarray(0, this.filled);
  }

  /** Drop the first `bytes` of what is gathered (the head read). */
  dropFront(bytes: number): void {
    this.filling.copyWithin(0, bytes, this.filled);
    this.filled -= bytes;
  }

  /** The buffer being filled and its bytes, taken to be written; a free one takes its place. */
  takeGathered(): { buffer: Buffer; bytes: number } {
    const taken = { buffer: this.filling, bytes: this.filled };
    // A fourth buffer only when a TLS socket delivered what it had decrypted after it was paused.
    this.filling = this.free.pop() ?? newBuffer();
    this.filled = 0;
    return taken;
  }

  /** A written buffer back. */
  give(buffer: Buffer): void {
    if (this.released) keepBuffers([buffer]);
    else this.free.push(buffer);
  }

  /** The socket is closed and no write is in flight: the buffers go back to the spares. */
  release(): void {
    if (this.released) return;
    this.released = true;
    keepBuffers([...this.free.splice(0), this.filling]);
    this.filling = Buffer.alloc(0);
    this.filled = 0;
  }
}

/** One body into its file: the reads land in the GET's buffers, each full one written at its offset. */
class BodyReceiver {
  readonly done: Promise<void>;
  private resolve!: () => void;
  private reject!: (err: unknown) => void;
  private fd: number | undefined;
  /** The file is open and the bytes that came before it are counted: reads are taken as they come. */
  private started = false;
  private position: number;
  private readonly onDisk: WrittenPrefix;
  /** The connection broke (its idle time) while the file was being opened: told once what came before is taken. */
  private endedBeforeStart: { err: unknown } | undefined;
  private writing = 0;
  private ended = false;
  private failure: unknown;
  private settled = false;

  constructor(
    private readonly socket: Socket,
    path: string,
    start: number,
    private readonly take: (bytes: Buffer) => boolean,
    private readonly written: ((bytes: number) => void) | undefined,
    private readonly buffers: GetBuffers,
  ) {
    this.position = start;
    this.onDisk = new WrittenPrefix(start);
    this.done = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    openPartial(path, start, (err, fd) => {
      if (err) {
        if (fd !== undefined) close(fd, () => undefined);
        return this.fail(err);
      }
      this.fd = fd;
      this.started = true;
      // What came with the head, and what a TLS socket delivered after it was paused (it hands over every record it
      // has decrypted): taken as one read.
      const first = this.buffers.filled;
      this.buffers.filled = 0;
      if (first > 0 && !this.read(first)) return;
      if (this.buffers.bodyLeft === 0) return this.finish();
      if (this.endedBeforeStart) return this.broken(this.endedBeforeStart.err);
      this.socket.resume();
    });
  }

  /** `n` bytes were read into the buffer being filled; false pauses the socket. */
  read(n: number): boolean {
    if (this.ended) return false;
    // Before the file is open: kept where they landed, taken once it is.
    if (!this.started) {
      this.buffers.filled += n;
      return false;
    }
    const left = this.buffers.bodyLeft;
    // Bytes past the length the answer gave are not the body's.
    const bytes = left === undefined ? n : Math.min(n, left);
    const before = this.buffers.filled;
    if (!this.take(this.buffers.space().subarray(0, bytes))) {
      this.finish();
      return false;
    }
    this.buffers.filled += bytes;
    if (left !== undefined) this.buffers.bodyLeft = left - bytes;
    if (this.buffers.bodyLeft === 0) {
      this.finish();
      return false;
    }
    if (before + bytes >= BATCH_BYTES) this.flush();
    return this.writing < MAX_WRITES;
  }

  /** The connection ended or failed: complete when the body had no length (it ends with the connection). */
  broken(err: unknown): void {
    if (this.ended) return;
    if (!this.started) {
      this.endedBeforeStart ??= { err };
      return;
    }
    if (err === undefined && this.buffers.bodyLeft === undefined) return this.finish();
    this.failure ??= err ?? new Error("the connection closed before the body ended");
    this.finish();
  }

  private fail(err: unknown): void {
    this.failure ??= err;
    this.finish();
  }

  /** No more reads: write what is gathered, then close the file. */
  private finish(): void {
    if (!this.ended) {
      this.ended = true;
      this.socket.destroy();
      this.flush();
    }
    this.settle();
  }

  private flush(): void {
    const fd = this.fd;
    if (fd === undefined || this.buffers.filled === 0) return;
    const { buffer, bytes } = this.buffers.takeGathered();
    const from = this.position;
    this.position += bytes;
    this.writing++;
    write(fd, buffer, 0, bytes, from, (err) => {
      this.writing--;
      this.buffers.give(buffer);
      if (err) {
        this.failure ??= err;
        if (!this.ended) this.finish();
      } else {
        if (this.onDisk.land(from, from + bytes)) this.written?.(this.onDisk.whole);
        // Reading again (a no-op when it never stopped).
        if (!this.ended && this.writing < MAX_WRITES) this.socket.resume();
      }
      this.settle();
    });
  }

  private settle(): void {
    if (this.settled || !this.ended || this.writing > 0) return;
    this.settled = true;
    this.buffers.release();
    const failure = this.failure;
    if (this.fd === undefined) return this.reject(failure ?? new Error("the file was not opened"));
    close(this.fd, (err) => (failure !== undefined ? this.reject(failure) : err ? this.reject(err) : this.resolve()));
  }
}
