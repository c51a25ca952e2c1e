// The sockets to load-balanced workers: a keep-alive pool by address (UpstreamPool) and, on each connection, the
// reading of the worker's answer (UpstreamConnection), by its bytes when it is a simple one and otherwise with
// node's own HTTP parser. Apart from the exchange (exchange.ts) because a connection outlives its requests: it
// only hands each read to the exchange it carries at the time, through the `Exchange` interface below.
//
// node:http's client (Agent, ClientRequest, IncomingMessage, pipes) cost more per
// request than the caller's whole round trip, so a proxied request cost 2-2.5x a direct one. For http workers
// the proxy instead writes the request head itself on a pooled keep-alive socket and reads the answer with
// llhttp, the parser node:http uses (from node's `_http_common`): chunked decoding, HEAD and 1xx handling,
// keep-alive decisions are the same as node:http's. Small answers go down in one write (head and body).
// Where that parser is not available, or the worker speaks https, `forward` (proxy.ts) does the job.

import { createRequire } from "node:module";
import { connect, type Socket } from "node:net";
import { plainChunkedEnd, scanResponseHead, type ScannedResponse } from "./head-scan.js";

/** Where a worker listens, parsed once (not per request). */
export interface UpstreamAddress {
  protocol: string;
  hostname: string;
  port: string;
  /** "hostname:port": the Host header sent up, and the key of the connection pool (unless `socketPath`). */
  host: string;
  /** A Unix socket where the worker also listens (the process driver's): connections go there instead. */
  socketPath?: string;
}

export function parseAddress(address: string): UpstreamAddress {
  const url = new URL(address);
  return { protocol: url.protocol, hostname: url.hostname, port: url.port, host: `${url.hostname}:${url.port}` };
}

export interface LlhttpParser {
  initialize(type: number, resource: object, maxHeaderSize?: number, lenient?: number): void;
  execute(data: Buffer): number | Error;
  finish(): number | Error | undefined;
  [kind: number]: ((...args: never[]) => unknown) | undefined;
}
export interface LlhttpParserClass {
  new (): LlhttpParser;
  REQUEST: number;
  RESPONSE: number;
  kOnHeaders: number;
  kOnHeadersComplete: number;
  kOnBody: number;
  kOnMessageComplete: number;
}

/** node's own HTTP parser and its method names (index = the parser's method number), if node exposes them. */
export const llhttp: { Parser: LlhttpParserClass; methods: readonly string[] } | undefined = (() => {
  try {
    const common = createRequire(import.meta.url)("_http_common") as { HTTPParser?: LlhttpParserClass; methods?: string[] };
    const parser = common.HTTPParser;
    return typeof parser === "function" && typeof parser.kOnHeadersComplete === "number" && Array.isArray(common.methods)
      ? { Parser: parser, methods: common.methods }
      : undefined;
  } catch {
    return undefined;
  }
})();
const Llhttp = llhttp?.Parser;

/** An idle pooled connection is closed after this long (the worker's server keeps them 65 s). */
const IDLE_SOCKET_MS = 30_000;
/** How often idle connections and late answers are looked at (the pool's coarse clock moves this often). */
export const SWEEP_MS = 1_000;
/** A request body up to this size, with its length known, goes up in the same write as the head. */
export const SMALL_BODY_BYTES = 64 * 1024;

/** One request on a connection: the parser's events, then `afterRead` once per read (or at end of input). */
export interface Exchange {
  /** The whole answer, read without the parser (`UpstreamConnection.scan`); `data` holds it and nothing else. */
  onWhole(answer: ScannedResponse, data: Buffer, bodyStart: number): void;
  /** Whether a long answer of known length may be passed on by its bytes (`onLongHead`, `onLongBody`). */
  readonly passesLong: boolean;
  /**
   * The head of a long answer of known length, read without the parser, and the body that came with it
   * (`data[bodyStart, bodyEnd)`, a read buffer's view: valid during this call only). `last`: that is all of it.
   */
  onLongHead(answer: ScannedResponse, data: Buffer, bodyStart: number, bodyEnd: number, last: boolean): void;
  /**
   * A piece of that body (a view of the connection's read buffer); `last`: the body is whole with it; `reusable`:
   * the connection may carry another exchange afterwards. True when the caller's side still holds the piece (it
   * is not yet written out): its buffer must not be read into again.
   */
  onLongBody(chunk: Buffer, last: boolean, reusable: boolean): boolean;
  /** Whether the caller's side still holds pieces of a long answer's body given to it. */
  holdingBody(): boolean;
  onHead(status: number, headers: string[], keepAlive: boolean): number;
  onBody(chunk: Buffer): void;
  onComplete(): void;
  afterRead(): void;
  onFailure(err: Error): void;
}

