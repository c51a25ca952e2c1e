// One caller's connection to the LB front (front.ts): its requests read one at a time by their bytes, each served
// here (an LB request proxied to a worker, a job /run, a job read, a worker's take, a relay to the replica that
// serves jobs) or the connection handed to node:http from that request on. What it writes back to the caller, its
// own answers and a worker's passed down, is front-answer.ts, the class it extends. Apart from the front, which
// only accepts connections, sweeps them and closes them.

import type { Socket } from "node:net";
import type { Principal } from "../keys/auth.js";
import { credentialFromHeader } from "../http/wire.js";
import { problemOf } from "../http/problems.js";
import { asRouteFailure } from "../store/faults.js";
import { type LbWorker } from "./index.js";
import { lbTarget } from "./address.js";
import { hasHeaderLine, IDEMPOTENCY_KEY, relayRequestBytes, scanRequestHead, upstreamRequestBytes, type ScannedRequest } from "./head-scan.js";
import { parseAddress, SMALL_BODY_BYTES, UpstreamPool, type UpstreamAddress } from "./upstream.js";
import type { LbFront } from "./front.js";
import { FrontAnswer } from "./front-answer.js";
import { lbByHost, lbByPath, mayBeProviderCall, mayBeRead, mayBeRun, mayBeTake, READ_PATH, RUN_PATH, TAKE_PATH } from "./front-sniff.js";
import { isLongPoll, PROVIDER_ROUTES, providerWorkerCall, type ProviderWorkerCall } from "../../wire/provider-worker.js";
import { errorStack } from "../../errors.js";

/** The signal of a call that does not wait on its caller. */
const NEVER_ABORTED = new AbortController().signal;
/** node's parser limit for a request head (its default --max-http-header-size). */
const MAX_HEAD_BYTES = 16 * 1024;
/** While a request is served, at most this much of the next ones is read ahead; then the socket is paused. */
const READ_AHEAD_BYTES = 256 * 1024;
const HEAD_END = Buffer.from("\r\n\r\n", "latin1");
/** A request whose body stops arriving for this long is handed to node:http (which then applies its timeouts). */
const STALLED_MS = 4_000;

/** The last address relayed to, parsed (it changes only when another replica takes over serving jobs). */
let relayed: { target: string; address: UpstreamAddress } | undefined;
function relayAddress(target: string): UpstreamAddress {
  if (relayed?.target !== target) relayed = { target, address: parseAddress(target) };
  return relayed.address;
}

export class FrontConnection extends FrontAnswer {
  private buffer: Buffer | undefined;
  /** A request is being served (its answer is not over). */
  private busy = false;
  /** A worker's take is waiting for its answer. */
  private takeWaiting = false;
  private readonly remote: string | undefined;
  /** The Authorization value of this connection's last request, and the key read from it. */
  private authorization: string | undefined;
  private key: string | undefined;
  /** Whether that key came as `Bearer <key>` (else bare). */
  private bearer = false;
  /** The key last looked up for the request at the head of the buffer (looked up once, then node:http decides). */
  private lookedUp: string | undefined;
  /** Since when it has been waiting for the caller (the front's coarse clock). */
  private waitingSince: number;

