// The job API: /v2/{endpoint_id}/run, /runsync, /status, /status-sync, /stream, /cancel, /retry,
// /purge-queue and /health, for user keys (admin, jobs:*, jobs:<endpoint>). Another user's endpoint answers
// 404, as if it did not exist. Their rows (jobs/index.ts) declare methods, body limits and auth.

import { gpuWaitMessage } from "../../gpus/host.js";
import type { ServerResponse } from "node:http";
import { canUseJobs, type Principal } from "../keys/auth.js";
import { isFinal } from "../engine/index.js";
import { intParam, jsonContentType, parseJson, sendJson, sendPieces, sendText } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import { SHARED_OUTPUT_MIN } from "../http/slow-clients.js";
import { defaultPolicy, desiredWorkers } from "../workers/scaling-policy.js";
import type { EndpointRow, JobRow } from "../store/types.js";
import { MAX_TTL_MS, validateSubmission } from "./validate.js";
import { workerState, type Submission, type WorkerState } from "../engine/types.js";
import { invalidIdempotencyKey, requestHash, type IdempotentSubmits } from "../idempotency/index.js";
import { newJobId } from "../engine/jobs.js";
import type { JobTracing } from "../tracing/index.js";
import type { RouteCall } from "../http/router.js";
import type { JobEngine } from "../engine/index.js";
import type { ClientGuards } from "../http/slow-clients.js";
import type { Scaler } from "../workers/scaler.js";
import type { StartFailures } from "../releases/start-failures.js";
import type { LbRouter } from "../lb/index.js";
import type { HostGpus } from "../../gpus/host.js";
import type { Store } from "../store/types.js";
import type { HealthAnswer } from "../http/answers.js";
import type { Webhooks } from "../webhooks/index.js";
import type { WebhookRule } from "../webhooks/address-policy.js";

/** What the job API needs of the service: its jobs, its endpoints, and what /health reports beside them. */
export interface JobDeps {
  engine: JobEngine;
  endpoints: ReadonlyMap<string, EndpointRow>;
  /** What a slow client may cost (http/slow-clients.ts). */
  clients: ClientGuards;
  /** Recent job ids of an endpoint (GET /v2/{endpoint}/jobs). */
  store: Pick<Store, "recentJobIds" | "jobHistory" | "historyJob">;
  scaler(): Pick<Scaler, "coldStarts" | "gpuWait" | "stopFailures" | "crashLoop"> | undefined;
  startFailures: Pick<StartFailures, "unhealthy" | "last">;
  gpus?(): HostGpus | undefined;
  lb?: Pick<LbRouter, "health">;
  /** Set on a replica that does not serve jobs: the address of the one that does (docs/scale-out.md). */
  jobsServedBy?(): string | null | undefined;
  /** This replica's name, when it writes `/run` jobs itself while another serves jobs (engine/handoff.ts). */
  handOffAs?: string;
  /** Whether the replica serving jobs adopts what followers hand off. */
  jobsReplicaAdopts?(): boolean;
  /** Which job each Idempotency-Key made (idempotency/index.ts). */
  idempotency: IdempotentSubmits;
  /** Jobs' spans, when traces are configured (tracing/index.ts). */
  tracing?: { jobs: Pick<JobTracing, "submitted"> };
  /** The ids of a user's network volumes: a job's `s3Config` must name one of its endpoint owner's. */
  ownVolumeIds?(userId: string): readonly string[];
  /** Where a job's webhook may go (webhooks/address-policy.ts): a URL refused from its text alone is a 422. */
  webhooks?: Pick<Webhooks, "addresses" | "refusedAtSubmit">;
}

export type JobCall = RouteCall<JobDeps>;

export const RUNSYNC_WAIT_DEFAULT_MS = 90_000;

/**
 * The row as the job record shows it: while the job is IN_PROGRESS, its latest progress is its `output`, as the
 * provider's /status shows a worker's progress_update. Pure.
 */
