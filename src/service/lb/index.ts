// Load-balanced endpoints: the requests to an endpoint's workers. Least-outstanding-requests balancing over the
// pool (pool.ts: the workers, kept by their /ping answers), waiting (and scaling from zero) when no worker is
// ready, cold start accounting, and the proxy itself (exchange.ts over upstream.ts; proxy.ts for https workers).
// The endpoint's address is read in address.ts. docs/lb.md describes the behaviour.
//
//   {service}/lb/{endpoint_id}/<route path>          the endpoint's address
//   Host: {endpoint_id}.lb.localhost[:port]           the same, by host name (any path)
//
// Same authorization as the job API (admin, jobs:*, jobs:<endpoint_id>). No queue, no retries.

import type { Agent, IncomingMessage, ServerResponse } from "node:http";
import { canUseJobs, type Principal } from "../keys/auth.js";
import type { JobEngine } from "../engine/index.js";
import { Refusal } from "../../errors.js";
import type { EndpointRow } from "../store/types.js";
import { lbDemand, pickWorker } from "./balance.js";
import { noteWorker, WorkerPool, type PoolWorker } from "./pool.js";
import { lbTarget } from "./address.js";
import { forwardRaw, openExchange, type Downstream, type RawExchange } from "./exchange.js";
import { forward, proxyAgent, type ProxyOutcome } from "./proxy.js";
import { UpstreamPool, type UpstreamAddress } from "./upstream.js";

export type { Downstream } from "./exchange.js";
export type { ProxyOutcome } from "./proxy.js";
export { checkPingPath, classifyPing, pingVerdict, probePing, type PingCheck, type PingState } from "./ping.js";

/** How long a request waits for a ready worker (cold start included) before a 503 problem. */
export const LB_WAIT_MS_DEFAULT = 60_000;

/** A worker of the pool, as the LB front sees it. */
export interface LbWorker {
  readonly id: string;
  readonly endpointId: string;
  /** The header line (CRLF included) that carries its credential up; "" for a worker that asks none. */
  readonly credentialLine: string;
}

interface Waiter {
  resolve(worker: PoolWorker): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout;
}

export interface LbDeps {
  engine: JobEngine;
  endpoints: ReadonlyMap<string, EndpointRow>;
  /** Demand changed on this endpoint: plan workers now. */
  kick(endpointId: string): void;
  /** Operator messages. */
  log(message: string): void;
  /** Why an endpoint gets no workers (a REST endpoint's statusReason), when the service knows. */
  noWorkersReason?(endpointId: string): string | undefined;
  waitMs?: number;
  /**
   * A request to an LB endpoint was answered (not one whose caller left first): the status the caller got (the
   * worker's, or the service's when no worker answered in time), or the refusal the edge answers it with (none came
   * in time, none will), and the ms since it arrived. Requests refused before an endpoint of the caller's was found
   * are not an endpoint's.
   */
  onAnswered?(endpointId: string, answer: number | Refusal, ms: number): void;
}

/**
 * The 503 for a request to an endpoint no worker will ever serve (workersMax 0: a REST endpoint that cannot run,
 * or one configured so): answered at once, since waiting cannot help, and without Retry-After. Pure.
 */
export function noWorkersRefusal(endpoint: Pick<EndpointRow, "id" | "app">, reason: string | undefined): Refusal {
  const update = (flags: string) => `PATCH /v1/endpoints/${endpoint.id} or \`svc endpoint update ${endpoint.id}${flags}\``;
  const what =
    endpoint.app !== ""
      ? "its workersMax is 0; raise the maximum of its `workers` setting and deploy again (`svc deploy`)"
      : reason !== undefined
        ? `${reason}; fix that, then update the endpoint (${update("")})`
        : `its workersMax is 0; update the endpoint with a workersMax above 0 (${update(" --workers-max <n>")})`;
  return new Refusal("unavailable", `Endpoint ${endpoint.id} has no workers and will get none: ${what}`);
}

export class LbRouter {
  readonly coldStarts = new Map<string, { count: number; lastMs: number | null }>();
  /** The pool's workers (pool.ts), read here as they are: no call on a request's way. */
  private readonly workers: ReadonlyMap<string, PoolWorker>;
  private readonly workerPool: WorkerPool;
  private readonly waiters = new Map<string, Waiter[]>();
  private readonly lastPicked = new Map<string, string>();
  private readonly coldSince = new Map<string, number>();
  private readonly counters = new Map<string, { served: number; failed: number }>();
  private readonly agent: Agent = proxyAgent();
  private readonly pool = new UpstreamPool();
  private closed = false;

