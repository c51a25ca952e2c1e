// The provider's worker protocol on the wire: the protocol its Python worker SDK (`runpod.serverless.start`)
// speaks, which svc serves beside its own (docs/worker-protocol.md) so images built for the provider run
// unchanged. Its routes, the URL templates a worker is given, and the messages both ways, each read and checked
// here once; the service's routes (service/workers/provider-routes.ts) and the drivers' variables
// (drivers/provider-env.ts) use nothing else. Pure: no HTTP objects, no state. docs/provider-workers.md.

/** Where the provider's worker routes live: beside svc's own (/_worker/v1/), with the provider's path names. */
export const PROVIDER_WORKER_BASE = "/_worker/provider/v2";

/**
 * The route patterns. The SDK derives two of them from the job-take URL it is given, by replacing `/job-take/`
 * (rp_job.py: `_job_get_url` makes `/job-take-batch/`, `_job_stop_url` makes `/job-stop/`): all three share a form.
 */
export const PROVIDER_ROUTES = {
  take: `${PROVIDER_WORKER_BASE}/:endpoint/job-take/:worker`,
  takeBatch: `${PROVIDER_WORKER_BASE}/:endpoint/job-take-batch/:worker`,
  stop: `${PROVIDER_WORKER_BASE}/:endpoint/job-stop/:worker`,
  done: `${PROVIDER_WORKER_BASE}/:endpoint/job-done/:worker/:job`,
  stream: `${PROVIDER_WORKER_BASE}/:endpoint/job-stream/:worker/:job`,
  ping: `${PROVIDER_WORKER_BASE}/:endpoint/ping/:worker`,
} as const;

/**
 * The query every template carries. The SDK appends `&job_in_progress=…`, `&batch_size=…`, `&isStream=…` to the
 * URLs as given, so each must already have a query; this one names the protocol and is otherwise ignored.
 */
const TEMPLATE_QUERY = "?protocol=provider";

/**
 * The URL templates, as the SDK substitutes them: in the job-take URL `$ID` is the worker's id (rp_job.py
 * JOB_GET_URL); in job-done and job-stream `$RUNPOD_POD_ID` is the worker's id and `$ID` the job's (rp_http.py
 * `_handle_result`); in ping `$RUNPOD_POD_ID` is the worker's id (rp_ping.py). `apiUrl`: the service as the
 * worker reaches it. Pure.
 */
export function providerUrlTemplates(
  apiUrl: string,
  endpointId: string,
): {
  getJob: string;
  postOutput: string;
  postStream: string;
  ping: string;
} {
  const base = `${apiUrl.replace(/\/+$/, "")}${PROVIDER_WORKER_BASE}/${encodeURIComponent(endpointId)}`;
  return {
    getJob: `${base}/job-take/$ID${TEMPLATE_QUERY}`,
    postOutput: `${base}/job-done/$RUNPOD_POD_ID/$ID${TEMPLATE_QUERY}`,
    postStream: `${base}/job-stream/$RUNPOD_POD_ID/$ID${TEMPLATE_QUERY}`,
    ping: `${base}/ping/$RUNPOD_POD_ID${TEMPLATE_QUERY}`,
  };
}

/** A route of the protocol (PROVIDER_ROUTES' names). */
export type ProviderRoute = keyof typeof PROVIDER_ROUTES;

/** A worker's call named by its request target. */
export interface ProviderWorkerCall {
  route: ProviderRoute;
  endpointId: string;
  workerId: string;
  /** job-done's and job-stream's job. */
  jobId?: string;
  /** The query, without its `?`. */
  query: string;
}

/** Whether a route is a long poll (a take, the stop poll), which answers when it has something or its wait ends. Pure. */
export function isLongPoll(route: ProviderRoute): boolean {
  return route === "take" || route === "takeBatch" || route === "stop";
}

const ROUTE_OF_NAME: Partial<Record<string, { route: ProviderRoute; method: "GET" | "POST"; job: boolean }>> = {
  "job-take": { route: "take", method: "GET", job: false },
  "job-take-batch": { route: "takeBatch", method: "GET", job: false },
  "job-stop": { route: "stop", method: "GET", job: false },
  ping: { route: "ping", method: "GET", job: false },
  "job-done": { route: "done", method: "POST", job: true },
  "job-stream": { route: "stream", method: "POST", job: true },
};