const HEAD_END = Buffer.from("\r\n\r\n", "latin1");
/**
 * Where every worker connection reads into (node's `onread`): each read is handled before the next is taken, and
 * nothing keeps a view of it afterwards (what must wait is copied), so one buffer serves all. It spares node's
 * stream machinery and a new buffer per read.
 */
const READ_BUFFER_BYTES = 64 * 1024;
const READ_BUFFER = Buffer.allocUnsafe(READ_BUFFER_BYTES);
/**
 * A long answer's body is passed down by reference, never copied: while one streams, its connection reads into
 * buffers of its own, taken from here and given back once what was written from them has left the process. A
 * buffer whose bytes are still queued on the caller's socket is left to the garbage collector instead.
 */
const SPARE_BUFFERS: Buffer[] = [];
const MAX_SPARE_BUFFERS = 16;
/**
 * Those buffers' size: larger than READ_BUFFER, so that a body that piled up is read and written in fewer calls
 * (1 MB answers: about a fifth less CPU than with 64 KiB reads, the writes to the caller being most of it).
 */
const LONG_READ_BYTES = 256 * 1024;
const takeBuffer = (): Buffer => SPARE_BUFFERS.pop() ?? Buffer.allocUnsafe(LONG_READ_BYTES);
const giveBack = (buffer: Buffer): void => {
  if (SPARE_BUFFERS.length < MAX_SPARE_BUFFERS) SPARE_BUFFERS.push(buffer);
};
/** An answer head longer than this is left to the parser. */
const MAX_SCANNED_HEAD = 16 * 1024;
/** An exchange waiting for the head of its answer, until `deadline` (the pool's coarse clock). */
export interface TimedExchange {
  readonly deadline: number;
  timeOut(): void;
}

export class UpstreamConnection {
  readonly parser: LlhttpParser;
  exchange: Exchange | undefined;
  private partialHeaders: string[] = [];
  /**
   * The answer is read by scanning its bytes (`scan`) until it turns out not to be a simple whole one; then the
   * parser takes over from its first byte. `held`: what has arrived of it meanwhile.
   */
  private scanning = false;
  private held: Buffer | undefined;
  /** A long answer of known length passes by its bytes (`scan`): how many of its body are still to come. */
  private passing = false;
  private remaining = 0;
  /** Where the next read goes: READ_BUFFER, or while passing a buffer of this connection's own. */
  private readInto: Buffer = READ_BUFFER;
  /** Own buffers whose bytes were written down and may still be queued there. */
  private lent: Buffer[] = [];
  /** When it went back to the pool (the pool's coarse clock). */
  idleSince = 0;

  readonly socket: Socket;

  constructor(
    upstream: UpstreamAddress,
    readonly key: string,
    private readonly pool: UpstreamPool,
  ) {
    // (node asks `buffer` for the next read's buffer after each read's callback.)
    const onread = {
      buffer: () => this.readInto,
      callback: (length: number, buffer: Buffer) => {
        if (this.passing) this.pass(buffer, length);
        else this.onRead(buffer.subarray(0, length));
        return true;
      },
    };
    const host = upstream.hostname.startsWith("[") ? upstream.hostname.slice(1, -1) : upstream.hostname;
    const socket =
      upstream.socketPath !== undefined ? connect({ path: upstream.socketPath, onread }) : connect({ host, port: Number(upstream.port) || 80, onread });
    this.socket = socket;
    const P = Llhttp!;
    this.parser = new P();
    // Long header lists arrive in pieces (kOnHeaders) before kOnHeadersComplete, as in node:http.
    this.parser[P.kOnHeaders] = ((headers: string[]) => {
      this.partialHeaders.push(...headers);
    }) as never;
    this.parser[P.kOnHeadersComplete] = ((
      _major: number,
      _minor: number,
      headers: string[] | undefined,
      _method: unknown,
      _url: unknown,
      status: number,
      _message: unknown,
      _upgrade: boolean,
      keepAlive: boolean,
    ) => {
      const all = headers ?? this.partialHeaders;
      this.partialHeaders = [];
      return this.exchange?.onHead(status, all, keepAlive) ?? 0;
    }) as never;
    this.parser[P.kOnBody] = ((chunk: Buffer) => this.exchange?.onBody(chunk)) as never;
    this.parser[P.kOnMessageComplete] = (() => this.exchange?.onComplete()) as never;
    socket.setNoDelay(true);
    socket.on("end", () => {
      // A body that lasts until the connection closes ends here; anything else is cut short (on "close").
      if (this.exchange) {
        // Still scanning or passing: the answer has a length it did not reach, or not all of its head came.
        if (this.scanning || this.passing) return this.fail(new Error("the worker closed the connection before its answer was whole"));
        const result = this.parser.finish();
        if (result instanceof Error) this.fail(result);
        else this.exchange?.afterRead();
      }
      socket.destroy();
    });
    socket.on("error", (err) => this.fail(err));
    socket.on("close", () => {
      this.pool.forget(this);
      this.fail(new Error("the worker closed the connection"));
    });
  }

