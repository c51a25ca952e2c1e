// Forwarding one request to a load-balanced worker's HTTP server and its answer back, streamed both ways:
// the request body is piped up as it arrives and the response is piped down as the worker writes it (chunked
// and server-sent events arrive as produced). No retry: a worker that fails mid-request gives a 502 problem.

import { request as httpRequest, Agent, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { connect, type Socket } from "node:net";
import { sendProblem } from "../http/problems.js";
import { forwardedLines, FORWARDED, HOP_BY_HOP, plainChunkedEnd, scanResponseHead, type ScannedResponse } from "./head-scan.js";
import { LB_CREDENTIAL_HEADER } from "../../lb-credential.js";

function connectionListed(headers: IncomingHttpHeaders): Set<string> {
  const listed = headers.connection;
  return new Set((typeof listed === "string" ? listed : "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean));
}

/**
 * The headers sent up to the worker: the caller's, less the connection-scoped ones, the key and any worker
 * credential of its own; the worker's `credential` (undefined: it asks none) and X-Forwarded-*. Pure.
 */
export function upstreamHeaders(incoming: IncomingHttpHeaders, info: { host?: string; remote?: string; endpointId: string; credential?: string }): OutgoingHttpHeaders {
  const drop = connectionListed(incoming);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || drop.has(name) || name === "authorization" || name === LB_CREDENTIAL_HEADER) continue;
    out[name] = value;
  }
  if (info.credential !== undefined) out[LB_CREDENTIAL_HEADER] = info.credential;
  if (info.host) out["x-forwarded-host"] = info.host;
  if (info.remote) out["x-forwarded-for"] = typeof incoming["x-forwarded-for"] === "string" ? `${incoming["x-forwarded-for"]}, ${info.remote}` : info.remote;
  out["x-forwarded-proto"] = "http";
  return out;
}

/** The headers sent down to the caller, naming the worker. Pure. */
export function downstreamHeaders(upstream: IncomingHttpHeaders, workerId: string): OutgoingHttpHeaders {
  const drop = connectionListed(upstream);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(upstream)) {
    if (value === undefined || HOP_BY_HOP.has(name) || drop.has(name)) continue;
    out[name] = value;
  }
  out["x-svc-worker"] = workerId;
  return out;
}

/** "timed-out": the worker did not begin its answer within the endpoint's executionTimeout (a 504; it stays in the pool). */
export type ProxyOutcome = "ok" | "worker-failed" | "client-gone" | "timed-out";

/** One keep-alive pool for every worker: a connection per in-flight request, reused across requests. */
export function proxyAgent(): Agent {
  return new Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, scheduling: "lifo" });
}

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

/**
 * Send `req` (its body not yet read) to the worker at `upstream` with `path` (always origin-form, "/..."; it only
 * ever lands in the request line, so it cannot redirect the request elsewhere), and the answer to `res`. Resolves
 * when the exchange is over. A worker failure before its status line is a 502 problem+json; after it, the
 * response is cut.
 */
