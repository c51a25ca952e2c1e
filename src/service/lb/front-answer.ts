// What the LB front writes to one caller (front-connection.ts): its own answers, as node:http would write them (a
// JSON 200, a 204, a problem), and a worker's or another replica's answer passed down as it comes (`Downstream`).
// Apart from the request loop so that the bytes of an answer are one concern; a base class of the connection, so
// that the connection stays the one object a request uses, with no object or call between it and its answer.

import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { problemResponse, type HttpProblem } from "../http/problems.js";
import { spliceHead, type ScannedResponse } from "./head-scan.js";
import type { Downstream } from "./exchange.js";
import type { UpstreamAddress } from "./upstream.js";
import type { LbFront } from "./front.js";

const LAST_CHUNK = Buffer.from("0\r\n\r\n", "latin1");
const CRLF = Buffer.from("\r\n", "latin1");

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

export abstract class FrontAnswer implements Downstream {
  /** The connection closes once the answer in progress is over. */
  protected closeAfter = false;
  /** Called if the caller leaves while its request waits or is served. */
  protected goneListener: (() => void) | undefined;
  // The answer in progress (see Downstream, below).
  private limits = "";
  /** The answer in progress is another replica's (relay): its RateLimit lines pass, no x-svc-worker is added. */
  private relaying: UpstreamAddress | undefined;
  protected relayDown: Downstream | undefined;
  protected isHead = false;
  private pendingHead: string | undefined;
  private headWritten = false;
  private chunked = false;

  constructor(
    protected readonly front: LbFront,
    readonly socket: Socket,
  ) {}

  /** The answer is over: the connection goes on with its next request, or closes. */
  protected abstract answered(): void;

  /** A 200 answer with a JSON body, as node:http's sendText writes it. */
  protected json(text: string, limits: string): void {
    if (this.socket.destroyed) return;
    this.socket.write(
      `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n${this.serviceHeaders(limits, false)}\r\n${text}`,
    );
    this.answered();
  }

  /** A 204 answer, as node:http's `writeHead(204).end()` writes it. */
  protected noContent(): void {
    if (this.socket.destroyed) return;
    this.socket.write(`HTTP/1.1 204 No Content\r\n${this.serviceHeaders("", false)}\r\n`);
    this.answered();
  }

  /** A problem+json answer of the LB route or of a `/run` (the request's bytes were read whole). */
  protected problem(status: number, detail: string, headers: Record<string, string>, limits: string, isHead: boolean, extra?: HttpProblem): void {
    if (this.socket.destroyed) return;
    let lines = "";
    for (const [name, value] of Object.entries(headers)) lines += `${name}: ${value}\r\n`;
    // (An answer to HEAD has the headers of the answer to GET, and no body.)
    this.socket.write(
      problemResponse(status, detail, `${lines}${this.serviceHeaders(limits, false)}`, !isHead, { errors: extra?.errors, members: extra?.members }),
    );
    this.answered();
  }

  /** The header lines the service adds to every answer: RateLimit (`limits`), Date unless the worker sent one, Connection. */
  private serviceHeaders(limits: string, hasDate: boolean): string {
    return `${limits}${hasDate ? "" : `date: ${httpDate()}\r\n`}${this.connectionHeaders()}`;
  }

  private connectionHeaders(): string {
    return this.closeAfter ? "connection: close\r\n" : this.front.keepAliveHeaders;
  }

  /**
   * This connection as the downstream of relayed answers: without `whole`, which takes an answer by its bytes
   * less its RateLimit lines (the front's own replace them; a relayed answer's are the other replica's).
   */
  protected relayDownstream(): Downstream {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const conn = this;
    return {
      get gone() {
        return conn.gone;
      },
      head: (status, headers, framing) => conn.head(status, headers, framing),
      flushHead: () => conn.flushHead(),
      write: (chunk) => conn.write(chunk),
      end: (chunk) => conn.end(chunk),
      onDrain: (listener) => conn.onDrain(listener),
      onGone: (listener) => conn.onGone(listener),
      workerFailed: (_id, detail, _status, cause) => conn.relayFailed(cause ?? detail),
    };
  }

  /** As cluster/forward.ts answers a replica serving jobs that does not answer: 503, retry in a few seconds. */
  private relayFailed(cause: string): void {
    if (this.headWritten) return void this.socket.destroy();
    this.problem(
      503,
      `The replica serving jobs at ${this.relaying?.protocol ?? "http:"}//${this.relaying?.host ?? "?"} does not answer (${cause}); retry in a few seconds`,
      { "retry-after": "5" },
      "",
      false,
    );
  }