  /**
   * One read of a long answer's body (into `buffer`, one of this connection's own), passed down as it is. The
   * buffer is read into again unless the caller's side still holds the piece; those lent are taken back once
   * the caller's side has written everything out.
   */
  private pass(buffer: Buffer, length: number): void {
    const exchange = this.exchange;
    if (!exchange) return void this.socket.destroy();
    if (this.lent.length > 0 && !exchange.holdingBody()) {
      for (const lent of this.lent) giveBack(lent);
      this.lent = [];
    }
    // More than the answer's length: the worker sent what was not asked for, and loses the connection.
    const extra = length > this.remaining;
    const size = extra ? this.remaining : length;
    this.remaining -= size;
    const last = this.remaining === 0;
    const held = exchange.onLongBody(buffer.subarray(0, size), last, !extra);
    if (last) return this.stopPassing(held ? undefined : buffer);
    if (held) {
      this.lent.push(buffer);
      this.readInto = takeBuffer();
    }
  }

  /** Back to READ_BUFFER; `free`: the buffer last read into, when nothing holds it (then nothing holds the lent either). */
  private stopPassing(free: Buffer | undefined): void {
    this.passing = false;
    if (free !== undefined) {
      giveBack(free);
      for (const lent of this.lent) giveBack(lent);
    }
    this.lent = [];
    this.readInto = READ_BUFFER;
  }

  /** One read (`data`: a view of READ_BUFFER, valid during this call only). */
  private onRead(data: Buffer): void {
    if (!this.exchange) {
      // Nothing was asked: a worker that talks out of turn loses the connection.
      this.socket.destroy();
      return;
    }
    if (this.scanning) {
      const bytes = this.held === undefined ? data : Buffer.concat([this.held, data]);
      this.held = undefined;
      const verdict = this.scan(bytes);
      if (verdict === "whole") return;
      if (verdict === "more") {
        this.held = bytes === data ? Buffer.from(data) : bytes;
        return;
      }
      data = bytes;
    }
    // (A copy for the parser: the pieces of body it gives may wait in the caller's socket.)
    const result = this.parser.execute(data.buffer === READ_BUFFER.buffer ? Buffer.from(data) : data);
    if (result instanceof Error) this.fail(result);
    else this.exchange?.afterRead();
  }

  /** Start an exchange; `scan`: try reading the answer by its bytes first (see `scan`). */
  begin(exchange: Exchange, scan: boolean): void {
    this.exchange = exchange;
    this.held = undefined;
    this.scanning = scan;
    if (this.passing) this.stopPassing(undefined);
    if (!scan) this.parser.initialize(Llhttp!.RESPONSE, {}, 0, 0);
    if (this.socket.isPaused()) this.socket.resume();
  }

  private toParser(): void {
    this.scanning = false;
    this.parser.initialize(Llhttp!.RESPONSE, {}, 0, 0);
  }

