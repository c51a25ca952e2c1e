// The job history's SQL, for both stores: a job's record copied from `jobs` into `job_history` when its result's
// retention runs out (just before the job is deleted), read back by the job list and the console, and deleted when
// the operator's history retention runs out. Placeholders are `$n` (PostgreSQL); SQLite takes the same text through
// sqliteStatement.

import type { JobHistoryRow, JobListFilter } from "./types.js";

/** The columns a history record keeps of its job: no input, output, stream or lease. */
const KEPT = "id, endpoint_id, status, function, sync, created_at, started_at, completed_at, error, error_type, attempt, retried, worker_id";

/**
 * Copy the jobs' records (`idMatch` on $1), unless one is in the history already (a sweep repeated after a crash
 * between its copy and its delete keeps the first), with when their results expired ($2) and until when they are
 * kept ($3).
 */
const archive = (idMatch: string) => `INSERT INTO job_history (${KEPT}, result_expired_at, kept_until)
  SELECT ${KEPT}, $2, $3 FROM jobs WHERE ${idMatch}
  ON CONFLICT (id) DO NOTHING`;
/** One job (SQLite, a statement a job in one transaction). */
export const ARCHIVE_JOB = archive("id = $1");
/** Every job of an array (PostgreSQL, one statement). */
export const ARCHIVE_JOBS = archive("id = ANY($1::text[])");

export const HISTORY_JOB = "SELECT * FROM job_history WHERE endpoint_id = $1 AND id = $2";

/** The text of a list query of `table` (jobs: ids; job_history: records), newest first, with the filter's terms. Pure. */
export function listQuery(table: "jobs" | "job_history", endpointId: string, limit: number, filter: JobListFilter = {}): { text: string; values: unknown[] } {
  const values: unknown[] = [endpointId];
  const where = ["endpoint_id = $1"];
  if (filter.statuses && filter.statuses.length > 0) {
    where.push(`status IN (${filter.statuses.map((s) => `$${values.push(s)}`).join(", ")})`);
  }
  if (filter.since !== undefined) where.push(`created_at >= $${values.push(filter.since)}`);
  // jobs: seq orders by submission; the history has no seq, its created_at does.
  const order = table === "jobs" ? "seq DESC" : "created_at DESC, id DESC";
  const columns = table === "jobs" ? "id" : "*";
  return { text: `SELECT ${columns} FROM ${table} WHERE ${where.join(" AND ")} ORDER BY ${order} LIMIT $${values.push(limit)}`, values };
}

export const SWEEP_HISTORY = "DELETE FROM job_history WHERE id IN (SELECT id FROM job_history WHERE kept_until <= $1 LIMIT $2)";

/**
 * A `$n` statement as better-sqlite3 takes it: anonymous `?` placeholders, the values in the order they appear.
 * Pure.
 */
export function sqliteStatement(text: string, values: readonly unknown[]): { text: string; values: unknown[] } {
  const ordered: unknown[] = [];
  const converted = text.replace(/\$(\d+)/g, (_, n: string) => {
    const v = values[Number(n) - 1];
    // better-sqlite3 binds booleans as nothing: SQLite's 1 and 0.
    ordered.push(typeof v === "boolean" ? (v ? 1 : 0) : v);
    return "?";
  });
  return { text: converted, values: ordered };
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** A stored history record (either store's row). Pure. */
export function rowToHistory(r: Record<string, unknown>): JobHistoryRow {
  return {
    id: r.id as string,
    endpointId: r.endpoint_id as string,
    status: r.status as JobHistoryRow["status"],
    function: (r.function as string | null) ?? null,
    sync: r.sync === 1 || r.sync === true,
    createdAt: Number(r.created_at),
    startedAt: num(r.started_at),
    completedAt: num(r.completed_at),
    error: (r.error as string | null) ?? null,
    errorType: (r.error_type as string | null) ?? null,
    attempt: Number(r.attempt),
    retried: Number(r.retried),
    workerId: (r.worker_id as string | null) ?? null,
    resultExpiredAt: Number(r.result_expired_at),
    keptUntil: Number(r.kept_until),
  };
}