export function shownRow(row: JobRow): JobRow {
  return row.status === "IN_PROGRESS" && row.progress != null ? { ...row, output: row.progress } : row;
}

/** The job record as the job API returns it (JSON text; output is spliced in without re-encoding). */
export function recordJson(stored: JobRow, now: number): string {
  const row = shownRow(stored);
  const { head, tail } = recordParts(row, now);
  return row.output === null ? head + tail : head + row.output + tail;
}

/** The job record's JSON around its output: `head + output + tail` (or `head + tail` without output) is recordJson. Pure. */
export function recordParts(row: JobRow, now: number): { head: string; tail: string } {
  const delayTime = Math.max(0, Math.round((row.startedAt ?? (isFinal(row.status) ? (row.completedAt ?? now) : now)) - row.createdAt));
  const executionTime = row.startedAt === null ? 0 : Math.max(0, Math.round((row.completedAt ?? now) - row.startedAt));
  let text = `{"id":${JSON.stringify(row.id)},"status":"${row.status}","delayTime":${delayTime},"executionTime":${executionTime}`;
  if (row.output !== null) text += `,"output":`;
  let tail = "";
  if (row.error !== null) {
    tail += `,"error":${JSON.stringify(row.error)}`;
    if (row.errorType !== null) tail += `,"errorType":${JSON.stringify(row.errorType)}`;
    if (row.errorStack !== null) tail += `,"errorStack":${JSON.stringify(row.errorStack)}`;
  }
  if (row.retried > 0) tail += `,"retries":${row.retried}`;
  // svc's addition: how many times a worker took the job (2 on its first retry); absent before the first.
  if (row.attempt > 0) tail += `,"attempts":${row.attempt}`;
  return { head: text, tail: `${tail}}` };
}

/**
 * Send a job record. A large output goes out as one Buffer shared by every answer sending the same job's output
 * right now, in pieces with backpressure (never one multi-MB string per request). `outputBytes`: the size of a
 * stored output the record was read without (engine.recordHead); it is read here once for all its readers.
 */
async function sendRecord(ctx: JobDeps, res: ServerResponse, record: JobRow, now: number, outputBytes: number | null = null): Promise<void> {
  const row = shownRow(record);
  const stallMs = ctx.clients.limits.sendStallMs;
  const text = row.output;
  const size = outputBytes ?? (text === null ? 0 : text.length);
  const stored = outputBytes !== null;
  if (!stored && (text === null || size < SHARED_OUTPUT_MIN || !isFinal(row.status))) {
    const { head, tail } = recordParts(row, now);
    return sendPieces(res, text === null ? [head, tail] : [head, text, tail], stallMs);
  }
  const { head, tail } = recordParts(stored ? { ...row, output: "" } : row, now);
  const shared = await ctx.clients.outputs.acquire(`${row.id}:${row.completedAt ?? 0}`, stored ? size : Buffer.byteLength(text!), async () =>
    stored ? ctx.engine.storedOutput(row.id) : Buffer.from(text!, "utf8"),
  );
  try {
    await sendPieces(res, [head, shared.buffer, tail], stallMs);
  } finally {
    shared.release();
  }
}

/** The caller's endpoint `id`: 404 when it is not theirs (as if it did not exist), 403 when the key is scoped elsewhere. */
export function userEndpoint(ctx: Pick<JobDeps, "endpoints">, principal: Principal, id: string): EndpointRow {
  const endpoint = ctx.endpoints.get(id);
  if (!endpoint || endpoint.userId !== principal.userId) throw new HttpProblem(404, `No endpoint ${id}`);
  if (!canUseJobs(principal, id)) throw new HttpProblem(403, `This API key has no access to endpoint ${id}`);
  return endpoint;
}

