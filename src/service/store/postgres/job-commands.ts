// The conditional job commands on PostgreSQL (`JobCommands`), which let several replicas share one database:
// claims under leases with SKIP LOCKED, completion only under the current lease, lease extension and expiry, and
// cancellation, all by the database's clock (svc_now_ms).

import { JOB_COLUMNS, rowToJob } from "../rows.js";
import type { Queryable } from "../queryable.js";
import type { JobCommands, JobRow } from "../types.js";
import { queryOn } from "./connection.js";

/** The job commands over `db`; `getJob` reads a job that a cancellation left as it was. */
export function jobCommands(db: Queryable, getJob: (id: string) => Promise<JobRow | undefined>): JobCommands {
  const query = <R extends Record<string, unknown> = Record<string, unknown>>(text: string, values?: unknown[]) => queryOn<R>(db, text, values);
  return {
    async claim({ endpointId, workerId, max, leaseMs }) {
      const { rows } = await query(
        `WITH picked AS (
           SELECT id FROM jobs WHERE endpoint_id = $1 AND status = 'IN_QUEUE' AND (not_before IS NULL OR not_before <= svc_now_ms())
           ORDER BY low_priority, seq LIMIT $2 FOR UPDATE SKIP LOCKED)
         UPDATE jobs j SET status = 'IN_PROGRESS', lease = gen_random_uuid()::text, worker_id = $3,
           attempt = j.attempt + 1, started_at = svc_now_ms(), lease_expires_at = svc_now_ms() + $4
         FROM picked WHERE j.id = picked.id
         RETURNING j.*`,
        [endpointId, max, workerId, leaseMs],
      );
      rows.sort((a, b) => Number(a.low_priority) - Number(b.low_priority) || (a.seq as number) - (b.seq as number));
      return rows.map((r) => ({ ...rowToJob(r), leaseExpiresAt: r.lease_expires_at as number }));
    },
    async completeIfLeased(jobId, lease, set) {
      const keys = Object.keys(set).filter((k) => k in JOB_COLUMNS && k !== "id" && k !== "lease") as Array<keyof JobRow>;
      const values: unknown[] = [jobId, lease];
      const sets = keys.map((k) => `${JOB_COLUMNS[k]} = $${values.push((set as Record<string, unknown>)[k] ?? null)}`);
      sets.push("lease = NULL", "lease_expires_at = NULL");
      const { rowCount } = await query(`UPDATE jobs SET ${sets.join(", ")} WHERE id = $1 AND lease = $2 AND status = 'IN_PROGRESS'`, values);
      return rowCount === 1;
    },
    async extendLeases(leases, leaseMs) {
      if (leases.length === 0) return { extended: [], lost: [] };
      const { rows } = await query<{ lease: string }>(
        `UPDATE jobs SET lease_expires_at = svc_now_ms() + $2
         WHERE lease = ANY($1::text[]) AND status = 'IN_PROGRESS' RETURNING lease`,
        [leases, leaseMs],
      );
      const extended = new Set(rows.map((r) => r.lease));
      return { extended: leases.filter((l) => extended.has(l)), lost: leases.filter((l) => !extended.has(l)) };
    },
    async requeueExpired(limit) {
      const { rows } = await query(
        `WITH expired AS (
           SELECT id FROM jobs WHERE status = 'IN_PROGRESS' AND lease_expires_at < svc_now_ms()
           ORDER BY lease_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         UPDATE jobs j SET status = 'IN_QUEUE', lease = NULL, worker_id = NULL, lease_expires_at = NULL
         FROM expired WHERE j.id = expired.id RETURNING j.*`,
        [limit],
      );
      return rows.map(rowToJob);
    },
    async releaseLease(jobId, lease) {
      const { rowCount } = await query(
        `UPDATE jobs SET status = 'IN_QUEUE', lease = NULL, worker_id = NULL, lease_expires_at = NULL
         WHERE id = $1 AND lease = $2 AND status = 'IN_PROGRESS'`,
        [jobId, lease],
      );
      return rowCount === 1;
    },
    async cancelJob(jobId, at) {
      const { rows } = await query(
        `UPDATE jobs SET status = 'CANCELLED', completed_at = $2, expires_at = $2 + ttl_ms, lease = NULL, lease_expires_at = NULL
         WHERE id = $1 AND status IN ('IN_QUEUE', 'IN_PROGRESS') RETURNING *`,
        [jobId, at],
      );
      if (rows[0]) return rowToJob(rows[0]);
      return getJob(jobId);
    },
    async now() {
      const { rows } = await query<{ now: number }>("SELECT svc_now_ms() AS now");
      return rows[0]!.now;
    },
  };
}