  /** The state of an answer passed down from a worker (or, `relaying`, from another replica), before it begins. */
  protected beginAnswer(limits: string, isHead: boolean, relaying: UpstreamAddress | undefined): void {
    this.limits = limits;
    this.isHead = isHead;
    this.relaying = relaying;
    this.pendingHead = undefined;
    this.headWritten = false;
    this.chunked = false;
  }

  // ---- Downstream: the worker's answer, written straight to the caller's socket. The connection is the
  // downstream of its one request at a time (no object or closures a request); `forward` resets the state.

  get gone(): boolean {
    return this.socket.destroyed;
  }

  /** (An empty piece framed would be the last chunk: it is nothing to send.) */
  private frame(chunk: Buffer): Buffer[] {
    return chunk.length === 0 ? [] : this.chunked ? [Buffer.from(`${chunk.length.toString(16)}\r\n`, "latin1"), chunk, CRLF] : [chunk];
  }

  private send(parts: Buffer[]): boolean {
    if (this.pendingHead !== undefined) {
      parts.unshift(Buffer.from(this.pendingHead, "latin1"));
      this.pendingHead = undefined;
      this.headWritten = true;
    }
    if (parts.length === 0) return true;
    return this.socket.write(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  }

  head(status: number, headers: string[], framing: "length" | "none" | "stream"): void {
    let text = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Unknown"}\r\n`;
    let date = false;
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!;
      const lower = name.length === 4 || name.length === 9 || name.length === 12 || name.length === 16 ? name.toLowerCase() : "";
      if (lower === "date") date = true;
      // The service's rate-limit state replaces a worker's (as node:http's setHeader does on that path); a relayed
      // answer's is the other replica's own, which counted the request, and it came from no worker.
      else if (this.relaying === undefined ? lower === "ratelimit" || lower === "ratelimit-policy" : lower === "x-svc-worker") continue;
      text += `${name}: ${headers[i + 1]}\r\n`;
    }
    this.chunked = framing === "stream";
    text += `${this.serviceHeaders(this.limits, date)}${this.chunked ? "transfer-encoding: chunked\r\n" : ""}\r\n`;
    // It goes out with the body's first piece, or on its own (`flushHead`) when none came in the same read.
    this.pendingHead = text;
  }

  flushHead(): void {
    this.send([]);
  }

  write(chunk: Buffer): boolean {
    return this.send(this.frame(chunk));
  }

  end(chunk: Buffer | undefined): void {
    const parts = chunk ? this.frame(chunk) : [];
    if (this.chunked) parts.push(LAST_CHUNK);
    this.send(parts);
    this.answered();
  }

  onDrain(listener: () => void): void {
    this.socket.once("drain", listener);
  }

  onGone(listener: () => void): void {
    this.goneListener = listener;
  }

  whole(answer: ScannedResponse, data: Buffer, bodyStart: number, workerId: string): void {
    const first = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? "Unknown"}\r\n`;
    const last = `x-svc-worker: ${workerId}\r\n${this.serviceHeaders(this.limits, answer.date)}\r\n`;
    const out = spliceHead(first, data, answer.lines, last, data.subarray(bodyStart, bodyStart + answer.contentLength));
    this.headWritten = true;
    this.socket.write(out);
    this.answered();
  }

  long(answer: ScannedResponse, data: Buffer, bodyStart: number, bodyEnd: number, workerId: string): boolean {
    const first = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? "Unknown"}\r\n`;
    const last = `x-svc-worker: ${workerId}\r\n${this.serviceHeaders(this.limits, answer.date)}\r\n`;
    this.pendingHead = undefined;
    this.chunked = false;
    this.headWritten = true;
    return this.socket.write(spliceHead(first, data, answer.lines, last, data.subarray(bodyStart, bodyEnd)));
  }

  holding(): boolean {
    return this.socket.writableLength > 0;
  }

  workerFailed(workerId: string, detail: string, status: 502 | 504 = 502): void {
    // Part of the answer went out: it can only be cut short.
    if (this.headWritten) return void this.socket.destroy();
    this.problem(status, detail, { "x-svc-worker": workerId }, this.limits, this.isHead);
  }
}
