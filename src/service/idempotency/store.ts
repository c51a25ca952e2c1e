// Where idempotency keys are kept: one row per (user, endpoint, key) naming the job the first request made. The
// table lives beside the jobs (the SQLite file, or the PostgreSQL database every replica shares), so that two
// replicas racing on one key meet at its primary key, and a key outlives a crash of the process that wrote it.

import type { Queryable } from "../store/queryable.js";
import { openDatabase } from "../store/driver.js";

export interface IdempotencyRow {
  userId: string;
  endpointId: string;
  key: string;
  /** sha256 of the request as validated: a repeat with another body is refused. */
  requestHash: string;
  /** The job the first request made (or is making). */
  jobId: string;
  createdAt: number;
}

export interface IdempotencyStore {
  /** Insert `row` unless its key is taken; either way the row now current (`row` itself, or the earlier one). */
  claim(row: IdempotencyRow): Promise<IdempotencyRow>;
  /** Point a key at `row`'s job if it still points at `fromJobId`; false when another request moved it first. */
  takeOver(row: IdempotencyRow, fromJobId: string): Promise<boolean>;
  /** Forget keys made before `before` whose job is gone (its result expired): how many went. */
  sweep(before: number): Promise<number>;
  close(): void;
}

const rowOf = (r: Record<string, unknown>): IdempotencyRow => ({
  userId: r.user_id as string,
  endpointId: r.endpoint_id as string,
  key: r.key as string,
  requestHash: r.request_hash as string,
  jobId: r.job_id as string,
  createdAt: Number(r.created_at),
});

export function openSqliteIdempotencyStore(file: string): IdempotencyStore {
  const db = openDatabase(file);
  db.pragma("busy_timeout = 5000");
  const insert = db.prepare(
    `INSERT INTO idempotency_keys (user_id, endpoint_id, key, request_hash, job_id, created_at)
     VALUES (@userId, @endpointId, @key, @requestHash, @jobId, @createdAt) ON CONFLICT DO NOTHING`,
  );
  const read = db.prepare("SELECT * FROM idempotency_keys WHERE user_id = ? AND endpoint_id = ? AND key = ?");
  const move = db.prepare(
    `UPDATE idempotency_keys SET request_hash = @requestHash, job_id = @jobId, created_at = @createdAt
     WHERE user_id = @userId AND endpoint_id = @endpointId AND key = @key AND job_id = @fromJobId`,
  );
  const sweep = db.prepare("DELETE FROM idempotency_keys WHERE created_at < ? AND job_id NOT IN (SELECT id FROM jobs)");
  const claim = db.transaction((row: IdempotencyRow) => {
    insert.run(row);
    return rowOf(read.get(row.userId, row.endpointId, row.key) as Record<string, unknown>);
  });
  return {
    claim: async (row) => claim(row),
    takeOver: async (row, fromJobId) => move.run({ ...row, fromJobId }).changes === 1,
    sweep: async (before) => sweep.run(before).changes,
    close: () => db.close(),
  };
}

export function openPostgresIdempotencyStore(pool: Queryable): IdempotencyStore {
  return {
    async claim(row) {
      // One statement: the insert, or the row that beat it (a conflicting insert returns nothing, so read it).
      const { rows } = await pool.query(
        `WITH inserted AS (
           INSERT INTO idempotency_keys (user_id, endpoint_id, key, request_hash, job_id, created_at)
           VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING *)
         SELECT * FROM inserted
         UNION ALL
         SELECT * FROM idempotency_keys WHERE user_id = $1 AND endpoint_id = $2 AND key = $3 AND NOT EXISTS (SELECT 1 FROM inserted)`,
        [row.userId, row.endpointId, row.key, row.requestHash, row.jobId, row.createdAt],
      );
      // The earlier row, committed by a transaction this statement's snapshot did not see: read it again.
      if (rows.length === 0) {
        const again = await pool.query("SELECT * FROM idempotency_keys WHERE user_id = $1 AND endpoint_id = $2 AND key = $3", [
          row.userId,
          row.endpointId,
          row.key,
        ]);
        if (again.rows.length === 0) return this.claim(row);
        return rowOf(again.rows[0]);
      }
      return rowOf(rows[0]);
    },
    async takeOver(row, fromJobId) {
      const { rowCount } = await pool.query(
        `UPDATE idempotency_keys SET request_hash = $4, job_id = $5, created_at = $6
         WHERE user_id = $1 AND endpoint_id = $2 AND key = $3 AND job_id = $7`,
        [row.userId, row.endpointId, row.key, row.requestHash, row.jobId, row.createdAt, fromJobId],
      );
      return rowCount === 1;
    },
    async sweep(before) {
      const { rowCount } = await pool.query(
        "DELETE FROM idempotency_keys k WHERE k.created_at < $1 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = k.job_id)",
        [before],
      );
      return rowCount ?? 0;
    },
    close() {
      // The pool belongs to the main store, which closes it.
    },
  };
}
