// One request through a pooled raw connection to a load-balanced worker (upstream.ts), from the caller's side:
// the request head written by hand (`requestHead`), the answer passed to a `Downstream` as it arrives, the
// worker's deadline and the outcome. A downstream is node's ServerResponse (`forwardRaw`) or the LB front's own
// connection (front.ts). Apart from the connections because an exchange lives for one request and decides what
// the caller gets; the connection only reads.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { sendProblem } from "../http/problems.js";
import { forwardedLines, FORWARDED, HOP_BY_HOP, type ScannedResponse } from "./head-scan.js";
import type { ProxyOutcome } from "./proxy.js";
import { SMALL_BODY_BYTES, SWEEP_MS, type Exchange, type UpstreamAddress, type UpstreamConnection, type UpstreamPool } from "./upstream.js";
import { LB_CREDENTIAL_HEADER } from "../../lb-credential.js";
import { asError } from "../../errors.js";

const CRLF = Buffer.from("\r\n", "latin1");

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
  onSettled?: (outcome: ProxyOutcome, status: number) => void,
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
  /** The status the caller got (the worker's, or the 502/504 answered for it); 0 while none. */
  private status = 0;

  constructor(
    private readonly conn: UpstreamConnection,
    private readonly down: Downstream,
    readonly host: string,
    private readonly workerId: string,
    private readonly isHead: boolean,
    private readonly onSettled: ((outcome: ProxyOutcome, status: number) => void) | undefined,
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
    this.down.workerFailed(
      this.workerId,
      `The worker ${this.workerId} did not answer within ${this.timeoutMs} ms (the endpoint's executionTimeout); it was not retried`,
      504,
    );
    this.status = 504;
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
    this.onSettled?.(value, this.status);
  }

  onFailure(err: Error): void {
    if (this.settled) return;
    if (this.down.gone) return this.settle("client-gone");
    this.down.workerFailed(
      this.workerId,
      `The worker ${this.workerId} failed while handling the request (${err.message}); it was not retried`,
      502,
      err.message,
    );
    // A cut answer counts as the 502 it would have been before its head.
    this.status = 502;
    this.settle("worker-failed");
  }

  onWhole(answer: ScannedResponse, data: Buffer, bodyStart: number): void {
    if (this.settled) return;
    // The caller's answer goes out first: the bookkeeping after it (the deadline, the pool, the worker's
    // counters) is then not part of the caller's wait. Nothing can read the connection before this returns.
    this.status = answer.status;
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
    this.status = answer.status;
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
      this.headFailure = asError(err);
      return 1;
    }
    this.headSent = true;
    this.status = status;
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