  constructor(private readonly deps: LbDeps) {
    this.workerPool = new WorkerPool(deps, (endpointId) => this.dispatch(endpointId));
    this.workers = this.workerPool.workers;
  }

  get waitMs(): number {
    return this.deps.waitMs ?? LB_WAIT_MS_DEFAULT;
  }

  // ------------------------------------------------------------------ load

  /** What the scaler plans with. */
  load(endpointId: string): { queued: number; inProgress: number } {
    let inFlight = 0;
    for (const w of this.workers.values()) if (w.endpointId === endpointId) inFlight += w.inFlight;
    return lbDemand(this.waiters.get(endpointId)?.length ?? 0, inFlight);
  }

  busy(workerId: string): boolean {
    return (this.workers.get(workerId)?.inFlight ?? 0) > 0;
  }

  /** Extra fields of /health for an LB endpoint. */
  health(endpointId: string) {
    const mine = [...this.workers.values()].filter((w) => w.endpointId === endpointId && this.workerPool.alive(w));
    const counters = this.counters.get(endpointId) ?? { served: 0, failed: 0 };
    return {
      coldStarts: this.coldStarts.get(endpointId) ?? { count: 0, lastMs: null },
      requests: { inFlight: mine.reduce((n, w) => n + w.inFlight, 0), waiting: this.waiters.get(endpointId)?.length ?? 0, ...counters },
      pool: { ready: mine.filter((w) => w.state === "ready").length, notReady: mine.filter((w) => w.state !== "ready").length },
    };
  }

  // ------------------------------------------------------------------ requests

  /** Whether `w` may take a request now: /ping said ready, and the engine neither drains nor holds it in standby. */
  private takesTraffic(w: PoolWorker): boolean {
    if (w.state !== "ready") return false;
    const entry = this.deps.engine.workers.get(w.id);
    return entry !== undefined && !entry.draining && !entry.standby;
  }

  private take(endpointId: string): PoolWorker | undefined {
    const w = pickWorker(this.workers.values(), this.lastPicked.get(endpointId), (c) => c.endpointId === endpointId && this.takesTraffic(c));
    if (!w) return undefined;
    this.lastPicked.set(endpointId, w.id);
    w.inFlight++;
    return w;
  }

  /** Workers of this endpoint may take traffic now (a release switched): serve the requests waiting. */
  wake(endpointId: string): void {
    this.dispatch(endpointId);
  }

  /** Workers became ready: hand them the requests waiting, oldest first. */
  private dispatch(endpointId: string): void {
    const queue = this.waiters.get(endpointId);
    while (queue && queue.length > 0) {
      const w = this.take(endpointId);
      if (!w) return;
      const waiter = queue.shift()!;
      clearTimeout(waiter.timer);
      waiter.resolve(w);
    }
  }