  constructor(front: LbFront, socket: Socket) {
    super(front, socket);
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
    // A worker whose take waits does not half-close: it has gone, and the job the take would get goes to another.
    if (this.takeWaiting) return this.socket.destroy();
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
    const gone = this.goneListener;
    this.goneListener = undefined;
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
      this.front.deps.log(`lb front: internal error: ${errorStack(err)}`);
      this.socket.destroy();
    }
  }

  private serveOrHandOver(data: Buffer): void {
    const headEnd = data.indexOf(HEAD_END);
    const deps = this.front.deps;
    // Not all of the head is here (or not a request the front serves at all): node:http takes it from here.
    if (headEnd < 0 || headEnd + 4 > MAX_HEAD_BYTES) return this.giveToNode();
    // An LB path first (most of the front's requests), then the job API's, then an LB host.
    const byPath = lbByPath(data);
    const maybeRun = !byPath && deps.run !== undefined && mayBeRun(data);
    const maybeRead = !byPath && !maybeRun && deps.read !== undefined && mayBeRead(data);
    const maybeTake = !byPath && !maybeRun && !maybeRead && deps.take !== undefined && mayBeTake(data);
    const maybeProvider = !byPath && !maybeRun && !maybeRead && !maybeTake && deps.providerCall !== undefined && mayBeProviderCall(data);
    if (!byPath && !maybeRun && !maybeRead && !maybeTake && !maybeProvider && !lbByHost(data, headEnd)) return this.giveToNode();
    const head = scanRequestHead(data, headEnd, SMALL_BODY_BYTES);
    if (!head) return this.giveToNode();
    const total = headEnd + 4 + head.contentLength;
    if (data.length < total) {
      // The body is on its way: wait for it (nothing decided yet; a stalled body goes to node:http on timeout).
      return;
    }
    const runOf = maybeRun ? RUN_PATH.exec(head.url)?.[1] : undefined;
    const readOf = maybeRead && head.contentLength === 0 ? (READ_PATH.exec(head.url) ?? undefined) : undefined;
    // (A connection's requests carry the same Authorization as a rule: its key is read once.)
    if (head.authorization !== this.authorization) {
      this.authorization = head.authorization;
      const credential = credentialFromHeader(head.authorization);
      this.key = credential?.key;
      this.bearer = credential?.bearer === true;
    }
    // svc's own worker protocol takes bearer keys only (node:http answers a bare one's 401); the provider's sends them bare.
    const takes = maybeTake && head.url === TAKE_PATH && this.bearer;
    const provider = maybeProvider ? providerWorkerCall(head.method, head.url) : undefined;
    const target = runOf === undefined && readOf === undefined && !takes && !provider ? lbTarget(head.url, head.host) : undefined;
    const key = this.key;
    if ((!target && runOf === undefined && readOf === undefined && !takes && !provider) || key === undefined) return this.giveToNode();
    const principal = deps.principal(key);
    if (!principal) {
      // A key not seen yet (the first request of a client, often): look it up once, then decide again, so the
      // connection stays here. Still unknown or invalid: node:http answers the 401.
      if (this.lookedUp === key) return this.giveToNode();
      this.lookedUp = key;
      this.busy = true;
      void deps.authenticate(key).then(
        () => this.resume(),
        () => this.resume(),
      );
      return;
    }
    if (runOf !== undefined) return this.run(principal, runOf, data, head, total);
    if (takes) return this.take(principal, data, head, total);
    if (provider) return this.providerCall(principal, provider, data, head, total);
    if (readOf !== undefined) return this.read(principal, readOf[1]!, readOf[2], data, head, total);
    if (!target) return this.giveToNode();
    this.lookedUp = undefined;
    const lb = this.front.deps.lb;
    const since = performance.now();
    const body = data.subarray(headEnd + 4, total);
    const worker = lb.takeNow(principal, target.endpointId);
    const limits = this.front.deps.rateLimit(principal);
    // Over the rate limit: node:http answers the 429 (a refused request is not counted, so it counts the same).
    if (limits === undefined) {
      if (worker) lb.release(worker);
      return this.giveToNode();
    }
    this.commit(data, head, total);
    if (worker) {
      this.forward(worker, data, head, target.path, limits, body, since);
      return;
    }
    // No worker free now (a cold start, all busy) or a problem to answer: the LB route's own checks and wait,
    // here, so that the caller's connection stays on the front afterwards.
    lb.admit(principal, target.endpointId, (gone) => (this.goneListener = gone), since).then(
      (admitted) => {
        this.goneListener = undefined;
        if (this.socket.destroyed) return lb.release(admitted);
        if (!lb.canExchange(admitted)) {
          lb.release(admitted);
          return this.problem(
            502,
            `The worker ${admitted.id} speaks https, which the LB front does not forward; set SVC_LB_FRONT=off`,
            {},
            limits,
            head.method === "HEAD",
          );
        }
        this.forward(admitted, data, head, target.path, limits, body, since);
      },
      (err: unknown) => {
        this.goneListener = undefined;
        const problem = problemOf(err);
        if (problem) this.problem(problem.status, problem.message, problem.headers ?? {}, limits, head.method === "HEAD");
        // else: the caller left while waiting
      },
    );
  }

  /** Committed: this request (`data` up to `total`) is the front's to answer; what follows it waits its turn. */
  private commit(data: Buffer, head: ScannedRequest, total: number, counted: "served" | "takes" | "providerCalls" = "served"): void {
    this.buffer = data.length === total ? undefined : data.subarray(total);
    this.busy = true;
    if (!head.keepAlive || this.front.closing) this.closeAfter = true;
    this.front.stats[counted]++;
  }

  /** A job `/run`, answered here when jobs/routes.ts says it can be; node:http's otherwise. */
  private run(principal: Principal, endpointId: string, data: Buffer, head: ScannedRequest, total: number): void {
    this.lookedUp = undefined;
    const deps = this.front.deps;
    // A keyed submit claims its key first (job-routes.ts submitIdempotent): node:http's path.
    if (hasHeaderLine(data, head.lines, IDEMPOTENCY_KEY)) return this.giveToNode();
    const submit = deps.run!(principal, endpointId, data.subarray(total - head.contentLength, total), head.contentType);
    if (!submit) return this.giveToNode();
    const limits = deps.rateLimit(principal);
    // Over the rate limit: node:http answers the 429 (a refused request is not counted, so it counts the same).
    if (limits === undefined) return this.giveToNode();
    this.commit(data, head, total);
    const startedAt = deps.ranRun ? performance.now() : 0;
    submit().then(
      (text) => {
        deps.ranRun?.(endpointId, 200, startedAt);
        this.json(text, limits);
      },
      (thrown: unknown) => {
        const status = this.failed(thrown, `POST /v2/${endpointId}/run`, limits);
        deps.ranRun?.(endpointId, status, startedAt);
      },
    );
  }

  /** A worker's take, answered here when workers/routes.ts says it can be; node:http's otherwise. */
  private take(principal: Principal, data: Buffer, head: ScannedRequest, total: number): void {
    this.lookedUp = undefined;
    const deps = this.front.deps;
    const start = deps.take!(principal, data.subarray(total - head.contentLength, total), head.contentType);
    if (!start) return this.giveToNode();
    // Workers are not rate limited: no RateLimit lines.
    this.commit(data, head, total, "takes");
    const startedAt = deps.tookWorkerCall ? performance.now() : 0;
    const hangUp = new AbortController();
    this.goneListener = () => hangUp.abort();
    this.takeWaiting = true;
    start(hangUp.signal, () => this.socket.destroyed).then(
      (text) => {
        this.goneListener = undefined;
        this.takeWaiting = false;
        // (Undefined: the worker hung up; its jobs went back to the queue.)
        if (text === undefined) return;
        deps.tookWorkerCall?.("POST", TAKE_PATH, 200, startedAt);
        this.json(text, "");
      },
      (thrown: unknown) => {
        this.goneListener = undefined;
        this.takeWaiting = false;
        const status = this.failed(thrown, `POST ${TAKE_PATH}`, "");
        deps.tookWorkerCall?.("POST", TAKE_PATH, status, startedAt);
      },
    );
  }

  /** A provider worker's call, answered here when workers/provider-routes.ts says it can be; node:http's otherwise. */
  private providerCall(principal: Principal, call: ProviderWorkerCall, data: Buffer, head: ScannedRequest, total: number): void {
    this.lookedUp = undefined;
    const deps = this.front.deps;
    // (A GET has no body: one with a body is node:http's to refuse.)
    if (head.method === "GET" && head.contentLength > 0) return this.giveToNode();
    const start = deps.providerCall!(principal, call, data.subarray(total - head.contentLength, total));
    if (!start) return this.giveToNode();
    // Workers are not rate limited: no RateLimit lines.
    this.commit(data, head, total, "providerCalls");
    const route = PROVIDER_ROUTES[call.route];
    const startedAt = deps.tookWorkerCall ? performance.now() : 0;
    // A long poll waits on the worker's hang-up and does not half-close (as svc's own take above); a result is
    // answered whatever happens, and needs no signal of its own.
    const longPoll = isLongPoll(call.route);
    const hangUp = longPoll ? new AbortController() : undefined;
    if (hangUp) this.goneListener = () => hangUp.abort();
    this.takeWaiting = longPoll;
    start(hangUp?.signal ?? NEVER_ABORTED, () => this.socket.destroyed).then(
      (answer) => {
        this.goneListener = undefined;
        this.takeWaiting = false;
        // (Undefined: the worker hung up; the jobs its take got went back to the queue.)
        if (answer === undefined) return;
        deps.tookWorkerCall?.(head.method, route, answer === null ? 204 : 200, startedAt);
        if (answer === null) this.noContent();
        else this.json(answer, "");
      },
      (thrown: unknown) => {
        this.goneListener = undefined;
        this.takeWaiting = false;
        const status = this.failed(thrown, `${head.method} ${route}`, "");
        deps.tookWorkerCall?.(head.method, route, status, startedAt);
      },
    );
  }

  /**
   * A submission or take that failed, answered as the dispatcher answers a handler's failure (api.ts): a problem
   * with its status (a storage fault is a 503 naming its cause), anything else a 500, logged. The status answered.
   */
  private failed(thrown: unknown, request: string, limits: string): number {
    const problem = problemOf(asRouteFailure(thrown));
    if (problem) {
      this.problem(problem.status, problem.message, problem.headers ?? {}, limits, false, problem);
      return problem.status;
    }
    this.front.deps.log(`internal error on ${request}: ${errorStack(thrown)}`);
    this.problem(500, "The service failed to handle this request", {}, limits, false);
    return 500;
  }

  /**
   * A job API read, answered here when jobs/routes.ts says it can be (at once, or once it has read the job);
   * node:http's otherwise, on the same bytes (which the wait left at the head of the buffer).
   */
  private read(principal: Principal, endpointId: string, jobId: string | undefined, data: Buffer, head: ScannedRequest, total: number): void {
    this.lookedUp = undefined;
    const relayTo = this.front.deps.relayTo?.();
    if (relayTo === null) return this.giveToNode();
    if (relayTo !== undefined) return this.relay(relayTo, data, head, total);
    const answer = this.front.deps.read!(principal, endpointId, jobId);
    if (answer === undefined) return this.giveToNode();
    if (typeof answer === "string") return this.answerRead(principal, answer, head, total);
    this.busy = true;
    answer.then(
      (text) => {
        this.busy = false;
        if (this.socket.destroyed) return;
        if (text === undefined) return this.giveToNode();
        this.answerRead(principal, text, head, total);
      },
      // A read that failed (the store unavailable) is node:http's to answer: it reads again and says why.
      () => {
        this.busy = false;
        if (!this.socket.destroyed) this.giveToNode();
      },
    );
  }

  private answerRead(principal: Principal, text: string, head: ScannedRequest, total: number): void {
    const limits = this.front.deps.rateLimit(principal);
    // Over the rate limit: node:http answers the 429 (a refused request is not counted, so it counts the same).
    if (limits === undefined) return this.giveToNode();
    // (Bytes that came during a read were added after this request's.)
    this.commit(this.buffer!, head, total);
    this.json(text, limits);
  }

  /**
   * A job read passed on to the replica serving jobs (`target`), which counts it against the rate limit, as the
   * dispatcher forwards it before counting. node:http's when the front cannot speak to that address.
   */
  private relay(target: string, data: Buffer, head: ScannedRequest, total: number): void {
    const upstream = relayAddress(target);
    if (!UpstreamPool.supports(upstream)) return this.giveToNode();
    this.commit(data, head, total);
    this.beginAnswer("", false, upstream);
    const exchange = this.front.deps.lb.relay(upstream, (this.relayDown ??= this.relayDownstream()));
    exchange.socket.write(relayRequestBytes(data.subarray(0, total), head, this.remote));
    exchange.sent();
  }

  private forward(worker: LbWorker, data: Buffer, head: ScannedRequest, path: string, limits: string, body: Buffer, since: number) {
    this.beginAnswer(limits, head.method === "HEAD", undefined);
    const exchange = this.front.deps.lb.exchange(worker, this, this.isHead, since);
    exchange.socket.write(upstreamRequestBytes(data, head, path, exchange.host, this.remote, body, worker.credentialLine));
    exchange.sent();
  }

  /** After a key lookup: decide again on the same bytes (the caller may have left meanwhile). */
  private resume(): void {
    this.busy = false;
    if (this.socket.destroyed) return;
    if (this.closeAfter && !(this.buffer && this.buffer.length > 0)) return void this.socket.end();
    this.next();
  }

  /** The answer is over: the next request (if already here), or close when asked. */
  protected override answered(): void {
    this.busy = false;
    this.goneListener = undefined;
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
}
