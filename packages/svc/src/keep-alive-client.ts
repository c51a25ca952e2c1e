// A small HTTP/1.1 client for the JSON exchanges svc's own clients make with the service: the job clients'
// submissions and status reads, and the worker runtime's takes and results. Each answer is read whole.
//
// Why not fetch or node:http: a `POST /run` costs the calling process about 260 µs of CPU through fetch and 80 µs
// through node:http's agent, against 16 µs on a plain keep-alive socket (docs/performance.md, "svc's own
// clients"). A program submitting thousands of jobs a second, or a worker taking them, spends most of its time
// there. This client keeps what those callers use: keep-alive sockets (at most `maxSockets` an origin, calls
// waiting beyond), https through node:tls, answers of known length, chunked or delimited by the close, inactivity
// and connect timeouts, abort signals, idle sockets expiring before the server's announced keep-alive timeout,
// and idle sockets that do not keep the process alive. It does not do redirects, proxies, compression or
// streaming bodies: its callers need none of them.

import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect, type ConnectionOptions } from "node:tls";
import { asError } from "./errors.js";

export interface HttpCall {
  method: string;
  /** The path and query, beginning with "/". */
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  signal?: AbortSignal;
  /** Fail when the socket is silent this long while the call waits (default 5 minutes). */
  timeoutMs?: number;
  /** Fail when a new connection takes longer than this (default: the operating system's). */
  connectTimeoutMs?: number;
}

export interface HttpAnswer {
  status: number;
  statusText: string;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
}

export interface KeepAliveClientOptions {
  /** Connections open at once to the origin; calls beyond wait for one (default 64). */
  maxSockets?: number;
  /** For https origins: CA, client certificate, and so on (node:tls options). */
  tls?: ConnectionOptions;
  /** How long an idle connection is kept when the server announces no keep-alive timeout (default 4 s). */
  idleMs?: number;
}

/** A connection failed or broke before its answer was whole; `code` is the system's (ECONNREFUSED, ...) if any. */
export class HttpConnectionError extends Error {
  readonly code?: string;
  constructor(message: string, options?: { cause?: unknown; code?: string }) {
    super(message, { cause: options?.cause });
    this.name = "HttpConnectionError";
    this.code = options?.code;
  }
}

const DEFAULT_TIMEOUT_MS = 5 * 60_000;
const DEFAULT_IDLE_MS = 4000;
/** A head longer than this is refused (node:http's limit is 16 KiB). */
const MAX_HEAD_BYTES = 64 * 1024;
const HEAD_END = Buffer.from("\r\n\r\n");
const CRLF = Buffer.from("\r\n");
const HEADER_VALUE_OK = /^[^\r\n\0]*$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Methods a server may see twice without harm (RFC 9110, 9.2.2): sent again when a kept connection failed. */
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);

export class KeepAliveClient {
  readonly origin: URL;
  private readonly secure: boolean;
  private readonly port: number;
  private readonly hostHeader: string;
  private readonly maxSockets: number;
  private readonly idleMs: number;
  private readonly tlsOptions?: ConnectionOptions;
  private readonly idle: Connection[] = [];
  private readonly waiting: Array<() => void> = [];
  private open = 0;
  private closed = false;

