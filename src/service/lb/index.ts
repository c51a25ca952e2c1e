// Load-balanced endpoints: the per-endpoint address, a pool of each endpoint's workers kept by their /ping
// answers, least-outstanding-requests balancing, waiting (and scaling from zero) when no worker is ready, cold
// start accounting, and the proxy itself (exchange.ts over upstream.ts; proxy.ts for https workers). The
// endpoint's address is read in address.ts. docs/lb.md describes the behaviour.
//
//   {service}/lb/{endpoint_id}/<route path>          the endpoint's address
//   Host: {endpoint_id}.lb.localhost[:port]           the same, by host name (any path)
//
// Same authorization as the job API (admin, jobs:*, jobs:<endpoint_id>). No queue, no retries.

import type { Agent, IncomingMessage, ServerResponse } from "node:http";
import { canUseJobs, type Principal } from "../keys/auth.js";
import type { JobEngine, WorkerEntry } from "../engine/index.js";
import { Refusal } from "../../errors.js";
import type { EndpointRow } from "../store/types.js";
import { lbDemand, pickWorker } from "./balance.js";
import { pingVerdict, probePing, type PingState } from "./ping.js";
import { LB_CREDENTIAL_HEADER } from "../../lb-credential.js";
import { lbTarget } from "./address.js";
import { forwardRaw, openExchange, type Downstream, type RawExchange } from "./exchange.js";
import { forward, proxyAgent, type ProxyOutcome } from "./proxy.js";
import { parseAddress, UpstreamPool, type UpstreamAddress } from "./upstream.js";

export type { Downstream } from "./exchange.js";
export type { ProxyOutcome } from "./proxy.js";
export { checkPingPath, classifyPing, pingVerdict, probePing, type PingCheck, type PingState } from "./ping.js";

/** How long a request waits for a ready worker (cold start included) before a 503 problem. */
export const LB_WAIT_MS_DEFAULT = 60_000;
/** /ping of a worker not yet ready is asked this often; of a ready one, every READY_PING_MS. */
const STARTING_PING_MS = 100;
const READY_PING_MS = 1000;
/** A ready worker leaves the pool after this many /ping failures in a row. */
const PING_FAILURES_OUT = 2;

/** A worker of the pool, as the LB front sees it. */
export interface LbWorker {
  readonly id: string;
  readonly endpointId: string;
  /** The header line (CRLF included) that carries its credential up; "" for a worker that asks none. */
  readonly credentialLine: string;
}

interface PoolWorker {
  id: string;
  endpointId: string;
  address: string;
  upstream: UpstreamAddress;
  /** The local socket the worker says it also serves on (used when its driver gave it that one). */
  claimedSocket: string | undefined;
  /**
   * What every request to it carries (lb-credential.ts): derived from the token it registered with. Undefined for
   * a prebuilt image's worker, which has no token and checks nothing.
   */
  credential: string | undefined;
  credentialLine: string;
  /** The credential as /ping's headers. */
  pingHeaders: Record<string, string> | undefined;
  /** A refusal of its credential (401/403 to /ping) already logged. */
  refusedSeen?: number;
  state: PingState | "new";
  inFlight: number;
  failures: number;
  nextProbe: number;
  probing: boolean;
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

/** A pool worker's credential fields: the value, its header line, its /ping headers. Pure. */
function credentialFields(credential: string | undefined): Pick<PoolWorker, "credential" | "credentialLine" | "pingHeaders"> {
  return credential === undefined
    ? { credential, credentialLine: "", pingHeaders: undefined }
    : { credential, credentialLine: `${LB_CREDENTIAL_HEADER}: ${credential}\r\n`, pingHeaders: { [LB_CREDENTIAL_HEADER]: credential } };
}

export class LbRouter {
  readonly coldStarts = new Map<string, { count: number; lastMs: number | null }>();
  private readonly workers = new Map<string, PoolWorker>();
  /**
   * Direct addresses (a container's IP) a worker answered at: the proxy's choice, kept over a re-register. Where
   * a worker is reachable is the worker registry's (`WorkerEntry.reach`, `.serves`); which of those works is this.
   */
  private readonly directInUse = new Map<string, string>();
  /** Workers whose direct address was tried already (it is tried once). */
  private readonly directTried = new Set<string>();
  private readonly waiters = new Map<string, Waiter[]>();
  private readonly lastPicked = new Map<string, string>();
  private readonly coldSince = new Map<string, number>();
  private readonly counters = new Map<string, { served: number; failed: number }>();
  private readonly agent: Agent = proxyAgent();
  private readonly pool = new UpstreamPool();
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly deps: LbDeps) {
    this.timer = setInterval(() => this.probeDue(), STARTING_PING_MS);
    this.timer.unref();
    // The pool follows the worker registry: a worker joins when it registers a server, moves when its driver says
    // where it is, and leaves when it is gone.
    const events = deps.engine.workerEvents;
    events.on("registered", ({ worker }) => this.join(worker));
    events.on("addressed", ({ worker }) => {
      if (this.workers.has(worker.id)) this.join(worker);
    });
    events.on("gone", ({ worker }) => this.forget(worker.id));
  }