const CALL_PREFIX = `${PROVIDER_WORKER_BASE}/`;
const ID = /^[A-Za-z0-9_-]+$/;

/**
 * The call a request's method and target name, for the LB front, which answers them without node:http; undefined
 * for anything else, or anything it should not read alone (ids outside the unreserved characters, which the
 * router decodes). Read by index rather than one regular expression: every result a provider worker posts asks
 * this. Pure.
 */
export function providerWorkerCall(method: string, target: string): ProviderWorkerCall | undefined {
  if (!target.startsWith(CALL_PREFIX)) return undefined;
  const queryAt = target.indexOf("?", CALL_PREFIX.length);
  const path = target.slice(CALL_PREFIX.length, queryAt < 0 ? undefined : queryAt);
  const parts = path.split("/");
  if (parts.length < 3 || parts.length > 4) return undefined;
  const [endpointId, name, workerId, jobId] = parts as [string, string, string, string | undefined];
  const route = ROUTE_OF_NAME[name];
  if (!route || method !== route.method || (jobId !== undefined) !== route.job) return undefined;
  if (!ID.test(endpointId) || !ID.test(workerId) || (jobId !== undefined && !ID.test(jobId))) return undefined;
  const query = queryAt < 0 ? "" : target.slice(queryAt + 1);
  if (query.includes("#")) return undefined;
  return { route: route.route, endpointId, workerId, ...(jobId !== undefined ? { jobId } : {}), query };
}

/** The most jobs one batch take may ask for (the SDK's `concurrency_modifier` decides; svc caps it). */
export const MAX_PROVIDER_BATCH = 1000;

export interface ProviderTakeQuery {
  /** How many jobs at most: `batch_size` on job-take-batch, 1 on job-take. */
  max: number;
  /** `job_in_progress`: whether the worker still runs jobs it took (undefined: it did not say). */
  jobInProgress?: boolean;
}

/** A take's query read; problems go to `errors` (answered 400, which the SDK reads as "no job"). Pure. */
export function providerTakeQuery(query: URLSearchParams, batch: boolean, errors: string[]): ProviderTakeQuery {
  let max = 1;
  if (batch) {
    const raw = query.get("batch_size");
    const n = raw !== null && /^[0-9]+$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isInteger(n) || n < 1 || n > MAX_PROVIDER_BATCH) errors.push(`batch_size: must be an integer from 1 to ${MAX_PROVIDER_BATCH}`);
    else max = n;
  }
  const flag = query.get("job_in_progress");
  let jobInProgress: boolean | undefined;
  if (flag === "1") jobInProgress = true;
  else if (flag === "0") jobInProgress = false;
  else if (flag !== null) errors.push("job_in_progress: must be 0 or 1");
  return { max, jobInProgress };
}

/** `isStream` of job-done and job-stream: true when the result ends a generator handler's job. Pure. */
export function providerIsStream(query: URLSearchParams, errors: string[]): boolean {
  const v = query.get("isStream");
  if (v === null || v === "false") return false;
  if (v === "true") return true;
  errors.push("isStream: must be true or false");
  return false;
}

/**
 * The jobs a ping names (`job_id`: the SDK sends its in-progress ids comma-separated, worker_state.py
 * `get_job_list`; repeated parameters are read too). Pure.
 */
export function providerPingJobIds(query: URLSearchParams): string[] {
  const ids = query.getAll("job_id").flatMap((v) => v.split(","));
  return [...new Set(ids.map((s) => s.trim()).filter((s) => s.length > 0))];
}

/** A failure as svc records it (the engine's DoneResult error). */
export interface ProviderError {
  /** What /status shows as `error`: the worker's error as it sent it (a string), as the provider shows it. */
  message: string;
  type?: string;
  stack?: string;
}