  constructor(origin: string | URL, options: KeepAliveClientOptions = {}) {
    const url = new URL(origin);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`not an http(s) address: ${url.href}`);
    this.origin = url;
    this.secure = url.protocol === "https:";
    this.port = url.port ? Number(url.port) : this.secure ? 443 : 80;
    this.hostHeader = url.host;
    this.maxSockets = options.maxSockets ?? 64;
    this.idleMs = options.idleMs ?? DEFAULT_IDLE_MS;
    this.tlsOptions = options.tls;
  }

  /** Send one call and read its answer whole. Rejects with HttpConnectionError when the exchange breaks. */
  async request(call: HttpCall): Promise<HttpAnswer> {
    if (this.closed) throw new HttpConnectionError(`the client for ${this.origin.origin} is closed`);
    const head = this.headOf(call);
    call.signal?.throwIfAborted();
    const conn = await this.connection(call, false);
    try {
      return await conn.exchange(head, call);
    } catch (err) {
      // A kept connection the server closed as this call was written (its keep-alive timeout): a read is sent
      // again on a new one, as browsers and undici do. A write is not: the server may have acted on it.
      if (
        !conn.wasReused ||
        conn.answerBegan ||
        !IDEMPOTENT.has(call.method) ||
        !(err instanceof HttpConnectionError) ||
        err.code === "ETIMEDOUT" ||
        call.signal?.aborted
      )
        throw err;
      this.release(conn);
      const fresh = await this.connection(call, true);
      try {
        return await fresh.exchange(head, call);
      } finally {
        this.release(fresh);
      }
    } finally {
      this.release(conn);
    }
  }

  /** Close every idle connection now; busy ones close when their answer is read. */
  close(): void {
    this.closed = true;
    for (const conn of this.idle.splice(0)) conn.destroy();
  }

  private headOf(call: HttpCall): string {
    if (!TOKEN.test(call.method)) throw new TypeError(`invalid method ${JSON.stringify(call.method)}`);
    if (!call.path.startsWith("/") || !HEADER_VALUE_OK.test(call.path) || call.path.includes(" ")) {
      throw new TypeError(`invalid path ${JSON.stringify(call.path)}`);
    }
    let head = `${call.method} ${call.path} HTTP/1.1\r\nhost: ${this.hostHeader}\r\n`;
    let typed = false;
    for (const name in call.headers) {
      const value = call.headers[name]!;
      if (!TOKEN.test(name) || !HEADER_VALUE_OK.test(value)) throw new TypeError(`invalid header ${JSON.stringify(name)}`);
      const lower = name.toLowerCase();
      // The framing is this client's: a caller's own would desynchronise the connection.
      if (lower === "content-length" || lower === "transfer-encoding" || lower === "connection" || lower === "host") continue;
      if (lower === "accept") typed = true;
      head += `${name}: ${value}\r\n`;
    }
    if (!typed) head += "accept: */*\r\n";
    const length = call.body === undefined ? 0 : typeof call.body === "string" ? Buffer.byteLength(call.body) : call.body.length;
    // A body-less POST still says so: some servers wait for a length on methods that may carry one.
    if (call.body !== undefined || (call.method !== "GET" && call.method !== "HEAD")) head += `content-length: ${length}\r\n`;
    return `${head}\r\n`;
  }

  /** An idle connection (unless `fresh`) or a new one, once fewer than maxSockets are open. */
  private async connection(call: HttpCall, fresh: boolean): Promise<Connection> {
    for (;;) {
      const now = Date.now();
      while (!fresh && this.idle.length > 0) {
        const conn = this.idle.pop()!;
        if (conn.usable(now)) return conn;
        conn.destroy();
      }
      if (this.open < this.maxSockets) {
        this.open++;
        return new Connection(this.connect(), this.secure, this, call.connectTimeoutMs);
      }
      await new Promise<void>((resolve, reject) => {
        const signal = call.signal;
        const wake = () => {
          signal?.removeEventListener("abort", abort);
          resolve();
        };
        const abort = () => {
          const at = this.waiting.indexOf(wake);
          if (at >= 0) this.waiting.splice(at, 1);
          reject(signal!.reason);
        };
        signal?.addEventListener("abort", abort, { once: true });
        this.waiting.push(wake);
      });
    }
  }

  private connect(): Socket {
    const host = this.origin.hostname.startsWith("[") ? this.origin.hostname.slice(1, -1) : this.origin.hostname;
    const socket = this.secure
      ? tlsConnect({ host, port: this.port, servername: /^[\d.]+$|:/.test(host) ? undefined : host, ...this.tlsOptions })
      : netConnect({ host, port: this.port });
    // Each call is one write and waits for its answer: Nagle's delay would only add latency.
    socket.setNoDelay(true);
    return socket;
  }

  private release(conn: Connection): void {
    if (conn.released) return;
    conn.released = true;
    if (conn.reusable && !this.closed) {
      conn.idleUntil = Date.now() + (conn.serverKeepAliveMs !== undefined ? Math.max(0, conn.serverKeepAliveMs - 1000) : this.idleMs);
      conn.park();
      this.idle.push(conn);
    } else {
      conn.destroy();
    }
    this.waiting.shift()?.();
  }

  /** A connection ended (whether busy or idle): a waiting call may open another. */
  forget(conn: Connection): void {
    this.open--;
    const at = this.idle.indexOf(conn);
    if (at >= 0) this.idle.splice(at, 1);
    this.waiting.shift()?.();
  }
}

type BodyMode = "none" | "length" | "chunked" | "close";

/** One socket and the answer being read on it. */
class Connection {
  reusable = false;
  idleUntil = 0;
  /** Given back to the client after its call (once per call). */
  released = false;
  /** It served a call before this one. */
  wasReused = false;
  /** Bytes of this call's answer came. */
  answerBegan = false;
  private calls = 0;
  serverKeepAliveMs?: number;
  private ended = false;
  private connected = false;
  private pending?: {
    resolve: (answer: HttpAnswer) => void;
    reject: (err: Error) => void;
    method: string;
  };
  private answer?: ReadAnswer;