/** The caller's queue endpoint `id` (a load-balanced one has no job API). */
function callersQueueEndpoint(ctx: JobDeps, principal: Principal, id: string): EndpointRow {
  const endpoint = userEndpoint(ctx, principal, id);
  if (endpoint.type !== "queue") throw new HttpProblem(400, `Endpoint ${endpoint.id} is load-balanced; it has no job API`);
  return endpoint;
}

/** The caller's queue endpoint of the route. */
function queueEndpoint(call: JobCall): EndpointRow {
  return callersQueueEndpoint(call.ctx, call.principal, call.params.endpoint!);
}

/**
 * On a replica that does not serve jobs: whether it answers a `/run` of `endpointId` itself by handing its job off
 * (engine/handoff.ts). Not for an endpoint it has not heard of yet (deployed a moment ago through another replica),
 * nor while the replica serving jobs does not adopt (an older svc): those go there.
 */
export function handsOffHere(ctx: JobDeps, endpointId: string): boolean {
  return ctx.handOffAs !== undefined && ctx.jobsReplicaAdopts?.() === true && ctx.endpoints.has(endpointId);
}

/** The address rules' verdict on a webhook URL's text (none without webhooks: nothing is delivered then). */
function webhookRefusal(ctx: JobDeps): (url: string) => ReturnType<Webhooks["addresses"]["literal"]> {
  return (url) => ctx.webhooks?.addresses.literal(url);
}

function noJob(call: JobCall): HttpProblem {
  return new HttpProblem(404, `No job ${call.params.job} on endpoint ${call.params.endpoint} (unknown, or its result expired)`);
}

async function submit(call: JobCall, sync: boolean): Promise<void> {
  const { ctx, url, res } = call;
  const endpoint = queueEndpoint(call);
  const wait = sync ? intParam(url, "wait", 1000, 300_000) : undefined;
  // Made in a function of its own: the parsed submission (an input of up to 20 MB) is garbage once the job is
  // queued, instead of staying alive with this frame for the whole wait of a /runsync.
  const { row, replayed } = await submitted(call, endpoint, sync, wait);
  if (replayed !== undefined) {
    if (replayed) res.setHeader("idempotent-replayed", "true");
    if (!sync) return sendText(res, replayed ? JSON.stringify({ id: row.id, status: row.status }) : runAnswer(row));
  } else if (!sync) return sendText(res, runAnswer(row));
  const final = await ctx.engine.waitFinalHead(endpoint.id, row.id, wait ?? RUNSYNC_WAIT_DEFAULT_MS);
  await ctx.engine.persist(row.id);
  return final ? sendRecord(ctx, res, final.row, Date.now(), final.outputBytes) : sendRecord(ctx, res, row, Date.now());
}

/**
 * Read, validate and submit the job of a `/run` or `/runsync`; its row once submitted (`replayed`: whether an
 * Idempotency-Key's earlier job answers instead, undefined without a key).
 */
async function submitted(call: JobCall, endpoint: EndpointRow, sync: boolean, wait: number | undefined): Promise<{ row: JobRow; replayed?: boolean }> {
  const { ctx } = call;
  const checked = checkedSubmission(ctx, endpoint, await call.json());
  if ("problem" in checked) {
    if (checked.webhookRule) ctx.webhooks?.refusedAtSubmit(checked.webhookRule);
    throw checked.problem;
  }
  const { value } = checked;
  const idempotencyKey = call.req.headers["idempotency-key"];
  if (idempotencyKey !== undefined) return submitIdempotent(call, endpoint, value, idempotencyKey, sync, wait);
  // A /runsync's caller learns the job's id only from this answer: the job reaches the store when it ends or
  // just before this answer, whichever is first (one commit instead of two for a job that ends within the wait).
  // Traced, the job's id is chosen here so that its trace is known before any worker can take it (a job handed off
  // is taken on another replica: its trace starts there).
  const id = call.handOffAs === undefined ? traced(ctx) : undefined;
  return { row: await enqueue(ctx, endpoint, value, { sync, waitMs: wait, deferWrite: sync, id, handOffAs: call.handOffAs }) };
}

