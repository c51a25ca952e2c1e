// `GET /v2/{endpoint_id}/jobs?limit=n&status=A,B&since=t`: the endpoint's recent jobs, newest first, as job
// records (with the input when small; without output or error stack: `/status/{id}` has those), then the job
// history: jobs whose results expired, kept as records (status, times, attempts, error, worker) for the operator's
// history retention. `GET /v2/{endpoint_id}/jobs/{job_id}`: one of them, live or history.
// Same access as the job API: a key of the owner with admin, jobs:* or jobs:<endpoint_id>.

import type { JobCall } from "./routes.js";
import { canUseJobs } from "../keys/auth.js";
import { INPUT_IN_STORE, isFinal } from "../engine/index.js";
import { intParam, sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import type { JobHistoryRow, JobListFilter, JobRow } from "../store/types.js";

export const JOBS_LIST_DEFAULT = 50;
export const JOBS_LIST_MAX = 500;
export const INPUT_SHOWN_MAX = 64 * 1024;

export interface JobSummary {
  id: string;
  status: JobRow["status"];
  createdAt: number;
  delayTime: number;
  executionTime: number;
  function: string | null;
  /** The submitted input, when its JSON is at most INPUT_SHOWN_MAX characters; else inputOmitted. */
  input?: unknown;
  inputOmitted?: true;
  error?: string;
  retries?: number;
  /** When a worker first took it and when it ended (null: not yet); the worker of its latest attempt. */
  startedAt: number | null;
  completedAt: number | null;
  workerId: string | null;
  attempts: number;
  /**
   * The job's result (input, output, stream) expired: this is its history record, kept until `keptUntil`; the job
   * API's `/status` answers 404 for it, as for any expired job.
   */
  resultExpired?: true;
  resultExpiredAt?: number;
  keptUntil?: number;
}

/** A history record as a line of the list. Pure. */
export function historySummary(row: JobHistoryRow): JobSummary {
  const summary: JobSummary = {
    id: row.id,
    status: row.status,
    createdAt: row.createdAt,
    delayTime: Math.max(0, Math.round((row.startedAt ?? row.completedAt ?? row.createdAt) - row.createdAt)),
    executionTime: row.startedAt === null ? 0 : Math.max(0, Math.round((row.completedAt ?? row.startedAt) - row.startedAt)),
    function: row.function,
    startedAt: row.startedAt,
    completedAt: row.completedAt,
    workerId: row.workerId,
    attempts: row.attempt,
    resultExpired: true,
    resultExpiredAt: row.resultExpiredAt,
    keptUntil: row.keptUntil,
  };
  if (row.error !== null) summary.error = row.error;
  if (row.retried > 0) summary.retries = row.retried;
  return summary;
}

const STATUSES = new Set(["IN_QUEUE", "IN_PROGRESS", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"]);

/** The list's filter from its query: `status` (comma-separated) and `since` (epoch ms or ISO). Pure. */
export function listFilter(query: URLSearchParams): JobListFilter {
  const filter: JobListFilter = {};
  const status = query.get("status");
  if (status) {
    const statuses = status.split(",").map((s) => s.trim().toUpperCase());
    const unknown = statuses.filter((s) => !STATUSES.has(s));
    if (unknown.length > 0) {
      throw new HttpProblem(400, `status must be one or more of ${[...STATUSES].join(", ")}, comma-separated`, {
        errors: unknown.map((s) => `status: ${s} is not a job status`),
      });
    }
    filter.statuses = statuses;
  }
  const since = query.get("since");
  if (since) {
    const t = /^\d+$/.test(since) ? Number(since) : Date.parse(since);
    if (!Number.isFinite(t)) throw new HttpProblem(400, "since must be a time (ISO 8601 or epoch milliseconds)", { errors: ["since: must be a time"] });
    filter.since = t;
  }
  return filter;
}

const matches = (row: JobRow, filter: JobListFilter) =>
  (!filter.statuses || filter.statuses.includes(row.status)) && (filter.since === undefined || row.createdAt >= filter.since);

/** One line of the list: the times are computed as the job record computes them. Pure. */
export function jobSummary(row: JobRow, now: number): JobSummary {
  const delayTime = Math.max(0, Math.round((row.startedAt ?? (isFinal(row.status) ? (row.completedAt ?? now) : now)) - row.createdAt));
  const executionTime = row.startedAt === null ? 0 : Math.max(0, Math.round((row.completedAt ?? now) - row.startedAt));
  const summary: JobSummary = {
    id: row.id,
    status: row.status,
    createdAt: row.createdAt,
    delayTime,
    executionTime,
    function: row.function,
    startedAt: row.startedAt,
    completedAt: row.completedAt,
    workerId: row.workerId,
    attempts: row.attempt,
  };
  // A queued job's large input is in the store only (engine/queue.ts): omitted, as any large input is.
  if (row.input !== INPUT_IN_STORE && row.input.length <= INPUT_SHOWN_MAX) summary.input = JSON.parse(row.input);
  else summary.inputOmitted = true;
  if (row.error !== null) summary.error = row.error;
  if (row.retried > 0) summary.retries = row.retried;
  return summary;
}

/** The endpoint of a list or record request, when the key may read its jobs. */
function endpointOf(call: JobCall): string {
  const { ctx, principal } = call;
  const endpointId = call.params.endpoint!;
  const endpoint = ctx.endpoints.get(endpointId);
  // Another user's endpoint is "not found", as in the job API.
  if (!endpoint || endpoint.userId !== principal.userId) throw new HttpProblem(404, `No endpoint ${endpointId}`);
  if (!canUseJobs(principal, endpointId)) throw new HttpProblem(403, `This API key has no access to endpoint ${endpointId}`);
  return endpointId;
}

/** GET /v2/{endpoint_id}/jobs, user keys only (the route table says so). */
export async function jobsList(call: JobCall): Promise<void> {
  const { ctx, res, url } = call;
  const endpointId = endpointOf(call);
  const limit = intParam(url, "limit", 1, JOBS_LIST_MAX) ?? JOBS_LIST_DEFAULT;
  const filter = listFilter(url.searchParams);
  const filtered = filter.statuses !== undefined || filter.since !== undefined;
  const ids = (await ctx.store.recentJobIds?.(endpointId, limit, filtered ? filter : undefined)) ?? [];
  const now = Date.now();
  const jobs: JobSummary[] = [];
  const listed = new Set<string>();
  // The engine's record is the live one (the stored row may lag a batch behind); expired jobs drop out.
  for (const id of ids) {
    // Without the output (a summary has none): large outputs are not read for a list.
    const row = (await ctx.engine.recordHead(endpointId, id))?.row;
    if (row && matches(row, filter)) {
      jobs.push(jobSummary(row, now));
      listed.add(id);
    }
  }
  // /runsync jobs still running are not in the store yet (they are written when they end): listed from memory.
  for (const row of ctx.engine.unwrittenJobs(endpointId)) {
    if (matches(row, filter) && !listed.has(row.id)) {
      jobs.push(jobSummary(row, now));
      listed.add(row.id);
    }
  }
  // Then the history: jobs whose results expired (a job being swept may be in both for a moment: the live one wins).
  for (const row of (await ctx.store.jobHistory?.(endpointId, limit, filter)) ?? []) {
    if (!listed.has(row.id)) jobs.push(historySummary(row));
  }
  jobs.sort((a, b) => b.createdAt - a.createdAt);
  jobs.length = Math.min(jobs.length, limit);
  sendJson(res, { jobs });
}

/** GET /v2/{endpoint_id}/jobs/{job_id}: the job's record, live, or from the history once its result expired. */
export async function jobRecord(call: JobCall): Promise<void> {
  const { ctx, res } = call;
  const endpointId = endpointOf(call);
  const jobId = call.params.job!;
  const live = (await ctx.engine.recordHead(endpointId, jobId))?.row ?? ctx.engine.unwrittenJobs(endpointId).find((row) => row.id === jobId);
  if (live) return sendJson(res, jobSummary(live, Date.now()));
  const kept = await ctx.store.historyJob?.(endpointId, jobId);
  if (kept) return sendJson(res, historySummary(kept));
  throw new HttpProblem(404, `No job ${jobId} on endpoint ${endpointId}: neither its result nor its history record is kept any more (or it never was)`);
}