/** What a job-done body says. */
export type ProviderResult =
  /** `progress_update` (rp_progress.py): `{status: "IN_PROGRESS", output: progress}`. */
  | { kind: "progress"; progress: unknown }
  | { kind: "completed"; output?: unknown; stopPod: boolean }
  /** `{error}` (a handler exception, a generator's error) or a handler's dict with `error` (its output kept). */
  | { kind: "failed"; error: ProviderError; output?: unknown; stopPod: boolean };

/**
 * A job-done body read (the SDK sends JSON text, `json.dumps(job_data)`, under a form content type: rp_http.py
 * `_transmit`). `parsed`: the body's JSON value. Problems go to `errors`. Pure.
 */
export function providerResult(parsed: unknown, errors: string[]): ProviderResult {
  if (!isObject(parsed)) {
    errors.push("$: must be an object");
    return { kind: "completed", stopPod: false };
  }
  const has = (key: string) => Object.hasOwn(parsed, key) && parsed[key] !== undefined;
  if (has("status")) {
    if (parsed.status !== "IN_PROGRESS") errors.push('$.status: only "IN_PROGRESS" (a progress update) may be sent');
    else if (!has("output")) errors.push("$.output: a progress update carries its progress as output");
    return { kind: "progress", progress: parsed.output ?? null };
  }
  let stopPod = false;
  if (has("stopPod")) {
    if (typeof parsed.stopPod !== "boolean") errors.push("$.stopPod: must be a boolean");
    else stopPod = parsed.stopPod;
  }
  const output = has("output") ? parsed.output : undefined;
  // As the SDK: an error counts when it is truthy (rp_job.py run_job sets it only then).
  const error = parsed.error;
  if (error !== undefined && error !== null && error !== "" && error !== false) {
    return { kind: "failed", error: providerError(error), ...(output !== undefined ? { output } : {}), stopPod };
  }
  return { kind: "completed", ...(output !== undefined ? { output } : {}), stopPod };
}

/**
 * A worker's error as svc records it. The SDK's handler exceptions are JSON text of {error_type, error_message,
 * error_traceback, hostname, worker_id, runpod_version} (rp_job.py run_job): kept as sent (the provider's /status
 * shows that text as `error`), with svc's `errorType` and `errorStack` read from it. Any other value is its text. Pure.
 */
export function providerError(error: unknown): ProviderError {
  const message = typeof error === "string" ? error : JSON.stringify(error);
  if (typeof error !== "string") return { message };
  let details: unknown;
  try {
    details = JSON.parse(error);
  } catch {
    // Not the SDK's JSON (a generator's "handler: … traceback: …" text, a handler's own string): the text alone.
    return { message };
  }
  if (!isObject(details)) return { message };
  return {
    message,
    ...(typeof details.error_type === "string" ? { type: details.error_type } : {}),
    ...(typeof details.error_traceback === "string" ? { stack: details.error_traceback } : {}),
  };
}

/** A job-stream body read: one chunk, `{output}` as the SDK sends each value a generator yields. Pure. */
export function providerStreamChunk(parsed: unknown, errors: string[]): { output: unknown } {
  if (!isObject(parsed)) {
    errors.push("$: must be an object");
    return { output: null };
  }
  if (!Object.hasOwn(parsed, "output")) errors.push("$.output: is required");
  return { output: parsed.output ?? null };
}

/**
 * A take's answer body: one job `{id, input}` on job-take, a list on job-take-batch (rp_job.py get_job reads
 * both). `input`: the job's input as stored JSON text, spliced in without re-encoding. Pure.
 */
export function providerTakeAnswer(jobs: ReadonlyArray<{ id: string; input: string }>, batch: boolean, s3Configs?: ReadonlyMap<string, unknown>): string {
  // A job whose submission named a bucket carries `s3Config`, as the provider hands it to the handler's job.
  const items = jobs.map(
    (j) => `{"id":${JSON.stringify(j.id)},"input":${j.input}${s3Configs?.has(j.id) ? `,"s3Config":${JSON.stringify(s3Configs.get(j.id))}` : ""}}`,
  );
  return batch ? `[${items.join(",")}]` : items[0]!;
}

/** The stop channel's answer (rp_job.py get_stop_signals): the jobs to stop. Pure. */
export function providerStopAnswer(jobIds: readonly string[]): string {
  return JSON.stringify({ jobsToStop: jobIds });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