/**
 * A parsed submission body checked against the endpoint (its functions, webhook address rules, the owner's
 * volumes): the submission, or the 422 problem it is with the webhook rule that refused it, if one did. The one
 * check of a `/run` and `/runsync`, on node:http's route and the LB front's alike. Pure: the route counts a refusal.
 */
function checkedSubmission(ctx: JobDeps, endpoint: EndpointRow, parsed: unknown): { value: Submission } | { problem: HttpProblem; webhookRule?: WebhookRule } {
  const { value, errors, webhookRule } = validateSubmission(
    parsed,
    endpoint.resource.functions.map((f) => f.name),
    webhookRefusal(ctx),
    () => ctx.ownVolumeIds?.(endpoint.userId) ?? [],
  );
  if (value) return { value };
  return { problem: new HttpProblem(422, "The job submission is not valid", { errors, members: webhookRule ? { webhookRule } : undefined }), webhookRule };
}

/**
 * Queue a checked submission: on this replica's engine, or, on a replica that does not serve jobs and answers this
 * one itself (api.ts handedOffHere, handsOffHere below), written for the serving replica to adopt (engine/handoff.ts).
 * The one enqueue of every submit path.
 */
function enqueue(
  ctx: JobDeps,
  endpoint: EndpointRow,
  value: Submission,
  how: { sync: boolean; waitMs?: number; deferWrite: boolean; id?: string; handOffAs?: string },
): Promise<JobRow> {
  return how.handOffAs !== undefined
    ? ctx.engine.handOff(endpoint.id, { ...value, sync: how.sync, id: how.id }, how.handOffAs)
    : ctx.engine.submit(endpoint.id, { ...value, sync: how.sync, waitMs: how.waitMs, deferWrite: how.deferWrite, id: how.id });
}

/**
 * A submit carrying an Idempotency-Key: the key's first request makes the job, every repeat answers with that job
 * (a `/run` its id and status now, a `/runsync` its record once final or the wait ends), marked
 * `Idempotent-Replayed: true`. Keyed jobs are written before they are answered, /runsync ones too, so that a repeat
 * after a crash finds them.
 */
async function submitIdempotent(
  call: JobCall,
  endpoint: EndpointRow,
  value: Submission,
  header: string | string[],
  sync: boolean,
  wait: number | undefined,
): Promise<{ row: JobRow; replayed: boolean }> {
  const { ctx } = call;
  const key = Array.isArray(header) ? undefined : header;
  const invalid = key === undefined ? "must be sent once" : invalidIdempotencyKey(key);
  if (invalid !== undefined || key === undefined) throw new HttpProblem(400, `The Idempotency-Key header ${invalid}`);
  const request = { userId: call.principal.userId, endpointId: endpoint.id, key, requestHash: requestHash(value) };
  const outcome = await ctx.idempotency.submit(
    request,
    newJobId(Date.now()),
    (id) => {
      ctx.tracing?.jobs.submitted(id);
      // Keyed jobs are written before they are answered (deferWrite false), /runsync ones too.
      return enqueue(ctx, endpoint, value, { sync, waitMs: wait, deferWrite: false, id, handOffAs: call.handOffAs });
    },
    async (id) => {
      const head = await ctx.engine.recordHead(endpoint.id, id);
      if (!head) return undefined;
      // Held in memory before its commit: answer only once it is written, as its first request is.
      await ctx.engine.persist(id);
      return head.row;
    },
  );
  if (outcome.kind === "mismatch") {
    throw new HttpProblem(422, `The Idempotency-Key ${JSON.stringify(key)} was used for job ${outcome.jobId} with another request body`, {
      errors: ["$.header.Idempotency-Key: reused with a different request body"],
    });
  }
  return { row: outcome.row, replayed: outcome.kind === "replayed" };
}