  constructor(
    private readonly socket: Socket,
    secure: boolean,
    private readonly owner: KeepAliveClient,
    connectTimeoutMs?: number,
  ) {
    let connectTimer: NodeJS.Timeout | undefined;
    if (connectTimeoutMs !== undefined) {
      connectTimer = setTimeout(
        () => this.fail(new HttpConnectionError(`${owner.origin.host}: no connection within ${connectTimeoutMs} ms`, { code: "ETIMEDOUT" })),
        connectTimeoutMs,
      );
    }
    socket.once(secure ? "secureConnect" : "connect", () => {
      this.connected = true;
      clearTimeout(connectTimer);
    });
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("timeout", () => this.fail(new HttpConnectionError(`${owner.origin.host}: no answer within ${socket.timeout} ms`, { code: "ETIMEDOUT" })));
    socket.on("error", (err: NodeJS.ErrnoException) =>
      this.fail(new HttpConnectionError(`${owner.origin.host}: ${err.message}`, { cause: err, code: err.code })),
    );
    socket.on("end", () => this.onEnd());
    socket.on("close", () => {
      clearTimeout(connectTimer);
      this.fail(new HttpConnectionError(`${owner.origin.host} closed the connection before its answer was whole`, { code: "ECONNRESET" }));
      if (!this.ended) {
        this.ended = true;
        owner.forget(this);
      }
    });
  }

  usable(now: number): boolean {
    return !this.ended && !this.socket.destroyed && now < this.idleUntil;
  }

  /** Idle: it must not keep the process alive. */
  park(): void {
    this.socket.setTimeout(0);
    this.socket.unref();
  }

  exchange(head: string, call: HttpCall): Promise<HttpAnswer> {
    this.socket.ref();
    this.reusable = false;
    this.released = false;
    this.wasReused = this.calls++ > 0;
    this.answerBegan = false;
    this.answer = new ReadAnswer(call.method === "HEAD");
    this.socket.setTimeout(call.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    return new Promise<HttpAnswer>((resolve, reject) => {
      const signal = call.signal;
      const abort = () => this.fail(signal!.reason instanceof Error ? signal!.reason : new Error(String(signal!.reason)));
      signal?.addEventListener("abort", abort, { once: true });
      this.pending = {
        resolve: (answer) => {
          signal?.removeEventListener("abort", abort);
          resolve(answer);
        },
        reject: (err) => {
          signal?.removeEventListener("abort", abort);
          reject(err);
        },
        method: call.method,
      };
      if (call.body === undefined || call.body.length === 0) this.socket.write(head);
      else if (typeof call.body === "string") this.socket.write(head + call.body);
      else {
        this.socket.cork();
        this.socket.write(head);
        this.socket.write(call.body);
        this.socket.uncork();
      }
    });
  }

  destroy(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    const answer = this.answer;
    if (!answer || !this.pending) {
      // Bytes nobody asked for: the connection's framing is lost.
      this.socket.destroy();
      return;
    }
    this.answerBegan = true;
    let done: boolean;
    try {
      done = answer.feed(chunk);
    } catch (err) {
      this.fail(asError(err));
      return;
    }
    if (done) this.finish(answer, false);
  }

  private onEnd(): void {
    const answer = this.answer;
    if (answer && this.pending && answer.endsWithClose()) {
      this.finish(answer, true);
      return;
    }
    this.socket.destroy();
  }

  private finish(answer: ReadAnswer, atClose: boolean): void {
    const pending = this.pending!;
    this.pending = undefined;
    this.answer = undefined;
    this.reusable = !atClose && answer.keepAlive && !answer.leftover && this.connected;
    this.serverKeepAliveMs = answer.keepAliveMs;
    pending.resolve(answer.result());
  }

  private fail(err: Error): void {
    const pending = this.pending;
    this.pending = undefined;
    this.answer = undefined;
    this.reusable = false;
    this.socket.destroy();
    pending?.reject(err);
  }
}

/** The answer read so far: its head, then its body by the framing the head gave. */
class ReadAnswer {
  keepAlive = true;
  keepAliveMs?: number;
  leftover = false;
  private buffered?: Buffer;
  private status = 0;
  private statusText = "";
  private headers: Record<string, string> = {};
  private mode?: BodyMode;
  private remaining = 0;
  private readonly parts: Buffer[] = [];
  /** Chunked: the bytes of the current chunk still to come (-1: a size line is next; -2: the trailers). */
  private chunkLeft = -1;
  private chunkCrlf = false;

  constructor(private readonly noBody: boolean) {}

