// A typed client for the queue-based job API of one endpoint: `{queue_base_url}/v2/{endpoint_id}`.
// Used by the SDK's remote calls, the CLI, the tests and the benchmarks.

import { ApiError, ExitCode, UnreachableError, UserError, type Problem } from "./errors.js";
import { KeepAliveClient } from "./keep-alive-client.js";

export type JobStatus = "IN_QUEUE" | "IN_PROGRESS" | "COMPLETED" | "FAILED" | "CANCELLED" | "TIMED_OUT";
export const FINAL_STATUSES: readonly JobStatus[] = ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"];

export interface JobRecord<O = unknown> {
  id: string;
  status: JobStatus;
  output?: O;
  error?: string;
  delayTime?: number;
  executionTime?: number;
  [extra: string]: unknown;
}

export interface StreamChunk<C = unknown> {
  output: C;
  metrics?: Record<string, unknown>;
  /** Present on chunks of a re-run (2, 3, ...): the job's attempt that streamed it (docs/job-api.md, "Stream"). */
  attempt?: number;
}

export interface StreamResult<C = unknown> {
  status: JobStatus;
  stream: StreamChunk<C>[];
}

export interface HealthResult {
  jobs: { completed: number; failed: number; inProgress: number; inQueue: number; retried: number };
  workers: { idle: number; running: number; [state: string]: number };
  [extra: string]: unknown;
}

export interface SubmitOptions {
  /** Which function of the endpoint runs the job (needed when the endpoint serves several). */
  function?: string;
  webhook?: string;
  policy?: { executionTimeout?: number; ttl?: number; lowPriority?: boolean };
}

/** One pool of keep-alive connections per origin, shared by every JobsClient of this process. */
const connections = new Map<string, KeepAliveClient>();

function connectionsTo(url: URL): KeepAliveClient {
  let client = connections.get(url.origin);
  if (!client) connections.set(url.origin, (client = new KeepAliveClient(url.origin)));
  return client;
}

/**
 * A request header marking a call as svc's own bookkeeping rather than a caller's (svc dev reads a failed job's
 * record to print its stack): the dev terminal's request log leaves it out.
 */
export const QUIET_HEADER = "x-svc-quiet";

export class JobsClient {
  readonly base: string;
  private readonly headers: Record<string, string>;
  private readonly http: KeepAliveClient;
  /** The base's path (`/v2/{endpoint_id}`), which every call's path follows. */
  private readonly basePath: string;

  /** `base` is the endpoint's job API address, `{queue_base_url}/v2/{endpoint_id}`. */
  /** `quiet`: each call carries QUIET_HEADER. */
  constructor(base: string, apiKey?: string, options: { quiet?: boolean } = {}) {
    this.base = base.replace(/\/+$/, "");
    let url: URL;
    try {
      url = new URL(this.base);
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(url.protocol);
    } catch (err) {
      throw new UserError(`Not an http(s) address for the job API: ${base}`, {
        hint: "Pass the endpoint's job API address, such as http://127.0.0.1:8600/v2/<endpoint id>.",
        cause: err,
      });
    }
    this.http = connectionsTo(url);
    this.basePath = url.pathname.replace(/\/+$/, "");
    this.headers = { "content-type": "application/json", accept: "application/json" };
    if (apiKey) this.headers.authorization = `Bearer ${apiKey}`;
    if (options.quiet) this.headers[QUIET_HEADER] = "1";
  }

  run(input: unknown, options: SubmitOptions = {}): Promise<{ id: string; status: JobStatus }> {
    return this.request("POST", "/run", { input, ...options });
  }

  runsync<O = unknown>(input: unknown, options: SubmitOptions & { wait?: number } = {}): Promise<JobRecord<O>> {
    const { wait, ...rest } = options;
    return this.request("POST", `/runsync${wait ? `?wait=${wait}` : ""}`, { input, ...rest });
  }

