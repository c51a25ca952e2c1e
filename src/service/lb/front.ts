// The LB front: a fast path on the service's port for requests to load-balanced endpoints.
//
// issue 7 (performance): behind node:http, one proxied request cost ~2x the same request sent to the worker
// directly (IncomingMessage/ServerResponse objects, header validation and serialization, the request
// handler's promise chain). The front takes each new connection first and serves, itself, the LB requests it
// can read whole and simply: HTTP/1.1, whole head in hand, no body or a small one of known length, a valid key
// (looked up once if new), within the rate limit. It runs the LB route's checks and wait (LbRouter.admit), so a
// cold start or a route problem keeps the connection here. Anything else (another route, a bad key, a 429, a
// chunked or large body, HTTP/1.0, a parse error) hands the connection to node:http, bytes and all, from that
// request on: node:http then answers exactly as it would have (the LB route included). One request at a time per
// connection; pipelined requests wait their turn.
//
// It reads requests with llhttp, node:http's own parser (fed exactly one request head at a time, so request
// boundaries are known and a hand-over can give node the bytes of the request it has not answered), and
// passes the worker's answer on through the same exchange as the node:http path (proxy.ts `openExchange`).

import { STATUS_CODES, type Server } from "node:http";
import type { Socket } from "node:net";
import type { Principal } from "../auth.js";
import { credentialFromHeader, HttpProblem, problemResponse } from "../http.js";
import { lbTarget, type LbRouter, type LbWorker } from "./index.js";
import { llhttp, requestHead, SMALL_BODY_BYTES, type Downstream, type LlhttpParser } from "./proxy.js";

export interface FrontDeps {
  lb: LbRouter;
  /** The principal of a key already known to be valid (no I/O); undefined when it is not known yet or invalid. */
  principal(key: string): Principal | undefined;
  /** Look a key up (the store), so that `principal` knows it afterwards if it is valid. */
  authenticate(key: string): Promise<unknown>;
  /** Count one request: its RateLimit header lines ("name: value\r\n"...), or undefined when it is refused. */
  rateLimit(principal: Principal): string | undefined;
  /** How long an idle connection is kept (the server's keepAliveTimeout). */
  keepAliveMs: number;
  log(message: string): void;
}

/** node's parser limit for a request head (its default --max-http-header-size). */
const MAX_HEAD_BYTES = 16 * 1024;
/** While a request is served, at most this much of the next ones is read ahead; then the socket is paused. */
const READ_AHEAD_BYTES = 256 * 1024;
const HEAD_END = Buffer.from("\r\n\r\n", "latin1");
const LB_HOST = Buffer.from(".lb.localhost", "latin1");
/** How often idle and stalled connections are looked at. */
const SWEEP_MS = 2_000;
/** A request whose body stops arriving for this long is handed to node:http (which then applies its timeouts). */
const STALLED_MS = 4_000;
const LAST_CHUNK = Buffer.from("0\r\n\r\n", "latin1");