export function forward(
  agent: Agent,
  req: IncomingMessage,
  res: ServerResponse,
  target: { upstream: UpstreamAddress; path: string; workerId: string; endpointId: string; credential?: string },
): Promise<ProxyOutcome> {
  return new Promise<ProxyOutcome>((resolve) => {
    let settled = false;
    const settle = (outcome: ProxyOutcome) => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
    const upstream = httpRequest(
      {
        protocol: target.upstream.protocol,
        hostname: target.upstream.hostname,
        port: target.upstream.port,
        method: req.method,
        path: target.path,
        agent,
        headers: upstreamHeaders(req.headers, { host: req.headers.host, remote: req.socket.remoteAddress, endpointId: target.endpointId, credential: target.credential }),
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, downstreamHeaders(answer.headers, target.workerId));
        // Streamed answers: headers go out now, each chunk as it comes (pipe writes without buffering).
        if (answer.headers["content-length"] === undefined) res.flushHeaders();
        answer.pipe(res);
        answer.once("end", () => settle("ok"));
        answer.on("error", () => {
          res.destroy();
          settle("worker-failed");
        });
        answer.on("close", () => {
          if (answer.complete) return;
          res.destroy();
          settle("worker-failed");
        });
      },
    );
    upstream.on("error", (err) => {
      if (settled) return;
      // (req.destroyed says nothing here: a request whose body was read is destroyed already.)
      if (res.destroyed) return settle("client-gone");
      if (!res.headersSent) {
        req.resume();
        sendProblem(res, 502, `The worker ${target.workerId} failed while handling the request (${err.message}); it was not retried`, {
          headers: { "x-svc-worker": target.workerId },
        });
      } else res.destroy();
      settle("worker-failed");
    });
    // The caller went away: stop the worker's side too.
    res.on("close", () => {
      if (!res.writableFinished) {
        upstream.destroy();
        settle("client-gone");
      }
    });
    // A request without a body (most GETs) is sent at once; one with a body streams up as it arrives.
    if (req.headers["content-length"] === undefined && req.headers["transfer-encoding"] === undefined) {
      req.resume();
      upstream.end();
    } else req.pipe(upstream);
  });
}

// ------------------------------------------------------------------------------------------- raw forwarding
//
// node:http's client (Agent, ClientRequest, IncomingMessage, pipes) cost more per
// request than the caller's whole round trip, so a proxied request cost 2-2.5x a direct one. For http workers
// the proxy instead writes the request head itself on a pooled keep-alive socket and reads the answer with
// llhttp, the parser node:http uses (from node's `_http_common`): chunked decoding, HEAD and 1xx handling,
// keep-alive decisions are the same as node:http's. Small answers go down in one write (head and body).
// Where that parser is not available, or the worker speaks https, `forward` above does the job.

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
const SWEEP_MS = 1_000;
const CRLF = Buffer.from("\r\n", "latin1");
/** A request body up to this size, with its length known, goes up in the same write as the head. */
export const SMALL_BODY_BYTES = 64 * 1024;

/** The header names a Connection header lists, added to `into`; the usual "keep-alive" / "close" add none. */
function connectionTokens(value: string, into: Set<string> | undefined): Set<string> | undefined {
  const lower = value.toLowerCase();
  if (lower === "keep-alive" || lower === "close") return into;
  into ??= new Set();
  for (const name of lower.split(",")) into.add(name.trim());
  return into;
}

/** Flat [name, value, ...] response headers without the connection-scoped ones. Pure. */
export function downstreamRawHeaders(raw: readonly string[], workerId: string): string[] {
  let listed: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === "connection") listed = connectionTokens(raw[i + 1]!, listed);
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || listed?.has(name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  out.push("x-svc-worker", workerId);
  return out;
}

/**
 * The request head sent up, from the caller's raw headers (duplicates kept as sent): request line, Host, the
 * worker's credential line (`credentialLine`, CRLF included, or ""), the headers `upstreamHeaders` keeps, the
 * X-Forwarded-* it adds, and the body framing. Pure.
 */
export function requestHead(
  method: string,
  path: string,
  upstreamHost: string,
  raw: readonly string[],
  info: { host?: string; remote?: string },
  chunked: boolean,
  credentialLine = "",
): string {
  let listed: Set<string> | undefined;
  let forwardedFor: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name === "connection") listed = connectionTokens(raw[i + 1]!, listed);
    else if (name === "x-forwarded-for") forwardedFor = forwardedFor === undefined ? raw[i + 1] : `${forwardedFor}, ${raw[i + 1]}`;
  }
  let head = `${method} ${path} HTTP/1.1\r\nhost: ${upstreamHost}\r\n${credentialLine}`;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || listed?.has(name) || name === "authorization" || FORWARDED.has(name) || name === LB_CREDENTIAL_HEADER) continue;
    head += `${raw[i]}: ${raw[i + 1]}\r\n`;
  }
  head += forwardedLines(info.host, info.remote, forwardedFor);
  if (chunked) head += "transfer-encoding: chunked\r\n";
  return `${head}\r\n`;
}