  /**
   * Most answers are small, of known length and arrive in one read. Those are read by
   * their bytes (`scanResponseHead`) and handed on whole, without the parser's strings and callbacks. "more": wait
   * for the rest (the head, or a body of at most SMALL_BODY_BYTES); "parser": anything else, read from its
   * first byte by llhttp as before (streamed, large, chunked, 1xx, a worker sending more than it was asked).
   */
  private scan(bytes: Buffer): "whole" | "more" | "parser" {
    const headEnd = bytes.indexOf(HEAD_END);
    if (headEnd < 0) {
      if (bytes.length <= MAX_SCANNED_HEAD) return "more";
      this.toParser();
      return "parser";
    }
    const answer = scanResponseHead(bytes, headEnd);
    const bodyStart = headEnd + 4;
    if (answer?.chunked) {
      // A small chunked answer whole in this read goes down as its bytes; one still coming (a stream: its first
      // chunk must go at once) or written in any other way is llhttp's.
      const end = plainChunkedEnd(bytes, bodyStart, SMALL_BODY_BYTES);
      if (end !== bytes.length) {
        this.toParser();
        return "parser";
      }
      this.scanning = false;
      answer.contentLength = end - bodyStart;
      this.exchange!.onWhole(answer, bytes, bodyStart);
      return "whole";
    }
    if (answer !== undefined && answer.contentLength > SMALL_BODY_BYTES && bytes.length <= bodyStart + answer.contentLength && this.exchange!.passesLong) {
      // A long answer of known length: its head passed on as it is, its body by reference as it comes (`pass`).
      this.scanning = false;
      this.remaining = bodyStart + answer.contentLength - bytes.length;
      if (this.remaining > 0) {
        this.passing = true;
        this.readInto = takeBuffer();
      }
      this.exchange!.onLongHead(answer, bytes, bodyStart, bytes.length, this.remaining === 0);
      return "whole";
    }
    if (answer === undefined || answer.contentLength > SMALL_BODY_BYTES || bytes.length > bodyStart + answer.contentLength) {
      this.toParser();
      return "parser";
    }
    if (bytes.length < bodyStart + answer.contentLength) return "more";
    this.scanning = false;
    this.exchange!.onWhole(answer, bytes, bodyStart);
    return "whole";
  }

  /** The exchange is over: back to the pool when the connection may carry another one, else closed. */
  end(reusable: boolean): void {
    this.exchange = undefined;
    if (!reusable || this.socket.destroyed) {
      this.socket.destroy();
      return;
    }
    this.pool.idle(this);
  }

  private fail(err: Error): void {
    const exchange = this.exchange;
    this.exchange = undefined;
    if (this.passing) this.stopPassing(undefined);
    this.socket.destroy();
    exchange?.onFailure(err);
  }
}

/**
 * Keep-alive connections to workers, by address, most recently used first. Idle ones are closed by a sweep
 * every few seconds, not a timer each: re-arming a timer on every request cost more than the request's parsing.
 */
export class UpstreamPool {
  private readonly free = new Map<string, UpstreamConnection[]>();
  private closed = false;
  /** A coarse clock (epoch ms, advanced by the sweep): idle times need seconds, not a clock read per request. */
  private now = Date.now();
  private readonly sweeper = setInterval(() => this.sweep(), SWEEP_MS);
  /** Exchanges waiting for the head of their answer, with a deadline. */
  readonly waiting = new Set<TimedExchange>();

  constructor() {
    this.sweeper.unref();
  }

  /** The coarse clock (epoch ms, at most a sweep behind). */
  get clock(): number {
    return this.now;
  }

  private sweep(): void {
    this.now = Date.now();
    for (const exchange of this.waiting) if (this.now >= exchange.deadline) exchange.timeOut();
    for (const list of this.free.values()) {
      // Most recently used last: the oldest are at the front.
      while (list.length > 0 && this.now - list[0]!.idleSince >= IDLE_SOCKET_MS) list.shift()!.socket.destroy();
    }
  }

  /** Whether `forwardRaw` can serve this worker (http, and node's parser available). */
  static supports(upstream: UpstreamAddress): boolean {
    return Llhttp !== undefined && upstream.protocol === "http:";
  }

  acquire(upstream: UpstreamAddress): UpstreamConnection {
    const key = upstream.socketPath ?? upstream.host;
    const list = this.free.get(key);
    while (list && list.length > 0) {
      const conn = list.pop()!;
      if (!conn.socket.destroyed) return conn;
    }
    return new UpstreamConnection(upstream, key, this);
  }

  idle(conn: UpstreamConnection): void {
    if (this.closed) {
      conn.socket.destroy();
      return;
    }
    let list = this.free.get(conn.key);
    if (!list) this.free.set(conn.key, (list = []));
    conn.idleSince = this.now;
    list.push(conn);
  }

  forget(conn: UpstreamConnection): void {
    const list = this.free.get(conn.key);
    const i = list?.indexOf(conn) ?? -1;
    if (list && i >= 0) list.splice(i, 1);
  }

  destroy(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const list of this.free.values()) for (const conn of list) conn.socket.destroy();
    this.free.clear();
  }
}
