// The worker's side of the wire (docs/worker-protocol.md): JSON over HTTP with the worker's bearer token.
// One keep-alive agent: a job costs a take and a done on warm sockets, no connection setup per request.

import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { ApiError, type Problem } from "../errors.js";

export interface TakenJob {
  id: string;
  lease: string;
  function?: string;
  input: unknown;
  executionTimeoutMs?: number;
  attempt?: number;
  /** The W3C trace context of the job's run, when the service traces (docs/worker-protocol.md). */
  traceparent?: string;
}

export interface RegisterResponse {
  endpoint: { id: string; name: string; executionTimeoutMs?: number; maxConcurrency?: number };
  leaseMs: number;
  heartbeatMs: number;
  /** The service records results a `take` carries (older services ignore them: send none then). */
  takeResults?: boolean;
}

export interface JobResult {
  jobId: string;
  lease: string;
  status: "COMPLETED" | "FAILED";
  output?: unknown;
  /** `retryable: false`: fail the job without an automatic retry (the handler threw a NonRetryableError). */
  error?: { message: string; type?: string; stack?: string; retryable?: boolean };
}

export interface LogLine {
  ts: number;
  stream: "stdout" | "stderr" | "log";
  jobId?: string;
  text: string;
}

export interface RequestOptions {
  signal?: AbortSignal;
  /** Give up on the request after this long (long polls pass their wait plus a margin). */
  timeoutMs?: number;
}

/** Thrown for a response that is not JSON 2xx; carries the problem body. */
export class WorkerApiError extends ApiError {}

/** The service forgot this worker (it restarted without it, or reaped it): register again. */
export function isUnknownWorker(err: unknown): boolean {
  if (!(err instanceof ApiError)) return false;
  if (err.status !== 404 && err.status !== 410) return false;
  return /unknown worker|worker .*not (found|known|registered)/i.test(`${err.problem.title} ${err.problem.detail}`);
}

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
  routeUrls: Map<string, URL>;
}

export class WorkerApi {
  readonly baseUrl: URL;
  private readonly agent: HttpAgent;
  private readonly headers: Record<string, string>;
  private readonly send: typeof httpRequest;
  private readonly routeUrls = new Map<string, URL>();
  /** The jobs replica's own address, once a replica named it; undefined: the configured address. */
  private direct?: DirectAddress;
  private directRefusedUntil = 0;

  constructor(apiUrl: string, token: string) {
    this.baseUrl = new URL(apiUrl.endsWith("/") ? apiUrl : `${apiUrl}/`);
    const secure = this.baseUrl.protocol === "https:";
    const agentOptions = { keepAlive: true, keepAliveMsecs: 1000, maxSockets: 32, maxFreeSockets: 8 };
    this.agent = secure ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);
    this.send = (secure ? httpsRequest : httpRequest) as typeof httpRequest;
    this.headers = { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json" };
  }

  /** POST a JSON body (or an already serialised one) to `_worker/v1/<route>`. */
  post<T>(route: string, body: unknown, options: RequestOptions = {}): Promise<T> {
    const payload = typeof body === "string" ? body : JSON.stringify(body);
    const direct = this.direct;
    return new Promise<T>((resolve, reject) => {
      const req = this.send(
        this.routeUrl(route, direct),
        {
          method: "POST",
          agent: this.agent,
          headers: { ...this.headers, "content-length": Buffer.byteLength(payload) },
          signal: options.signal,
        },
        (res) => {
          this.noteJobsReplica(res.headers[JOBS_REPLICA_HEADER]);
          readBody(res).then((text) => {
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) {
              try {
                resolve((text ? JSON.parse(text) : {}) as T);
              } catch {
                reject(new WorkerApiError(problemOf(status, `invalid JSON from ${route}`)));
              }
              return;
            }
            reject(new WorkerApiError(parseProblem(status, text, route)));
          }, reject);
        },
      );
      req.setTimeout(options.timeoutMs ?? 30_000, () => req.destroy(new Error(`${route}: no answer within ${options.timeoutMs ?? 30_000} ms`)));
      if (direct) {
        req.once("socket", (socket) => {
          if (!socket.connecting) return;
          const timer = setTimeout(() => req.destroy(new Error(`${direct.base}: no connection within ${DIRECT_CONNECT_TIMEOUT_MS} ms`)), DIRECT_CONNECT_TIMEOUT_MS);
          socket.once("connect", () => clearTimeout(timer));
          socket.once("close", () => clearTimeout(timer));
        });
      }
      req.on("error", (err) => {
        // The jobs replica went away or cannot be reached from here: the caller retries, through the cluster's
        // address, which knows where jobs are served now.
        if (direct && this.direct === direct) {
          this.direct = undefined;
          this.directRefusedUntil = Date.now() + DIRECT_RETRY_AFTER_MS;
        }
        reject(err);
      });
      req.end(payload);
    });
  }

  /** Where this worker's calls go now: the configured address, or the jobs replica's own once one named it. */
  get currentUrl(): string {
    return this.direct?.base ?? this.baseUrl.href;
  }

  /** A replica named the one serving jobs: talk to it straight from the next call on (same scheme only). */
  private noteJobsReplica(value: string | string[] | undefined): void {
    if (typeof value !== "string" || value === this.direct?.base) return;
    if (Date.now() < this.directRefusedUntil) return;
    let base: URL;
    try {
      base = new URL(value.endsWith("/") ? value : `${value}/`);
    } catch {
      return; // not an address: keep going through the configured one
    }
    if (base.protocol !== this.baseUrl.protocol) return;
    this.direct = { base: value, url: base, routeUrls: new Map() };
  }

  /** Parsed once per route: a worker posts thousands of times a second under load. */
  private routeUrl(route: string, direct?: DirectAddress): URL {
    const cache = direct?.routeUrls ?? this.routeUrls;
    let url = cache.get(route);
    if (!url) cache.set(route, (url = new URL(`_worker/v1/${route}`, direct?.url ?? this.baseUrl)));
    return url;
  }

  close(): void {
    this.agent.destroy();
  }
}

function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    res.on("error", reject);
    res.on("aborted", () => reject(new Error("response aborted")));
  });
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