function workerList(engine: JobEngine, endpointId: string): Array<{ id: string; state: WorkerState; since: number; draining: boolean }> {
  const list = [];
  for (const w of engine.workers.values()) {
    if (w.endpointId !== endpointId) continue;
    const state = workerState(w);
    list.push({ id: w.id, state, since: state === "idle" ? w.idleSince : w.startedAt, draining: w.draining });
  }
  return list.sort((a, b) => a.since - b.since || a.id.localeCompare(b.id));
}

/** With traces on: a new job's id, its spans' parent being the request's span (active now). Else undefined. */
function traced(ctx: JobDeps): string | undefined {
  if (!ctx.tracing) return undefined;
  const id = newJobId(Date.now());
  ctx.tracing.jobs.submitted(id);
  return id;
}

/** The body of a `/run`'s answer. */
function runAnswer(row: JobRow): string {
  return `{"id":${JSON.stringify(row.id)},"status":"IN_QUEUE"}`;
}

/**
 * A `/run` answered without node:http (the LB front, lb/front.ts), when nothing in it needs more than the common
 * case: the route's checks (worker tokens, the caller's endpoint and key scope, a queue endpoint, a JSON body that
 * is a valid submission, this replica answering `/run` itself or handing its job off as api.ts would) are made here
 * first, before anything is counted or written. Undefined when any of them fails or does not apply: node:http then
 * serves the request through the route table, as it always did, and answers whatever error there is. Otherwise the
 * submission to make, resolving with the answer's body (its failures are the route's: HttpProblem, or a storage
 * error the dispatcher turns into a 503).
 */
export function quickRun(
  ctx: JobDeps,
  principal: Principal,
  endpointId: string,
  body: Buffer,
  contentType: string | undefined,
): (() => Promise<string>) | undefined {
  if (principal.worker || !jsonContentType(contentType)) return undefined;
  // On a replica that does not serve jobs, only a hand-off is answered here (as api.ts decides); the rest goes on.
  const handOffAs = ctx.jobsServedBy?.() === undefined ? undefined : handsOffHere(ctx, endpointId) ? ctx.handOffAs : null;
  if (handOffAs === null) return undefined;
  let endpoint: EndpointRow;
  let parsed: unknown;
  try {
    endpoint = callersQueueEndpoint(ctx, principal, endpointId);
    parsed = parseJson(body);
  } catch {
    // Not the caller's queue endpoint, or not JSON: node:http's path answers the problem with its reason.
    return undefined;
  }
  // A problem is node:http's to answer (and count): the front gives the request up before anything is counted.
  const checked = checkedSubmission(ctx, endpoint, parsed);
  if (!("value" in checked)) return undefined;
  const { value } = checked;
  return async () => runAnswer(await enqueue(ctx, endpoint, value, { sync: false, deferWrite: false, handOffAs }));
}

/**
 * A job API read answered without node:http (the LB front, lb/front.ts): `GET /v2/{endpoint}/health` (`jobId`
 * undefined) or `GET /v2/{endpoint}/status/{jobId}`, when this replica answers it itself (a replica that does not
 * serve jobs passes job traffic on), the caller is a user key of that endpoint, and the answer is small. The body
 * of the answer node:http would give, now (health) or once read (status); undefined, or a promise of undefined,
 * when node:http must serve the request (then it answers whatever error there is, or sends a large output from
 * one shared read). The front reads before it counts the request, so a read it gives up costs one more read.
 */
export function quickRead(ctx: JobDeps, principal: Principal, endpointId: string, jobId: string | undefined): string | Promise<string | undefined> | undefined {
  if (principal.worker || ctx.jobsServedBy?.() !== undefined) return undefined;
  let endpoint: EndpointRow;
  try {
    endpoint = jobId === undefined ? userEndpoint(ctx, principal, endpointId) : callersQueueEndpoint(ctx, principal, endpointId);
  } catch {
    // Not the caller's endpoint (or not a queue one): node:http's path answers the problem with its reason.
    return undefined;
  }
  if (jobId === undefined) return healthJson(ctx, endpoint);
  return smallRecord(ctx, endpoint.id, jobId);
}

