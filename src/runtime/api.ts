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
  error?: { message: string; type?: string; stack?: string };
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

export class WorkerApi {
  readonly baseUrl: URL;
  private readonly agent: HttpAgent;
  private readonly headers: Record<string, string>;
  private readonly send: typeof httpRequest;
  private readonly routeUrls = new Map<string, URL>();

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
    return new Promise<T>((resolve, reject) => {
      const req = this.send(
        this.routeUrl(route),
        {
          method: "POST",
          agent: this.agent,
          headers: { ...this.headers, "content-length": Buffer.byteLength(payload) },
          signal: options.signal,
        },
        (res) => {
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
      req.on("error", reject);
      req.end(payload);
    });
  }

  /** Parsed once per route: a worker posts thousands of times a second under load. */
  private routeUrl(route: string): URL {
    let url = this.routeUrls.get(route);
    if (!url) this.routeUrls.set(route, (url = new URL(`_worker/v1/${route}`, this.baseUrl)));
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