  get waitMs(): number {
    return this.deps.waitMs ?? LB_WAIT_MS_DEFAULT;
  }

  // ------------------------------------------------------------------ pool

  /**
   * A worker that registered a server joins the pool (again: it may register twice, early and once its handler
   * loaded), at its driver's address where the driver gave one, else at the one it registered, with the local
   * socket it also serves on and its credential (`lbCredentialOfToken` of the token it registered with; none for
   * a prebuilt image's worker, which the service registers).
   *
   * The address its driver gave wins over the one it registers: a worker's word is used only where the driver
   * gave none (a Swarm task, a worker another replica started), and there the credential protects the others: a
   * worker that registers another's address has its requests (and /ping) go there with its own credential, which
   * that worker refuses, so it never gets traffic.
   */
  private join(entry: WorkerEntry): void {
    const serves = entry.serves;
    if (!serves) return;
    const workerId = entry.id;
    const address = this.directInUse.get(workerId) ?? entry.reach.address ?? serves.address;
    const known = this.workers.get(workerId);
    if (known && known.address === address) {
      known.claimedSocket = serves.socket;
      if (known.credential !== serves.credential) Object.assign(known, credentialFields(serves.credential));
      this.reach(known);
      return;
    }
    const w: PoolWorker = {
      id: workerId,
      endpointId: entry.endpointId,
      address,
      upstream: parseAddress(address),
      claimedSocket: serves.socket,
      ...credentialFields(serves.credential),
      state: "new",
      inFlight: 0,
      failures: 0,
      nextProbe: 0,
      probing: false,
    };
    this.workers.set(workerId, w);
    this.reach(w);
    const local = w.upstream.socketPath === undefined ? "" : ` (the proxy uses its local socket ${w.upstream.socketPath})`;
    this.note(entry.endpointId, workerId, `lb: worker ${workerId} registered at ${address}${local}; checking /ping`);
    this.probeDue();
  }

  /** A worker is gone: out of the pool, and what the proxy learnt about reaching it forgotten. */
  private forget(workerId: string): void {
    this.workers.delete(workerId);
    this.directInUse.delete(workerId);
    this.directTried.delete(workerId);
  }

  /**
   * Where the proxy connects to `w` (`upstream`), from its address and its local socket. The socket only when the
   * worker serves there and its driver gave it that path: a worker's word alone never points the service at a
   * path of its choosing.
   */
  private reach(w: PoolWorker): void {
    const given = this.deps.engine.workers.get(w.id)?.reach.socket;
    const socketPath = w.claimedSocket !== undefined && given === w.claimedSocket ? w.claimedSocket : undefined;
    w.upstream = { ...parseAddress(w.address), socketPath };
  }