  /** A ready worker for one request, waiting (and asking the scaler for one) when none is. */
  private acquire(endpoint: EndpointRow, onGone: (gone: () => void) => void): Promise<PoolWorker> {
    const endpointId = endpoint.id;
    const now = Date.now();
    const w = this.take(endpointId);
    if (w) return Promise.resolve(w);
    const anyLive = [...this.deps.engine.workers.values()].some((e) => e.endpointId === endpointId && !e.draining);
    // No worker now and none allowed to start: waiting would only hold the caller for the whole wait.
    if (!anyLive && endpoint.resource.workersMax === 0) return Promise.reject(noWorkersRefusal(endpoint, this.deps.noWorkersReason?.(endpointId)));
    if (!anyLive && !this.coldSince.has(endpointId)) this.coldSince.set(endpointId, now);
    return new Promise<PoolWorker>((resolve, reject) => {
      let queue = this.waiters.get(endpointId);
      if (!queue) this.waiters.set(endpointId, (queue = []));
      const waiter: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          remove();
          reject(
            new Refusal("unavailable", `No worker of endpoint ${endpointId} became ready within ${this.waitMs} ms; try again shortly`, { retryAfterS: 5 }),
          );
        }, this.waitMs),
      };
      const remove = () => {
        const list = this.waiters.get(endpointId);
        const i = list?.indexOf(waiter) ?? -1;
        if (list && i >= 0) list.splice(i, 1);
      };
      // The caller gave up while waiting: it no longer counts as demand.
      onGone(() => {
        clearTimeout(waiter.timer);
        remove();
        reject(new Error("client gone"));
      });
      queue.push(waiter);
      this.deps.kick(endpointId);
    });
  }

  private coldStartServed(endpointId: string, workerId: string): void {
    const since = this.coldSince.get(endpointId);
    if (since === undefined) return;
    this.coldSince.delete(endpointId);
    const ms = Date.now() - since;
    const entry = this.coldStarts.get(endpointId) ?? { count: 0, lastMs: null };
    entry.count++;
    entry.lastMs = ms;
    this.coldStarts.set(endpointId, entry);
    noteWorker(this.deps, endpointId, workerId, `cold start: the first request after idle waited ${ms} ms for worker ${workerId}`);
  }

  /**
   * Serve the request when it addresses an LB endpoint (after authentication); false when it does not.
   */
  async route(principal: Principal, req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const target = lbTarget(req.url ?? "/", req.headers.host);
    if (!target) return false;
    const since = performance.now();
    let worker: PoolWorker;
    try {
      worker = await this.admit(
        principal,
        target.endpointId,
        (gone) =>
          res.once("close", () => {
            if (!res.writableFinished) gone();
          }),
        since,
      );
    } catch (err) {
      if (err instanceof Refusal) throw err;
      return true; // the client went away while waiting
    }
    const exchange = {
      upstream: worker.upstream,
      path: target.path,
      workerId: worker.id,
      endpointId: target.endpointId,
      timeoutMs: this.answerTimeout(target.endpointId),
      credential: worker.credential,
      credentialLine: worker.credentialLine,
    };
    await this.serve(
      worker,
      () => (UpstreamPool.supports(worker.upstream) ? forwardRaw(this.pool, req, res, exchange) : forward(this.agent, req, res, exchange)),
      since,
      () => res.statusCode,
    );
    return true;
  }

  /**
   * Every check of an LB request, then a ready worker for it, taken: waiting for one (and scaling from zero) when
   * none is free. Throws the Refusal to answer; any other rejection means the caller left (`onGone`).
   */
  async admit(principal: Principal, endpointId: string, onGone: (gone: () => void) => void, since = performance.now()): Promise<PoolWorker> {
    const checked = this.check(principal, endpointId);
    if (checked instanceof Refusal) throw checked;
    let worker: PoolWorker;
    try {
      worker = await this.acquire(checked, onGone);
    } catch (err) {
      // No worker in time, or none will come: the endpoint's request, answered by the service.
      if (err instanceof Refusal) this.answered(endpointId, err, since);
      throw err;
    }
    this.coldStartServed(endpointId, worker.id);
    return worker;
  }

  /** The checks of an LB request before a worker is looked for: its endpoint, or the problem to answer (no side effects). */
  private check(principal: Principal, endpointId: string): EndpointRow | Refusal {
    if (principal.worker) return new Refusal("forbidden", "A worker token cannot call load-balanced endpoints");
    const endpoint = this.deps.endpoints.get(endpointId);
    if (!endpoint || endpoint.userId !== principal.userId) return new Refusal("not-found", `No endpoint ${endpointId}`);
    if (!canUseJobs(principal, endpointId)) return new Refusal("forbidden", `This API key has no access to endpoint ${endpointId}`);
    if (endpoint.type !== "lb") return new Refusal("invalid", `Endpoint ${endpointId} is queue-based; send jobs to /v2/${endpointId}/run or /runsync`);
    if (this.closed) return new Refusal("unavailable", "The service is shutting down");
    return endpoint;
  }

  /**
   * The LB front's fast path (front.ts): a ready worker of `endpointId` for this principal's request, taken now,
   * when every check of `route` passes and nothing needs waiting; undefined when `admit` must decide (it answers
   * the problems and waits for workers). Give the worker back with `release` or use it with `serve`.
   */
  takeNow(principal: Principal, endpointId: string): LbWorker | undefined {
    if (this.check(principal, endpointId) instanceof Refusal) return undefined;
    // Requests already waiting for a worker go first.
    if ((this.waiters.get(endpointId)?.length ?? 0) > 0) return undefined;
    const worker = this.take(endpointId);
    if (worker && !UpstreamPool.supports(worker.upstream)) {
      this.release(worker);
      return undefined;
    }
    return worker;
  }

  /** A worker `takeNow` gave that will not serve the request after all. */
  release(worker: LbWorker): void {
    (worker as PoolWorker).inFlight--;
  }

  /** Whether `exchange` can serve this worker (http; node's parser available). */
  canExchange(worker: LbWorker): boolean {
    return UpstreamPool.supports((worker as PoolWorker).upstream);
  }

  /**
   * Open the raw exchange of one request with another replica of the service (the front passing a follower's job
   * read, a GET, on to the replica serving jobs): the pool's connections, none of a worker's accounting.
   */
  relay(upstream: UpstreamAddress, down: Downstream): RawExchange {
    return openExchange(this.pool, down, { upstream, workerId: upstream.host }, false);
  }

  /**
   * Open the raw exchange of one request with a worker `takeNow` or `admit` gave (front.ts), the request served
   * (`started`/`finished`) until the exchange settles: no promise a request on this path.
   */
  exchange(worker: LbWorker, down: Downstream, isHead: boolean, since = performance.now()): RawExchange {
    const w = worker as PoolWorker;
    this.started(w);
    try {
      return openExchange(this.pool, down, { upstream: w.upstream, workerId: w.id, timeoutMs: this.answerTimeout(w.endpointId) }, isHead, (outcome, status) => {
        this.finished(w, outcome);
        if (outcome !== "client-gone") this.answered(w.endpointId, status, since);
      });
    } catch (err) {
      this.finished(w, "client-gone");
      throw err;
    }
  }

  /**
   * One request served by `worker` (taken): `forwarding` passes it on; counters, idle time and failures here.
   * `statusSent` reads the status the caller got once it is over.
   */
  async serve(worker: LbWorker, forwarding: () => Promise<ProxyOutcome>, since: number, statusSent: () => number): Promise<void> {
    const w = worker as PoolWorker;
    this.started(w);
    let outcome: ProxyOutcome = "client-gone";
    try {
      outcome = await forwarding();
    } finally {
      this.finished(w, outcome);
    }
    // A cut answer counts as the 502 it would have been before its head.
    if (outcome !== "client-gone") this.answered(w.endpointId, outcome === "worker-failed" ? 502 : statusSent(), since);
  }

  private answered(endpointId: string, answer: number | Refusal, since: number): void {
    this.deps.onAnswered?.(endpointId, answer, performance.now() - since);
  }

  /** How long a worker may take to begin its answer: the endpoint's executionTimeout. */
  private answerTimeout(endpointId: string): number | undefined {
    return this.deps.endpoints.get(endpointId)?.resource.executionTimeoutMs;
  }

  private started(w: PoolWorker): void {
    this.deps.engine.workerActive(w.id);
  }

  /** The request `started` on `w` is over: counters, idle time, and a worker that failed leaves the pool. */
  private finished(w: PoolWorker, outcome: ProxyOutcome): void {
    w.inFlight--;
    const { endpointId } = w;
    this.deps.engine.workerActive(w.id);
    let counters = this.counters.get(endpointId);
    if (!counters) this.counters.set(endpointId, (counters = { served: 0, failed: 0 }));
    if (outcome === "ok") counters.served++;
    if (outcome === "timed-out") {
      // Slow is not dead: it stays in the pool (its /ping decides that).
      counters.failed++;
      noteWorker(
        this.deps,
        endpointId,
        w.id,
        `lb: worker ${w.id} did not answer a request within ${this.answerTimeout(endpointId) ?? "?"} ms (executionTimeout): 504, not retried`,
      );
    }
    if (outcome === "worker-failed") {
      counters.failed++;
      // No retry, and no more traffic until its /ping says it is fine again.
      if (w.state === "ready") {
        w.state = "unreachable";
        w.nextProbe = 0;
        noteWorker(this.deps, endpointId, w.id, `lb: worker ${w.id} failed mid-request: taken out of the pool`);
      }
    }
  }

  close(): void {
    this.closed = true;
    this.workerPool.close();
    for (const queue of this.waiters.values()) {
      for (const w of queue) {
        clearTimeout(w.timer);
        w.reject(new Refusal("unavailable", "The service is shutting down"));
      }
    }
    this.waiters.clear();
    this.agent.destroy();
    this.pool.destroy();
  }
}