/** A job's record as JSON text when its output is small, else undefined (sendRecord shares large ones). */
async function smallRecord(ctx: JobDeps, endpointId: string, jobId: string): Promise<string | undefined> {
  const head = await ctx.engine.recordHead(endpointId, jobId);
  if (!head) return undefined;
  const { row, outputBytes } = head;
  if (outputBytes === null)
    return row.output === null || row.output.length < SHARED_OUTPUT_MIN || !isFinal(row.status) ? recordJson(row, Date.now()) : undefined;
  if (outputBytes >= SHARED_OUTPUT_MIN) return undefined;
  const output = await ctx.engine.storedOutput(row.id);
  return output === undefined ? undefined : recordJson({ ...row, output: output.toString("utf8") }, Date.now());
}

/** An endpoint's health as the job API answers it. */
function healthJson(ctx: JobDeps, endpoint: EndpointRow): string {
  const health = ctx.engine.health(endpoint.id);
  const coldStarts = ctx.scaler()?.coldStarts.get(endpoint.id) ?? { count: 0, lastMs: null };
  const wanted = endpoint.type === "queue" ? policyWanted(ctx, endpoint, health) : undefined;
  const workers = { ...health.workers, ...jobClientWorkerCounts(health, endpoint.resource, wanted), unhealthy: ctx.startFailures.unhealthy(endpoint.id) };
  const lastStartError = ctx.startFailures.last(endpoint.id);
  const stopFailures = ctx.scaler()?.stopFailures.get(endpoint.id);
  const crashLoop = ctx.scaler()?.crashLoop(endpoint.id);
  // Workers not started for want of a free GPU count as throttled, and the answer says why.
  const gpuWait = ctx.scaler()?.gpuWait(endpoint.id);
  if (gpuWait) workers.throttled += gpuWait.workers;
  const hostGpus = ctx.gpus?.();
  const answer: HealthAnswer = {
    ...health,
    workers,
    // Each worker: its state and since when (idle: since its last job ended; else since it started).
    workerList: workerList(ctx.engine, endpoint.id),
    ...(gpuWait ? { throttledReason: gpuWaitMessage(gpuWait) } : {}),
    // The GPUs its workers hold, with their use as last sampled.
    ...(hostGpus?.assigning ? { gpus: hostGpus.view().filter((g) => g.holder?.endpointId === endpoint.id) } : {}),
    coldStarts,
    ...(endpoint.type === "lb" ? ctx.lb?.health(endpoint.id) : {}),
    ...(crashLoop ? { crashLoop } : {}),
    ...(lastStartError ? { lastStartError } : {}),
    ...(stopFailures ? { stopFailures } : {}),
    // Whether the service can write (a full disk makes every write 503 until it clears).
    storage: ctx.engine.storageState(),
  };
  return JSON.stringify(answer);
}

async function status(call: JobCall, sync: boolean): Promise<void> {
  const { ctx, url, res } = call;
  const { engine } = ctx;
  const endpointId = queueEndpoint(call).id;
  const jobId = call.params.job!;
  const ttl = intParam(url, "ttl", 1, MAX_TTL_MS);
  const wait = sync ? (intParam(url, "wait", 1000, 300_000) ?? RUNSYNC_WAIT_DEFAULT_MS) : 0;
  if (ttl === undefined) {
    // Without its output: a large one is read once for all concurrent readers (sendRecord).
    const head = sync ? await engine.waitFinalHead(endpointId, jobId, wait) : await engine.recordHead(endpointId, jobId);
    if (!head) throw noJob(call);
    return sendRecord(ctx, res, head.row, Date.now(), head.outputBytes);
  }
  let row: JobRow | undefined = sync ? await engine.waitFinal(endpointId, jobId, wait) : await engine.record(endpointId, jobId);
  if (row) row = await engine.setTtl(endpointId, jobId, ttl);
  if (!row) throw noJob(call);
  return sendRecord(ctx, res, row, Date.now());
}