  /**
   * Once a worker answers /ping at its address, try its direct address (if its driver gave one), once; use it
   * from then on (traffic and /ping) only if it answers there too. A remote engine's or a VM's container IP does
   * not answer from here: the published port stays.
   */
  private tryDirect(w: PoolWorker): void {
    const direct = this.deps.engine.workers.get(w.id)?.reach.direct;
    if (direct === undefined || this.directTried.has(w.id)) return;
    this.directTried.add(w.id);
    void probePing(direct, 1000, w.pingHeaders).then((answer) => {
      if (this.closed || this.workers.get(w.id) !== w) return;
      // Only a /ping a worker gives (200 or 204) shows it is the same worker there.
      if (answer.state !== "ready" && answer.state !== "initializing") {
        this.note(w.endpointId, w.id, `lb: worker ${w.id} does not answer at ${direct} from the service: the proxy keeps ${w.address}`);
        return;
      }
      const before = w.address;
      // In place (state and in-flight count kept), and kept over a re-register.
      this.directInUse.set(w.id, direct);
      w.address = direct;
      this.reach(w);
      this.note(w.endpointId, w.id, `lb: worker ${w.id} answers at ${direct}: the proxy uses it instead of ${before}`);
    });
  }

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
    const mine = [...this.workers.values()].filter((w) => w.endpointId === endpointId && this.alive(w));
    const counters = this.counters.get(endpointId) ?? { served: 0, failed: 0 };
    return {
      coldStarts: this.coldStarts.get(endpointId) ?? { count: 0, lastMs: null },
      requests: { inFlight: mine.reduce((n, w) => n + w.inFlight, 0), waiting: this.waiters.get(endpointId)?.length ?? 0, ...counters },
      pool: { ready: mine.filter((w) => w.state === "ready").length, notReady: mine.filter((w) => w.state !== "ready").length },
    };
  }

  private alive(w: PoolWorker): boolean {
    const entry = this.deps.engine.workers.get(w.id);
    return entry !== undefined && entry.endpointId === w.endpointId;
  }

  private note(endpointId: string, workerId: string, text: string): void {
    this.deps.log(text);
    void this.deps.engine.appendLogs([{ ts: Date.now(), endpointId, workerId, jobId: null, stream: "log", text }]);
  }

  private probeDue(): void {
    if (this.closed) return;
    const now = Date.now();
    for (const w of [...this.workers.values()]) {
      if (!this.alive(w)) {
        this.forget(w.id);
        continue;
      }
      if (w.probing || w.nextProbe > now) continue;
      w.probing = true;
      void probePing(w.address, 1000, w.pingHeaders).then((answer) => {
        w.probing = false;
        w.nextProbe = Date.now() + (answer.state === "ready" ? READY_PING_MS : STARTING_PING_MS);
        this.heard(w, answer.state, answer.status);
      });
    }
  }

  private heard(w: PoolWorker, state: PingState, status: number | undefined): void {
    if (this.closed || this.workers.get(w.id) !== w) return;
    const before = w.state;
    if (state === "ready" || state === "initializing") this.tryDirect(w);
    if (state === "ready") {
      w.failures = 0;
      w.state = "ready";
      if (before !== "ready") {
        const standby = this.deps.engine.workers.get(w.id)?.standby === true;
        this.note(
          w.endpointId,
          w.id,
          `lb: worker ${w.id} answered /ping 200: ready, ${standby ? "taking traffic once its release switches" : "taking traffic"}`,
        );
        // The one door of readiness: a release's probe has come up.
        this.deps.engine.workerReady(w.id, "ping");
        this.dispatch(w.endpointId);
      }
      return;
    }
    if (state === "initializing" || state === "missing") {
      w.state = state;
      if (before !== state) {
        const text =
          state === "initializing" ? `lb: worker ${w.id} answered /ping 204: initializing` : `lb: ${pingVerdict(w.address, { state, status }).message}`;
        this.note(w.endpointId, w.id, text);
      }
      return;
    }
    // unreachable or unhealthy: a ready worker gets a second chance before it leaves the pool
    w.failures++;
    if (before === "ready" && w.failures < PING_FAILURES_OUT) return;
    w.state = state;
    if (before === "ready") this.note(w.endpointId, w.id, `lb: worker ${w.id} stopped answering /ping (${status ?? "no answer"}): taken out of the pool`);
    else if ((status === 401 || status === 403) && w.refusedSeen !== status) {
      // Said once: the worker listening there is another (this one registered an address not its own).
      w.refusedSeen = status;
      this.note(
        w.endpointId,
        w.id,
        `lb: ${w.address} refused worker ${w.id}'s credential (/ping answered ${status}): the server there is not that worker; it gets no traffic`,
      );
    }
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
    this.note(endpointId, workerId, `cold start: the first request after idle waited ${ms} ms for worker ${workerId}`);
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
      this.note(
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
        this.note(endpointId, w.id, `lb: worker ${w.id} failed mid-request: taken out of the pool`);
      }
    }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
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