/** One request on a connection: the parser's events, then `afterRead` once per read (or at end of input). */
interface Exchange {
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

class UpstreamConnection {
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
    const socket = upstream.socketPath !== undefined ? connect({ path: upstream.socketPath, onread }) : connect({ host, port: Number(upstream.port) || 80, onread });
    this.socket = socket;
    const P = Llhttp!;
    this.parser = new P();
    // Long header lists arrive in pieces (kOnHeaders) before kOnHeadersComplete, as in node:http.
    this.parser[P.kOnHeaders] = ((headers: string[]) => {
      this.partialHeaders.push(...headers);
    }) as never;
    this.parser[P.kOnHeadersComplete] = ((_major: number, _minor: number, headers: string[] | undefined, _method: unknown, _url: unknown, status: number, _message: unknown, _upgrade: boolean, keepAlive: boolean) => {
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
  readonly waiting = new Set<PooledExchange>();

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

/**
 * Where a worker's answer goes: node's ServerResponse (`responseDownstream`, below) or the LB front's own
 * connection (front.ts). The exchange decides what to send; a downstream only knows how.
 */
export interface Downstream {
  /** The caller went away. */
  readonly gone: boolean;
  /**
   * The status line and headers (connection-scoped ones already removed, x-svc-worker added). `framing`: how
   * the body follows: "length" (the headers carry its content-length), "none" (HEAD, 204, 304) or "stream"
   * (pieces as they come, total unknown: chunked to the caller). Throws for a header that cannot be sent.
   * Nothing need go out yet: the head goes with the first `write` or `end`, or on `flushHead`.
   */
  head(status: number, headers: string[], framing: "length" | "none" | "stream"): void;
  /** The head goes out now, without body (a streamed answer whose first piece has not come yet). */
  flushHead(): void;
  /** A piece of the body; false when the caller should be let to catch up (wait for `onDrain`). */
  write(chunk: Buffer): boolean;
  /** The rest of the body, if any, and the end of the answer. */
  end(chunk: Buffer | undefined): void;
  onDrain(listener: () => void): void;
  /** Called once if the caller leaves before the answer is over. */
  onGone(listener: () => void): void;
  /** The worker failed: a problem (502, or `status`) when nothing was sent yet, else the answer is cut short. */
  workerFailed(workerId: string, detail: string, status?: 502 | 504, cause?: string): void;
  /**
   * Optional: a whole answer at once, as the worker sent it (`data`: its head and body; `answer.lines`: the header
   * lines to pass on; the body from `bodyStart`), plus the x-svc-worker header; ends the answer. Without it, an
   * answer always goes through `head` and `end`.
   */
  whole?(answer: ScannedResponse, data: Buffer, bodyStart: number, workerId: string): void;
  /**
   * Optional, with `holding`: a long answer of known length, passed on by its bytes: its head as the worker sent
   * it (`answer.lines`) plus x-svc-worker, and the piece of body that came with it (`data[bodyStart, bodyEnd)`,
   * copied: `data` is a read buffer). The rest of the body follows through `write` and `end` in pieces that are
   * views of read buffers, written as they are. False when the caller should be let to catch up (`onDrain`).
   */
  long?(answer: ScannedResponse, data: Buffer, bodyStart: number, bodyEnd: number, workerId: string): boolean;
  /** Whether a piece given to `write` or `end` may still be queued, not yet handed to the operating system. */
  holding?(): boolean;
}

/** `Downstream` over node's ServerResponse (the request's body, if unread, is drained on failure). */
export function responseDownstream(req: IncomingMessage, res: ServerResponse): Downstream {
  return {
    get gone() {
      return res.destroyed;
    },
    head(status, headers) {
      res.writeHead(status, headers);
    },
    flushHead: () => res.flushHeaders(),
    write: (chunk) => res.write(chunk),
    end: (chunk) => res.end(chunk),
    onDrain: (listener) => res.once("drain", listener),
    onGone(listener) {
      res.once("close", () => {
        if (!res.writableFinished) listener();
      });
    },
    workerFailed(workerId, detail, status = 502) {
      if (res.headersSent) return void res.destroy();
      req.resume();
      sendProblem(res, status, detail, { headers: { "x-svc-worker": workerId } });
    },
  };
}

/** One request on a pooled raw connection, from the caller's side: write the request to `socket`, then `sent()`. */
export interface RawExchange {
  readonly socket: Socket;
  /** The worker's host:port, for the Host header of the request sent up. */
  readonly host: string;
  /** The answer is over (or failed): nothing more goes up. */
  readonly settled: boolean;
  /** The whole request went up: the connection may carry another one after this answer. */
  sent(): void;
  readonly outcome: Promise<ProxyOutcome>;
}

/**
 * Open an exchange with the worker at `target.upstream` (a pooled connection; only for workers
 * `UpstreamPool.supports`): its answer is read with llhttp and passed to `down` as it arrives. The caller writes
 * the request head (and body) to `socket`. No retry.
 */
export function openExchange(
  pool: UpstreamPool,
  down: Downstream,
  target: { upstream: UpstreamAddress; workerId: string; timeoutMs?: number },
  isHead: boolean,
  onSettled?: (outcome: ProxyOutcome) => void,
): RawExchange {
  const exchange = new PooledExchange(pool.acquire(target.upstream), down, target.upstream.host, target.workerId, isHead, onSettled);
  if (target.timeoutMs !== undefined && !exchange.settled) exchange.waitAtMost(pool, target.timeoutMs);
  return exchange;
}

/** One request on a pooled connection: the connection's events in, the answer out to the downstream. */
class PooledExchange implements Exchange, RawExchange {
  readonly socket: Socket;
  readonly passesLong: boolean;
  settled = false;
  private requestSent = false;
  private headSent = false;
  /** A streamed answer's head, given to the downstream in this read and not sent yet (see `afterRead`). */
  private streamHeadHeld = false;
  private informational = false;
  private keepAlive = false;
  private pending: Buffer[] = [];
  private complete = false;
  private waitingDrain = false;
  private headFailure: Error | undefined;
  /** Until when the head of the answer may take (the pool's coarse clock), when it is in `pool.waiting`. */
  deadline = Infinity;
  private timeoutMs = 0;
  private pool: UpstreamPool | undefined;
  // The outcome as a promise only for a caller that asks for one (the front takes `onSettled`: no promise a request).
  private result: ProxyOutcome | undefined;
  private resolve: ((outcome: ProxyOutcome) => void) | undefined;
  private promise: Promise<ProxyOutcome> | undefined;

  constructor(
    private readonly conn: UpstreamConnection,
    private readonly down: Downstream,
    readonly host: string,
    private readonly workerId: string,
    private readonly isHead: boolean,
    private readonly onSettled: ((outcome: ProxyOutcome) => void) | undefined,
  ) {
    this.socket = conn.socket;
    this.passesLong = down.long !== undefined && down.holding !== undefined;
    conn.begin(this, down.whole !== undefined && !isHead);
    // The caller went away: stop the worker's side too (the connection is not reused).
    down.onGone(() => {
      if (this.settled) return;
      conn.end(false);
      this.settle("client-gone");
    });
  }

  get outcome(): Promise<ProxyOutcome> {
    this.promise ??= this.result !== undefined ? Promise.resolve(this.result) : new Promise<ProxyOutcome>((r) => (this.resolve = r));
    return this.promise;
  }

  sent(): void {
    this.requestSent = true;
  }

  /**
   * A worker that does not begin its answer within `timeoutMs` (the endpoint's executionTimeout) gets the
   * caller a 504, and its connection closed. Checked by the pool's sweep, not a timer a request (timers cost more
   * than the rest of a request here); a begun answer (a stream) may run longer.
   */
  waitAtMost(pool: UpstreamPool, timeoutMs: number): void {
    this.pool = pool;
    this.timeoutMs = timeoutMs;
    // The coarse clock may be a sweep behind: one more sweep, so the deadline never comes early.
    this.deadline = pool.clock + timeoutMs + SWEEP_MS;
    pool.waiting.add(this);
  }

  timeOut(): void {
    this.answerBegun();
    if (this.settled) return;
    this.conn.end(false);
    if (this.down.gone) return this.settle("client-gone");
    this.down.workerFailed(this.workerId, `The worker ${this.workerId} did not answer within ${this.timeoutMs} ms (the endpoint's executionTimeout); it was not retried`, 504);
    this.settle("timed-out");
  }

  /** The answer began (or the exchange is over): no deadline any more. */
  private answerBegun(): void {
    if (this.pool === undefined) return;
    this.pool.waiting.delete(this);
    this.pool = undefined;
  }

  private settle(value: ProxyOutcome): void {
    if (this.settled) return;
    this.answerBegun();
    this.settled = true;
    this.result = value;
    this.resolve?.(value);
    this.onSettled?.(value);
  }

  onFailure(err: Error): void {
    if (this.settled) return;
    if (this.down.gone) return this.settle("client-gone");
    this.down.workerFailed(this.workerId, `The worker ${this.workerId} failed while handling the request (${err.message}); it was not retried`, 502, err.message);
    this.settle("worker-failed");
  }

  onWhole(answer: ScannedResponse, data: Buffer, bodyStart: number): void {
    if (this.settled) return;
    // The caller's answer goes out first: the bookkeeping after it (the deadline, the pool, the worker's
    // counters) is then not part of the caller's wait. Nothing can read the connection before this returns.
    try {
      this.down.whole!(answer, data, bodyStart, this.workerId);
    } finally {
      this.answerBegun();
      this.conn.end(answer.keepAlive && this.requestSent);
      this.settle("ok");
    }
  }

  onLongHead(answer: ScannedResponse, data: Buffer, bodyStart: number, bodyEnd: number, last: boolean): void {
    if (this.settled) return;
    this.answerBegun();
    this.headSent = true;
    this.keepAlive = answer.keepAlive;
    const more = this.down.long!(answer, data, bodyStart, bodyEnd, this.workerId);
    if (last) {
      this.conn.end(answer.keepAlive && this.requestSent);
      this.settle("ok");
      this.down.end(undefined);
      return;
    }
    if (!more) this.catchUp();
  }

  onLongBody(chunk: Buffer, last: boolean, reusable: boolean): boolean {
    if (this.settled) return false;
    if (last) {
      this.conn.end(reusable && this.keepAlive && this.requestSent);
      this.settle("ok");
      this.down.end(chunk);
      return this.down.holding!();
    }
    if (!this.down.write(chunk)) this.catchUp();
    return this.down.holding!();
  }

  holdingBody(): boolean {
    return this.down.holding!();
  }

  /** The caller reads slower than the worker writes: stop reading the worker until it catches up. */
  private catchUp(): void {
    if (this.waitingDrain) return;
    this.waitingDrain = true;
    this.conn.socket.pause();
    this.down.onDrain(() => {
      this.waitingDrain = false;
      this.conn.socket.resume();
    });
  }

  onHead(status: number, headers: string[], alive: boolean): number {
    if (status >= 100 && status < 200) {
      this.informational = true;
      return 1; // no body; the real answer follows
    }
    this.answerBegun();
    this.keepAlive = alive;
    let known = false;
    for (let i = 0; i < headers.length; i += 2) if (headers[i]!.length === 14 && headers[i]!.toLowerCase() === "content-length") known = true;
    const framing = this.isHead || status === 204 || status === 304 ? "none" : known ? "length" : "stream";
    try {
      this.down.head(status, downstreamRawHeaders(headers, this.workerId), framing);
    } catch (err) {
      // A header node will not send (invalid characters): the answer cannot be passed on.
      this.headFailure = err as Error;
      return 1;
    }
    this.headSent = true;
    this.streamHeadHeld = framing === "stream";
    return this.isHead ? 1 : 0;
  }

  onBody(chunk: Buffer): void {
    this.pending.push(chunk);
  }

  onComplete(): void {
    if (this.informational) this.informational = false;
    else this.complete = true;
  }

  /**
   * What the parser gave in one read goes down in one write, the head included when it came in this read (a
   * small chunked answer is one write, not one for its head and one for its body); the last piece ends the
   * answer. A head without body yet (a stream's first read) goes out on its own, so a streamed answer begins at
   * once.
   */
  afterRead(): void {
    if (this.settled) return;
    if (this.headFailure) {
      this.conn.end(false);
      return this.onFailure(this.headFailure);
    }
    if (!this.headSent) return;
    const chunks = this.pending;
    this.pending = [];
    if (this.complete) {
      this.conn.end(this.keepAlive && this.requestSent);
      this.settle("ok");
      this.down.end(chunks.length === 0 ? undefined : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
      return;
    }
    if (chunks.length === 0) {
      if (this.streamHeadHeld) this.down.flushHead();
      this.streamHeadHeld = false;
      return;
    }
    this.streamHeadHeld = false;
    let more = true;
    for (const chunk of chunks) more = this.down.write(chunk) && more;
    if (!more) this.catchUp();
  }
}

/**
 * `forward` on a pooled raw connection (see above): the same behaviour, the same outcomes. Only for workers
 * `UpstreamPool.supports`.
 */
export function forwardRaw(
  pool: UpstreamPool,
  req: IncomingMessage,
  res: ServerResponse,
  target: { upstream: UpstreamAddress; path: string; workerId: string; endpointId: string; timeoutMs?: number; credentialLine?: string },
): Promise<ProxyOutcome> {
  const exchange = openExchange(pool, responseDownstream(req, res), target, req.method === "HEAD");
  const credentialLine = target.credentialLine ?? "";
  const socket = exchange.socket;
  const host = exchange.host;
  const info = { host: req.headers.host, remote: req.socket.remoteAddress };
  const hasBody = req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined;
  if (!hasBody) {
    req.resume();
    socket.write(requestHead(req.method ?? "GET", target.path, host, req.rawHeaders, info, false, credentialLine), "latin1");
    exchange.sent();
    return exchange.outcome;
  }
  const length = Number(req.headers["content-length"]);
  const chunked = req.headers["transfer-encoding"] !== undefined;
  const head = requestHead(req.method ?? "GET", target.path, host, req.rawHeaders, info, chunked, credentialLine);
  if (!chunked && Number.isFinite(length) && length <= SMALL_BODY_BYTES) {
    // A small body is read whole, then goes up with the head in one write.
    const parts: Buffer[] = [];
    req.on("data", (chunk: Buffer) => parts.push(chunk));
    req.on("end", () => {
      if (exchange.settled) return;
      socket.write(Buffer.concat([Buffer.from(head, "latin1"), ...parts]));
      exchange.sent();
    });
    return exchange.outcome;
  }
  // A large or chunked body streams up as it arrives.
  socket.write(head, "latin1");
  req.on("data", (chunk: Buffer) => {
    if (chunk.length === 0) return;
    const framed = chunked ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`, "latin1"), chunk, CRLF]) : chunk;
    if (!socket.write(framed)) {
      req.pause();
      socket.once("drain", () => req.resume());
    }
  });
  req.on("end", () => {
    if (chunked && !socket.destroyed) socket.write("0\r\n\r\n");
    exchange.sent();
  });
  return exchange.outcome;
}
