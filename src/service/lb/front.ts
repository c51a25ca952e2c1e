// The LB front: a fast path on the service's port for requests to load-balanced endpoints, and for job `/run`s
// (`deps.run`: the route's checks are jobs/routes.ts quickRun's; the front only reads, counts and answers).
//
// Behind node:http, one proxied request cost ~2x the same request sent to the worker
// directly (IncomingMessage/ServerResponse objects, header validation and serialization, the request
// handler's promise chain). The front takes each new connection first and serves, itself, the LB requests it
// can read whole and simply: HTTP/1.1, whole head in hand, no body or a small one of known length, a valid key
// (looked up once if new), within the rate limit. It runs the LB route's checks and wait (LbRouter.admit), so a
// cold start or a route problem keeps the connection here. Anything else (another route, a bad key, a 429, a
// chunked or large body, HTTP/1.0, a parse error) hands the connection to node:http, bytes and all, from that
// request on: node:http then answers exactly as it would have (the LB route included). One request at a time per
// connection; pipelined requests wait their turn.
//
// It reads each request head by its bytes (head-scan.ts: a strict subset of HTTP/1.1, checked against llhttp;
// anything outside it is node's), one request at a time, so request boundaries are known and a hand-over can
// give node the bytes of the request it has not answered. The head sent up is the caller's lines copied, in one
// buffer with the body. The worker's answer comes back through the same exchange as the node:http path
// (exchange.ts `openExchange`); a small whole one is written to the caller in one buffer (`whole`). The
// connection is the downstream of its current request itself: no objects, closures or promises a request.

import type { Server } from "node:http";
import type { Socket } from "node:net";
import type { Principal } from "../keys/auth.js";
import type { ProviderWorkerCall } from "../../wire/provider-worker.js";
import type { LbRouter } from "./index.js";
import { llhttp } from "./upstream.js";
import { FrontConnection } from "./front-connection.js";

export interface FrontDeps {
  lb: LbRouter;
  /** The principal of a key already known to be valid (no I/O); undefined when it is not known yet or invalid. */
  principal(key: string): Principal | undefined;
  /** Look a key up (the store), so that `principal` knows it afterwards if it is valid. */
  authenticate(key: string): Promise<unknown>;
  /** Count one request: its RateLimit header lines ("name: value\r\n"...), or undefined when it is refused. */
  rateLimit(principal: Principal): string | undefined;
  /**
   * A job `/run` (`POST /v2/{endpoint}/run`) this replica can answer without node:http: the submission to make,
   * resolving with the answer's body, or undefined when node:http must serve it (jobs/routes.ts quickRun). Nothing
   * is counted or written before the front commits to it.
   */
  run?(principal: Principal, endpointId: string, body: Buffer, contentType: string | undefined): (() => Promise<string>) | undefined;
  /**
   * A `/run` the front answered: its status and when its submission began (performance.now()), for the HTTP
   * metrics (absent when they are off: then no clock is read). Told here, in the callbacks the front has anyway,
   * rather than by wrapping each submission in a promise of its own.
   */
  ranRun?(endpointId: string, status: number, startedAt: number): void;
  /**
   * A job API read (`GET /v2/{endpoint}/health`, `jobId` undefined, or `GET /v2/{endpoint}/status/{jobId}`) this
   * replica can answer without node:http: the answer's body, now or once read; undefined (or a promise of it) when
   * node:http must serve it (jobs/routes.ts quickRead). Nothing is counted before the front commits to it. Served
   * here so that a client polling a job's status on the connection it submits on keeps its `/run`s on the front.
   */
  read?(principal: Principal, endpointId: string, jobId: string | undefined): string | Promise<string | undefined> | undefined;
  /**
   * A worker's take (`POST /_worker/v1/take`) this replica can answer without node:http: what to run once the
   * front commits to it (given the signal of the worker hanging up, and whether it has), resolving with the
   * answer's body (undefined: the worker went away); undefined when node:http must serve it (workers/routes.ts
   * quickTake). Nothing is changed before the front commits. A worker's takes and results then cost the service
   * no node:http request each; its other calls (register, heartbeat, ...) go to node:http on the same connection.
   */
  take?(
    principal: Principal,
    body: Buffer,
    contentType: string | undefined,
  ): ((hangUp: AbortSignal, gone: () => boolean) => Promise<string | undefined>) | undefined;
  /**
   * A provider worker's call (its takes, results, stream chunks, stop poll and ping: wire/provider-worker.ts) this
   * replica can answer without node:http (workers/provider-routes.ts quickProviderCall): what to run once the front
   * commits to it, resolving with the answer's body, null for a 204, undefined when the worker went away while it
   * waited; undefined when node:http must serve it. The provider's protocol posts a result a job: served here, it
   * costs about what svc's own protocol's take does.
   */
  providerCall?(
    principal: Principal,
    call: ProviderWorkerCall,
    body: Buffer,
  ): ((hangUp: AbortSignal, gone: () => boolean) => Promise<string | null | undefined>) | undefined;
  /**
   * A worker's call the front answered (a take of either protocol, a job-done): its route as the route table names
   * it, its status and when it began (performance.now()), for the HTTP metrics (absent when they are off).
   */
  tookWorkerCall?(method: string, route: string, status: number, startedAt: number): void;
  /**
   * The replica serving jobs, when this one passes job traffic on to it (a follower): the job reads above then go
   * there by their bytes, and their answers come back as it gave them, as node:http's path (cluster/forward.ts)
   * would pass them, so that the caller's connection stays on the front. Null: another replica serves jobs at an
   * address the database did not give, and node:http answers the refusal.
   */
  relayTo?(): string | null | undefined;
  /** How long an idle connection is kept (the server's keepAliveTimeout). */
  keepAliveMs: number;
  log(message: string): void;
}

/** How often idle and stalled connections are looked at. */
const SWEEP_MS = 2_000;

export class LbFront {
  readonly connections = new Set<FrontConnection>();
  closing = false;
  /**
   * Requests the front served (workers' takes, and provider workers' takes and job-dones, apart), and connections
   * it handed to node:http (tests and diagnostics).
   */
  readonly stats = { served: 0, takes: 0, providerCalls: 0, handedOver: 0 };
  /** The Connection header lines of an answer on a kept connection (the same for every answer). */
  readonly keepAliveHeaders: string;
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
    this.keepAliveHeaders = `connection: keep-alive\r\nkeep-alive: timeout=${Math.floor(deps.keepAliveMs / 1000)}\r\n`;
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