  status<O = unknown>(id: string, options: { ttl?: number } = {}): Promise<JobRecord<O>> {
    return this.request("GET", `/status/${encodeURIComponent(id)}${options.ttl ? `?ttl=${options.ttl}` : ""}`);
  }

  statusSync<O = unknown>(id: string, wait: number): Promise<JobRecord<O>> {
    return this.request("GET", `/status-sync/${encodeURIComponent(id)}?wait=${wait}`);
  }

  stream<C = unknown>(id: string): Promise<StreamResult<C>> {
    return this.request("GET", `/stream/${encodeURIComponent(id)}`);
  }

  cancel(id: string): Promise<{ id: string; status: JobStatus }> {
    return this.request("POST", `/cancel/${encodeURIComponent(id)}`);
  }

  retry(id: string): Promise<{ id: string; status: JobStatus }> {
    return this.request("POST", `/retry/${encodeURIComponent(id)}`);
  }

  purgeQueue(): Promise<{ removed: number; status: string }> {
    return this.request("POST", "/purge-queue");
  }

  health(): Promise<HealthResult> {
    return this.request("GET", "/health");
  }

  /** Poll until the job reaches a final state (uses /status-sync so it does not spin). */
  async waitFor<O = unknown>(id: string, timeoutMs = 24 * 3600 * 1000): Promise<JobRecord<O>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      const record = await this.statusSync<O>(id, Math.max(1000, Math.min(30_000, left)));
      if (FINAL_STATUSES.includes(record.status) || Date.now() >= deadline) return record;
    }
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const url = this.base + path;
    let answer;
    try {
      answer = await this.http.request({
        method,
        path: this.basePath + path,
        headers: this.headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new UnreachableError(url, err);
    }
    const text = answer.body.toString("utf8");
    return jsonOf<T>(text, { url, status: answer.status, statusText: answer.statusText, contentType: answer.headers["content-type"] ?? null });
  }
}

/** Parse a JSON response; turn a problem (or any non-2xx) into an ApiError. */
export async function readJson<T>(response: Response): Promise<T> {
  const text = await response.text();
  return jsonOf<T>(text, { url: response.url, status: response.status, statusText: response.statusText, contentType: response.headers.get("content-type") });
}

/** An answer's JSON body, or the ApiError its status (not 2xx) and problem make. */
function jsonOf<T>(text: string, answer: { url: string; status: number; statusText: string; contentType: string | null }): T {
  if (answer.status < 200 || answer.status > 299) {
    throw new ApiError(problemOf(parseServiceJson(text, answer), { status: answer.status, statusText: answer.statusText, text }));
  }
  return parseServiceJson(text, answer) as T;
}

/** An error answer's problem: its body when that is a problem+json, else one made of the status and text. */
export function problemOf(body: unknown, answer: { status: number; statusText?: string; text: string }): Problem {
  const p = body as Partial<Problem> | undefined;
  return p && typeof p.status === "number" ? (p as Problem) : { title: answer.statusText || "Error", status: answer.status, detail: answer.text.slice(0, 500) };
}

/**
 * The JSON body of an answer from the service (undefined when empty). A body that is not JSON (an HTML page,
 * say) means the address is not an svc service: a user error with the "cannot reach" exit code, naming what
 * answered, instead of a JSON syntax error.
 */
export function parseServiceJson(text: string, answer: { url?: string; status: number; contentType: string | null }): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const url = answer.url ? new URL(answer.url) : undefined;
    const what = `HTTP ${answer.status}, ${answer.contentType ?? "no content type"}${url ? ` from ${url.pathname}` : ""}`;
    throw new UserError(`${url?.origin ?? "The service address"} answered, but it is not an svc service (${what})`, {
      hint: "Check SVC_API_URL: it should be the address `svc server` or `svc dev` prints (default http://127.0.0.1:8600).",
      exitCode: ExitCode.unreachable,
      cause: err,
    });
  }
}
