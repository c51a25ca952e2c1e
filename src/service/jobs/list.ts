// `GET /v2/{endpoint_id}/jobs?limit=n`: the endpoint's recent jobs, newest first, as job records
// (with the input when small; without output or error stack: `/status/{id}` has those).
// Same access as the job API: a key of the owner with admin, jobs:* or jobs:<endpoint_id>.

import type { JobCall } from "./routes.js";
import { canUseJobs } from "../keys/auth.js";
import { INPUT_IN_STORE, isFinal } from "../engine/index.js";
import { intParam, sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import type { JobRow } from "../store/types.js";

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
}

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

/** GET /v2/{endpoint_id}/jobs, user keys only (the route table says so). */
export async function jobsList(call: JobCall): Promise<void> {
  const { ctx, principal, res, url } = call;
  const endpointId = call.params.endpoint!;
  const endpoint = ctx.endpoints.get(endpointId);
  // Another user's endpoint is "not found", as in the job API.
  if (!endpoint || endpoint.userId !== principal.userId) throw new HttpProblem(404, `No endpoint ${endpointId}`);
  if (!canUseJobs(principal, endpointId)) throw new HttpProblem(403, `This API key has no access to endpoint ${endpointId}`);
  const limit = intParam(url, "limit", 1, JOBS_LIST_MAX) ?? JOBS_LIST_DEFAULT;
  const ids = (await ctx.store.recentJobIds?.(endpointId, limit)) ?? [];
  const now = Date.now();
  const jobs: JobSummary[] = [];
  // The engine's record is the live one (the stored row may lag a batch behind); expired jobs drop out.
  for (const id of ids) {
    // Without the output (a summary has none): large outputs are not read for a list.
    const row = (await ctx.engine.recordHead(endpointId, id))?.row;
    if (row) jobs.push(jobSummary(row, now));
  }
  // /runsync jobs still running are not in the store yet (they are written when they end): listed from memory.
  const unwritten = ctx.engine.unwrittenJobs(endpointId);
  if (unwritten.length > 0) {
    for (const row of unwritten) jobs.push(jobSummary(row, now));
    jobs.sort((a, b) => b.createdAt - a.createdAt);
    jobs.length = Math.min(jobs.length, limit);
  }
  sendJson(res, { jobs });
}