let dateText = "";
let dateSecond = 0;
/** The Date header's value, made once a second (as node:http does). */
function httpDate(): string {
  const now = Date.now();
  if (now - dateSecond >= 1000 || dateText === "") {
    dateSecond = now - (now % 1000);
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

/** Whether the request that starts `data` might address an LB endpoint: by path, or by an `*.lb.localhost` host. Pure. */
export function mayBeLb(data: Buffer, headEnd: number): boolean {
  const space = data.indexOf(32);
  if (space > 0 && space < 16 && data[space + 1] === 0x2f && data[space + 2] === 0x6c && data[space + 3] === 0x62 && data[space + 4] === 0x2f) return true;
  const host = data.indexOf(LB_HOST);
  return host > 0 && host < headEnd;
}

/** One request head, as the front needs it. */
interface Head {
  method: string;
  url: string;
  headers: string[];
  keepAlive: boolean;
  /** Set when the front must not serve it (node:http will). */
  refuse: boolean;
  authorization?: string;
  host?: string;
  contentLength: number;
}

export class LbFront {
  readonly connections = new Set<FrontConnection>();
  closing = false;
  /** Requests the front served, and connections it handed to node:http (tests and diagnostics). */
  readonly stats = { served: 0, handedOver: 0 };
  /**
   * A coarse clock (epoch ms) advanced by the sweep, which closes idle connections and hands stalled ones to
   * node:http: a socket timeout re-armed on every read and write cost more than the rest of the request.
   */
  now = Date.now();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    readonly deps: FrontDeps,
    readonly handOver: (socket: Socket) => void,
  ) {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  private sweep(): void {
    this.now = Date.now();
    for (const conn of this.connections) conn.sweep(this.now);
  }

  /**
   * Put the front in front of an http.Server: its own connection listener (node's) becomes the hand-over.
   * Undefined when node's parser is not available or the server's listener is not where expected: node:http
   * then serves everything, as before.
   */
  static install(server: Server, deps: FrontDeps): LbFront | undefined {
    const listeners = server.listeners("connection");
    if (!llhttp || listeners.length !== 1) return undefined;
    const nodeConnection = listeners[0] as (socket: Socket) => void;
    server.removeListener("connection", nodeConnection);
    const front = new LbFront(deps, (socket) => nodeConnection.call(server, socket));
    server.on("connection", (socket: Socket) => front.accept(socket));
    return front;
  }

  accept(socket: Socket): void {
    if (this.closing) return this.handOver(socket);
    this.connections.add(new FrontConnection(this, socket));
  }

  /** Stop: idle connections close now, busy ones after their answer. */
  close(): void {
    this.closing = true;
    for (const conn of this.connections) conn.closeWhenIdle();
  }

  destroy(): void {
    clearInterval(this.sweeper);
    for (const conn of this.connections) conn.socket.destroy();
  }
}

class FrontConnection {
  private buffer: Buffer | undefined;
  /** A request is being served (its answer is not over). */
  private busy = false;
  private closeAfter = false;
  private gone: (() => void) | undefined;
  private readonly parser: LlhttpParser;
  private head: Head | undefined;
  private partial: string[] = [];
  private readonly remote: string | undefined;
  /** The key last looked up for the request at the head of the buffer (looked up once, then node:http decides). */
  private lookedUp: string | undefined;
  /** Since when it has been waiting for the caller (the front's coarse clock). */
  private waitingSince: number;

  constructor(
    private readonly front: LbFront,
    readonly socket: Socket,
  ) {
    const P = llhttp!.Parser;
    this.parser = new P();
    this.parser[P.kOnHeaders] = ((headers: string[]) => {
      this.partial.push(...headers);
    }) as never;
    this.parser[P.kOnHeadersComplete] = ((major: number, minor: number, headers: string[] | undefined, method: number, url: string, _s: unknown, _m: unknown, upgrade: boolean, keepAlive: boolean) => {
      this.head = this.readHead(major === 1 && minor === 1 && !upgrade, headers ?? this.partial, method, url, keepAlive);
      this.partial = [];
      return 1; // the front reads the body itself
    }) as never;
    this.remote = socket.remoteAddress;
    socket.on("data", this.onData);
    socket.on("end", this.onEnd);
    socket.on("error", this.onError);
    socket.on("close", this.onClose);
    this.waitingSince = front.now;
  }

  private readonly onData = (chunk: Buffer) => {
    this.buffer = this.buffer === undefined || this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    if (this.busy) {
      // Pipelined requests wait; a caller that keeps sending while it is not answered is slowed down.
      if (this.buffer.length > READ_AHEAD_BYTES) this.socket.pause();
      return;
    }
    this.next();
  };

  private readonly onEnd = () => {
    // The caller will send nothing more: answer what is in progress, then close. Not busy, anything buffered is
    // a request cut short (whole ones are decided at once), which no one can answer.
    if (this.busy) this.closeAfter = true;
    else if (this.buffer && this.buffer.length > 0) this.socket.destroy();
    else this.socket.end();
  };

  private readonly onError = () => {
    this.socket.destroy();
  };

  private readonly onClose = () => {
    this.front.connections.delete(this);
    const gone = this.gone;
    this.gone = undefined;
    gone?.();
  };

  /** An idle keep-alive connection closes (as node:http's keepAliveTimeout); a stalled body goes to node:http. */
  sweep(now: number): void {
    if (this.busy) return;
    const waited = now - this.waitingSince;
    if (this.buffer && this.buffer.length > 0) {
      if (waited >= STALLED_MS) this.giveToNode();
    } else if (waited >= this.front.deps.keepAliveMs) this.socket.destroy();
  }

  closeWhenIdle(): void {
    if (this.busy) this.closeAfter = true;
    else this.socket.destroy();
  }

  /** Serve the next request in the buffer, or hand the connection over when the front cannot. */
  private next(): void {
    const data = this.buffer;
    if (!data || data.length === 0 || this.busy) return;
    try {
      this.serveOrHandOver(data);
    } catch (err) {
      this.front.deps.log(`lb front: internal error: ${(err as Error).stack ?? String(err)}`);
      this.socket.destroy();
    }
  }

  private serveOrHandOver(data: Buffer): void {
    const headEnd = data.indexOf(HEAD_END);
    // Not all of the head is here (or not an LB request at all): node:http takes it from here.
    if (headEnd < 0 || headEnd + 4 > MAX_HEAD_BYTES || !mayBeLb(data, headEnd)) return this.giveToNode();
    this.head = undefined;
    this.parser.initialize(llhttp!.Parser.REQUEST, {}, MAX_HEAD_BYTES, 0);
    const parsed = this.parser.execute(data.subarray(0, headEnd + 4));
    const head = this.head as Head | undefined;
    if (parsed instanceof Error || !head || head.refuse) return this.giveToNode();
    const total = headEnd + 4 + head.contentLength;
    if (data.length < total) {
      // The body is on its way: wait for it (nothing decided yet; a stalled body goes to node:http on timeout).
      return;
    }
    const target = lbTarget(head.url, head.host);
    const credential = credentialFromHeader(head.authorization);
    if (!target || !credential) return this.giveToNode();
    const principal = this.front.deps.principal(credential.key);
    if (!principal) {
      // A key not seen yet (the first request of a client, often): look it up once, then decide again, so the
      // connection stays here. Still unknown or invalid: node:http answers the 401.
      if (this.lookedUp === credential.key) return this.giveToNode();
      this.lookedUp = credential.key;
      this.busy = true;
      void this.front.deps.authenticate(credential.key).then(
        () => this.resume(),
        () => this.resume(),
      );
      return;
    }
    this.lookedUp = undefined;
    const lb = this.front.deps.lb;
    const body = data.subarray(headEnd + 4, total);
    const worker = lb.takeNow(principal, target.endpointId);
    const limits = this.front.deps.rateLimit(principal);
    // Over the rate limit: node:http answers the 429 (a refused request is not counted, so it counts the same).
    if (limits === undefined) {
      if (worker) lb.release(worker);
      return this.giveToNode();
    }
    // Committed: this request is the front's.
    this.buffer = data.length === total ? undefined : data.subarray(total);
    this.busy = true;
    if (!head.keepAlive || this.front.closing) this.closeAfter = true;
    this.front.stats.served++;
    if (worker) {
      void lb.serve(worker, () => this.forward(worker, head, target.path, limits, body));
      return;
    }
    // No worker free now (a cold start, all busy) or a problem to answer: the LB route's own checks and wait,
    // here, so that the caller's connection stays on the front afterwards.
    lb.admit(principal, target.endpointId, (gone) => (this.gone = gone)).then(
      (admitted) => {
        this.gone = undefined;
        if (this.socket.destroyed) return lb.release(admitted);
        if (!lb.canExchange(admitted)) {
          lb.release(admitted);
          return this.problem(502, `The worker ${admitted.id} speaks https, which the LB front does not forward; set SVC_LB_FRONT=off`, {}, limits, head.method === "HEAD");
        }
        void lb.serve(admitted, () => this.forward(admitted, head, target.path, limits, body));
      },
      (err: unknown) => {
        this.gone = undefined;
        if (err instanceof HttpProblem) this.problem(err.status, err.message, err.headers ?? {}, limits, head.method === "HEAD");
        // else: the caller left while waiting
      },
    );
  }

  /** A problem+json answer of the LB route (the request's bytes were read whole). */
  private problem(status: number, detail: string, headers: Record<string, string>, limits: string, isHead: boolean): void {
    if (this.socket.destroyed) return;
    let lines = "";
    for (const [name, value] of Object.entries(headers)) lines += `${name}: ${value}\r\n`;
    // (An answer to HEAD has the headers of the answer to GET, and no body.)
    this.socket.write(problemResponse(status, detail, `${lines}${limits}date: ${httpDate()}\r\n${this.connectionHeaders()}`, !isHead));
    this.answered();
  }

  private connectionHeaders(): string {
    return this.closeAfter ? "connection: close\r\n" : `connection: keep-alive\r\nkeep-alive: timeout=${Math.floor(this.front.deps.keepAliveMs / 1000)}\r\n`;
  }

  /** What the front needs of a parsed head; `refuse` when node:http must serve it. */
  private readHead(http11: boolean, headers: string[], method: number, url: string, keepAlive: boolean): Head {
    const head: Head = { method: llhttp!.methods[method] ?? "", url, headers, keepAlive, refuse: !http11 || url[0] !== "/", contentLength: 0 };
    let lengths = 0;
    for (let i = 0; i < headers.length && !head.refuse; i += 2) {
      const name = headers[i]!;
      // Only the names the front acts on are lowercased (by length first: most headers are none of them).
      switch (name.length) {
        case 4:
          if (name.toLowerCase() === "host") head.host = head.host === undefined ? headers[i + 1] : (head.refuse = true, undefined);
          break;
        case 6:
          if (name.toLowerCase() === "expect") head.refuse = true;
          break;
        case 7:
          if (name.toLowerCase() === "upgrade") head.refuse = true;
          break;
        case 13:
          if (name.toLowerCase() === "authorization") head.authorization = head.authorization === undefined ? headers[i + 1] : ((head.refuse = true), undefined);
          break;
        case 14:
          if (name.toLowerCase() === "content-length") {
            const value = headers[i + 1]!;
            lengths++;
            if (!/^\d{1,6}$/.test(value) || Number(value) > SMALL_BODY_BYTES || lengths > 1) head.refuse = true;
            else head.contentLength = Number(value);
          }
          break;
        case 17:
          if (name.toLowerCase() === "transfer-encoding") head.refuse = true;
          break;
      }
    }
    return head;
  }

  private forward(worker: LbWorker, head: Head, path: string, limits: string, body: Buffer) {
    const down = this.downstream(limits, head.method === "HEAD");
    const exchange = this.front.deps.lb.exchange(worker, down, head.method === "HEAD");
    const text = requestHead(head.method, path, exchange.host, head.headers, { host: head.host, remote: this.remote }, false);
    if (body.length === 0) exchange.socket.write(text, "latin1");
    else exchange.socket.write(Buffer.concat([Buffer.from(text, "latin1"), body]));
    exchange.sent();
    return exchange.outcome;
  }

  /** After a key lookup: decide again on the same bytes (the caller may have left meanwhile). */
  private resume(): void {
    this.busy = false;
    if (this.socket.destroyed) return;
    if (this.closeAfter && !(this.buffer && this.buffer.length > 0)) return void this.socket.end();
    this.next();
  }

  /** The answer is over: the next request (if already here), or close when asked. */
  private answered(): void {
    this.busy = false;
    this.gone = undefined;
    if (this.closeAfter) {
      this.socket.end();
      return;
    }
    if (this.socket.isPaused()) this.socket.resume();
    this.waitingSince = this.front.now;
    if (this.buffer && this.buffer.length > 0) setImmediate(() => this.next());
  }

  /** From here on, node:http serves this connection, starting with the bytes not answered yet. */
  private giveToNode(): void {
    const socket = this.socket;
    this.front.connections.delete(this);
    this.front.stats.handedOver++;
    socket.pause();
    socket.removeListener("data", this.onData);
    socket.removeListener("end", this.onEnd);
    socket.removeListener("error", this.onError);
    socket.removeListener("close", this.onClose);
    if (this.buffer && this.buffer.length > 0) socket.unshift(this.buffer);
    this.buffer = undefined;
    this.front.handOver(socket);
    // node's listener is on; the bytes given back are read before any new ones (next tick, before I/O).
    socket.resume();
  }

  /** The worker's answer, written straight to the caller's socket. */
  private downstream(limits: string, isHead: boolean): Downstream {
    const socket = this.socket;
    let pendingHead: string | undefined;
    let headWritten = false;
    let chunked = false;
    // (An empty piece framed would be the last chunk: it is nothing to send.)
    const frame = (chunk: Buffer): Buffer[] =>
      chunk.length === 0 ? [] : chunked ? [Buffer.from(`${chunk.length.toString(16)}\r\n`, "latin1"), chunk, Buffer.from("\r\n", "latin1")] : [chunk];
    const send = (parts: Buffer[]): boolean => {
      if (pendingHead !== undefined) {
        parts.unshift(Buffer.from(pendingHead, "latin1"));
        pendingHead = undefined;
        headWritten = true;
      }
      if (parts.length === 0) return true;
      return socket.write(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
    };
    return {
      get gone() {
        return socket.destroyed;
      },
      head: (status, headers, framing) => {
        let text = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Unknown"}\r\n`;
        let date = false;
        for (let i = 0; i < headers.length; i += 2) {
          const name = headers[i]!;
          const lower = name.length === 4 || name.length === 9 || name.length === 16 ? name.toLowerCase() : "";
          if (lower === "date") date = true;
          // The service's rate-limit state replaces a worker's (as node:http's setHeader does on that path).
          else if (lower === "ratelimit" || lower === "ratelimit-policy") continue;
          text += `${name}: ${headers[i + 1]}\r\n`;
        }
        if (!date) text += `date: ${httpDate()}\r\n`;
        chunked = framing === "stream";
        text += `${limits}${this.connectionHeaders()}${chunked ? "transfer-encoding: chunked\r\n" : ""}\r\n`;
        pendingHead = text;
        // A streamed answer's head goes out now; a whole one with its body.
        if (chunked) send([]);
      },
      write: (chunk) => send(frame(chunk)),
      end: (chunk) => {
        const parts = chunk ? frame(chunk) : [];
        if (chunked) parts.push(LAST_CHUNK);
        send(parts);
        this.answered();
      },
      onDrain: (listener) => socket.once("drain", listener),
      onGone: (listener) => {
        this.gone = listener;
      },
      workerFailed: (workerId, detail) => {
        // Part of the answer went out: it can only be cut short.
        if (headWritten) return void socket.destroy();
        this.problem(502, detail, { "x-svc-worker": workerId }, limits, isHead);
      },
    };
  }
}