  /** Take the next bytes; true once the answer is whole. */
  feed(chunk: Buffer): boolean {
    let data = this.buffered ? Buffer.concat([this.buffered, chunk]) : chunk;
    this.buffered = undefined;
    while (this.mode === undefined) {
      const end = data.indexOf(HEAD_END);
      if (end < 0) {
        if (data.length > MAX_HEAD_BYTES) throw new HttpConnectionError(`an answer's head is over ${MAX_HEAD_BYTES} bytes`);
        this.buffered = data;
        return false;
      }
      const informational = this.readHead(data.toString("latin1", 0, end));
      data = data.subarray(end + 4);
      if (informational) continue;
    }
    return this.body(data);
  }

  /** The answer's length was "until the connection closes", and it has. */
  endsWithClose(): boolean {
    return this.mode === "close";
  }

  result(): HttpAnswer {
    const body = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts);
    return { status: this.status, statusText: this.statusText, headers: this.headers, body };
  }

  /** Parse a head; true for an informational (1xx) one, which another head follows. */
  private readHead(text: string): boolean {
    const lines = text.split("\r\n");
    const statusLine = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/.exec(lines[0]!);
    if (!statusLine) throw new HttpConnectionError(`not an HTTP/1.1 answer: ${JSON.stringify(lines[0]!.slice(0, 80))}`);
    const status = Number(statusLine[2]);
    if (status >= 100 && status < 200 && status !== 101) return true;
    this.status = status;
    this.statusText = statusLine[3] ?? "";
    const headers: Record<string, string> = {};
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(":");
      if (colon <= 0) throw new HttpConnectionError(`a malformed header line in an answer: ${JSON.stringify(line.slice(0, 80))}`);
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    }
    this.headers = headers;
    const connection = headers.connection?.toLowerCase() ?? "";
    this.keepAlive = statusLine[1] === "1" ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
    const timeout = /\btimeout=(\d+)/i.exec(headers["keep-alive"] ?? "");
    if (timeout) this.keepAliveMs = Number(timeout[1]) * 1000;
    const transfer = headers["transfer-encoding"]?.toLowerCase();
    const length = headers["content-length"];
    if (this.noBody || status === 204 || status === 304) this.mode = "none";
    else if (transfer !== undefined) {
      if (!/(^|,)\s*chunked\s*$/.test(transfer)) throw new HttpConnectionError(`an answer's transfer-encoding is not chunked: ${transfer}`);
      this.mode = "chunked";
    } else if (length !== undefined) {
      if (!/^\d+$/.test(length)) throw new HttpConnectionError(`an answer's content-length is not a number: ${length}`);
      this.mode = "length";
      this.remaining = Number(length);
    } else {
      this.mode = "close";
      this.keepAlive = false;
    }
    return false;
  }

  private body(data: Buffer): boolean {
    switch (this.mode) {
      case "none":
        this.leftover = data.length > 0;
        return true;
      case "close":
        if (data.length > 0) this.parts.push(data);
        return false;
      case "length": {
        const take = Math.min(this.remaining, data.length);
        if (take > 0) this.parts.push(take === data.length ? data : data.subarray(0, take));
        this.remaining -= take;
        if (this.remaining > 0) return false;
        this.leftover = data.length > take;
        return true;
      }
      default:
        return this.chunks(data);
    }
  }

  private chunks(data: Buffer): boolean {
    let at = 0;
    while (at < data.length) {
      if (this.chunkCrlf) {
        // The CRLF after a chunk's data.
        if (data.length - at < 2) break;
        if (data[at] !== 13 || data[at + 1] !== 10) throw new HttpConnectionError("a chunk of the answer does not end with CRLF");
        at += 2;
        this.chunkCrlf = false;
        continue;
      }
      if (this.chunkLeft > 0) {
        const take = Math.min(this.chunkLeft, data.length - at);
        this.parts.push(data.subarray(at, at + take));
        this.chunkLeft -= take;
        at += take;
        if (this.chunkLeft === 0) {
          this.chunkLeft = -1;
          this.chunkCrlf = true;
        }
        continue;
      }
      const eol = data.indexOf(CRLF, at);
      if (eol < 0) break;
      const line = data.toString("latin1", at, eol);
      at = eol + 2;
      if (this.chunkLeft === -2) {
        // Trailers, to the empty line that ends the answer.
        if (line !== "") continue;
        this.leftover = at < data.length;
        return true;
      }
      const size = /^([0-9a-fA-F]{1,12})\s*(;.*)?$/.exec(line);
      if (!size) throw new HttpConnectionError(`a malformed chunk size in the answer: ${JSON.stringify(line.slice(0, 40))}`);
      const n = Number.parseInt(size[1]!, 16);
      this.chunkLeft = n === 0 ? -2 : n;
    }
    if (at < data.length) this.buffered = data.subarray(at);
    if (this.buffered && this.buffered.length > MAX_HEAD_BYTES && this.chunkLeft <= 0) {
      throw new HttpConnectionError("a chunk size or trailer line of the answer is too long");
    }
    return false;
  }
}
