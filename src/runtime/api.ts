// The worker's side of the wire (docs/worker-protocol.md): JSON over HTTP with the worker's bearer token.
// Keep-alive connections (svc's own small client, a fifth of node:http's CPU a call): a job costs a take and a
// done on warm sockets, no connection setup per request.

import { KeepAliveClient, type HttpAnswer } from "svc/internal";
import { ApiError, type Problem } from "../errors.js";

// The messages, defined once with the service's side (src/wire/worker.ts).
export type { JobResult, LogLine, TakenJob } from "../wire/worker.js";
export type { RegisterAnswer as RegisterResponse } from "../wire/worker.js";

export interface RequestOptions {
  signal?: AbortSignal;
  /** Give up on the request after this long (long polls pass their wait plus a margin). */
  timeoutMs?: number;
}

/** Thrown for a response that is not JSON 2xx; carries the problem body. */
export class WorkerApiError extends ApiError {}

/** Worth retrying: the network failed, the service is overloaded or restarting. Other 4xx are our bugs. */
export function isTransient(err: unknown): boolean {
  if (err instanceof ApiError) return err.status >= 500 || err.status === 429 || err.status === 408;
  return true;
}

/**
 * The header a replica that passes worker calls on to the replica serving jobs adds to its answers: that replica's
 * address, so the worker may talk to it straight (docs/scale-out.md "Workers reach the jobs replica").
 */
export const JOBS_REPLICA_HEADER = "svc-jobs-replica";
/** A direct address that failed is not tried again for this long: the cluster's address works meanwhile. */
const DIRECT_RETRY_AFTER_MS = 30_000;
/** A direct address that takes longer than this to connect to is taken as unreachable from here. */
const DIRECT_CONNECT_TIMEOUT_MS = 2000;

interface DirectAddress {
  /** As the replica named it. */
  base: string;
  url: URL;
  routePaths: Map<string, string>;
  connections: Connections;
}

/**
 * The connections to one address: takes on their own, so that the service's LB front keeps answering them (it
 * hands a connection to node:http for good at the first call it does not answer itself: register, heartbeat, ...).
 */
class Connections {
  readonly takes: KeepAliveClient;
  readonly others: KeepAliveClient;
  constructor(url: URL) {
    this.takes = new KeepAliveClient(url, { maxSockets: 4 });
    this.others = new KeepAliveClient(url, { maxSockets: 32 });
  }
  for(route: string): KeepAliveClient {
    return route === "take" ? this.takes : this.others;
  }
  close(): void {
    this.takes.close();
    this.others.close();
  }
}

export class WorkerApi {
  readonly baseUrl: URL;
  private readonly connections: Connections;
  private readonly headers: Record<string, string>;
  private readonly routePaths = new Map<string, string>();
  /** The jobs replica's own address, once a replica named it; undefined: the configured address. */
  private direct?: DirectAddress;
  private directRefusedUntil = 0;

  constructor(apiUrl: string, token: string) {
    this.baseUrl = new URL(apiUrl.endsWith("/") ? apiUrl : `${apiUrl}/`);
    this.connections = new Connections(this.baseUrl);
    this.headers = { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json" };
  }

  /** POST a JSON body (or an already serialised one) to `_worker/v1/<route>`. */
  async post<T>(route: string, body: unknown, options: RequestOptions = {}): Promise<T> {
    const payload = typeof body === "string" ? body : JSON.stringify(body);
    const direct = this.direct;
    let answer: HttpAnswer;
    try {
      answer = await (direct?.connections ?? this.connections).for(route).request({
        method: "POST",
        path: this.routePath(route, direct),
        headers: this.headers,
        body: payload,
        signal: options.signal,
        timeoutMs: options.timeoutMs ?? 30_000,
        connectTimeoutMs: direct ? DIRECT_CONNECT_TIMEOUT_MS : undefined,
      });
    } catch (err) {
      // The jobs replica went away or cannot be reached from here: the caller retries, through the cluster's
      // address, which knows where jobs are served now.
      if (direct && this.direct === direct) {
        this.direct = undefined;
        this.directRefusedUntil = Date.now() + DIRECT_RETRY_AFTER_MS;
        direct.connections.close();
      }
      throw err;
    }
    this.noteJobsReplica(answer.headers[JOBS_REPLICA_HEADER]);
    const text = answer.body.toString("utf8");
    if (answer.status >= 200 && answer.status < 300) {
      try {
        return (text ? JSON.parse(text) : {}) as T;
      } catch {
        throw new WorkerApiError(problemOf(answer.status, `invalid JSON from ${route}`));
      }
    }
    throw new WorkerApiError(parseProblem(answer.status, text, route));
  }

  /** Where this worker's calls go now: the configured address, or the jobs replica's own once one named it. */
  get currentUrl(): string {
    return this.direct?.base ?? this.baseUrl.href;
  }

  /** A replica named the one serving jobs: talk to it straight from the next call on (same scheme only). */
  private noteJobsReplica(value: string | undefined): void {
    if (typeof value !== "string" || value === this.direct?.base) return;
    if (Date.now() < this.directRefusedUntil) return;
    let base: URL;
    try {
      base = new URL(value.endsWith("/") ? value : `${value}/`);
    } catch {
      return; // not an address: keep going through the configured one
    }
    if (base.protocol !== this.baseUrl.protocol) return;
    this.direct?.connections.close();
    this.direct = { base: value, url: base, routePaths: new Map(), connections: new Connections(base) };
  }

  /** Made once per route: a worker posts thousands of times a second under load. */
  private routePath(route: string, direct?: DirectAddress): string {
    const cache = direct?.routePaths ?? this.routePaths;
    let path = cache.get(route);
    if (!path) {
      const url = new URL(`_worker/v1/${route}`, direct?.url ?? this.baseUrl);
      cache.set(route, (path = url.pathname + url.search));
    }
    return path;
  }

  close(): void {
    this.connections.close();
    this.direct?.connections.close();
  }
}

function problemOf(status: number, detail: string): Problem {
  return { title: status >= 500 ? "Server Error" : "Bad Response", status, detail };
}

function parseProblem(status: number, text: string, route: string): Problem {
  try {
    const parsed = JSON.parse(text) as Partial<Problem>;
    if (parsed && typeof parsed === "object" && typeof parsed.title === "string") {
      return { ...parsed, title: parsed.title, status, detail: String(parsed.detail ?? "") } as Problem;
    }
  } catch {
    // not a problem body: fall through
  }
  return problemOf(status, `${route}: ${text.slice(0, 200) || "no body"}`);
}

/** Backoff with jitter: 100 ms doubling to 5 s. */
export function backoffMs(attempt: number): number {
  const base = Math.min(5000, 100 * 2 ** Math.min(attempt, 6));
  return Math.round(base / 2 + Math.random() * (base / 2));
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