export const jobRoutes = {
  run: (call: JobCall) => submit(call, false),
  runsync: (call: JobCall) => submit(call, true),
  status: (call: JobCall) => status(call, false),
  statusSync: (call: JobCall) => status(call, true),

  async stream(call: JobCall): Promise<void> {
    const result = await call.ctx.engine.readStream(queueEndpoint(call).id, call.params.job!);
    if (!result) throw noJob(call);
    const pieces: string[] = [`{"status":"${result.status}","stream":[`];
    result.chunks.forEach((chunk, i) => (i === 0 ? pieces.push(chunk) : pieces.push(",", chunk)));
    pieces.push("]}");
    return sendPieces(call.res, pieces, call.ctx.clients.limits.sendStallMs);
  },

  async cancel(call: JobCall): Promise<void> {
    const row = await call.ctx.engine.cancel(queueEndpoint(call).id, call.params.job!);
    if (!row) throw noJob(call);
    sendJson(call.res, { id: row.id, status: row.status });
  },

  async retry(call: JobCall): Promise<void> {
    const row = await call.ctx.engine.retry(queueEndpoint(call).id, call.params.job!);
    if (!row) throw noJob(call);
    // Back in the queue, as /run answers: a waiting worker may already hold it by the time this is sent.
    sendJson(call.res, { id: row.id, status: "IN_QUEUE" });
  },

  async purgeQueue(call: JobCall): Promise<void> {
    const removed = await call.ctx.engine.purge(queueEndpoint(call).id);
    sendJson(call.res, { removed, status: "completed" });
  },

  /** Any endpoint's health (a load-balanced one's requests and cold starts come from its proxy). */
  health(call: JobCall): void {
    sendText(call.res, healthJson(call.ctx, userEndpoint(call.ctx, call.principal, call.params.endpoint!)));
  },
};

/**
 * The worker counts the job API's official clients type beside svc's own: `ready` (started and able to take a job:
 * idle or running) and `throttled` (workers the queue calls for beyond workersMax: `wanted`, the endpoint's policy
 * with no maximum; absent, one worker per maxConcurrency jobs queued or running). Pure.
 */
export function jobClientWorkerCounts(
  health: { jobs: { inQueue: number; inProgress: number }; workers: { idle: number; running: number } },
  resource: { workersMax: number; maxConcurrency: number },
  wanted = Math.ceil((health.jobs.inQueue + health.jobs.inProgress) / Math.max(1, resource.maxConcurrency)),
): { ready: number; throttled: number } {
  return { ready: health.workers.idle + health.workers.running, throttled: Math.max(0, wanted - resource.workersMax) };
}

/** Jobs waiting looked at to count the workers a queue endpoint's policy calls for (/health's `throttled`). */
const THROTTLED_QUEUE_LIMIT = 10_000;

/** The workers a queue endpoint's scaling policy calls for now, as if it had no workersMax. */
function policyWanted(ctx: JobDeps, endpoint: EndpointRow, health: ReturnType<JobEngine["health"]>): number {
  const r = endpoint.resource;
  const w = health.workers;
  return desiredWorkers({
    policy: r.scaler ?? defaultPolicy(r.maxConcurrency),
    workersMin: r.workersMin,
    workersMax: Number.MAX_SAFE_INTEGER,
    maxConcurrency: r.maxConcurrency,
    queue: ctx.engine.waiting(endpoint.id, THROTTLED_QUEUE_LIMIT),
    inProgress: health.jobs.inProgress,
    workers: { live: w.idle + w.running + w.initializing, starting: w.initializing },
    now: Date.now(),
  });
}
