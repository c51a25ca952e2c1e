// Where usage lives: hourly rows beside the jobs (the SQLite file, or the PostgreSQL database every replica
// shares). Writes add to a row (several replicas may account the same hour), so they never overwrite each other.

import type { Queryable } from "../store/queryable.js";
import { openDatabase } from "../store/driver.js";

export interface UsageRow {
  userId: string;
  endpointId: string;
  /** Epoch ms of the hour's start. */
  hour: number;
  /** The GPU type id its workers held ('' for none). */
  gpuType: string;
  workerSeconds: number;
  gpuSeconds: number;
  jobs: number;
  /** A load-balanced endpoint's requests answered. */
  requests: number;
}

export interface UsageStore {
  /** Add each row's amounts to the stored row of its key (one transaction). */
  add(rows: UsageRow[]): Promise<void>;
  /** A user's rows (every user's when `userId` is undefined) of the hours in [from, to), oldest first. */
  read(q: { userId?: string; from: number; to: number }): Promise<UsageRow[]>;
  close(): void;
}

const rowOf = (r: Record<string, unknown>): UsageRow => ({
  userId: r.user_id as string,
  endpointId: r.endpoint_id as string,
  hour: Number(r.hour),
  gpuType: r.gpu_type as string,
  workerSeconds: Number(r.worker_seconds),
  gpuSeconds: Number(r.gpu_seconds),
  jobs: Number(r.jobs),
  requests: Number(r.requests),
});

const ADD = `INSERT INTO usage_hours (user_id, endpoint_id, hour, gpu_type, worker_seconds, gpu_seconds, jobs, requests)`;
const ON_CONFLICT = `ON CONFLICT (user_id, hour, endpoint_id, gpu_type) DO UPDATE SET
  worker_seconds = usage_hours.worker_seconds + excluded.worker_seconds,
  gpu_seconds = usage_hours.gpu_seconds + excluded.gpu_seconds,
  jobs = usage_hours.jobs + excluded.jobs,
  requests = usage_hours.requests + excluded.requests`;

export function openSqliteUsageStore(file: string): UsageStore {
  const db = openDatabase(file);
  db.pragma("busy_timeout = 5000");
  const insert = db.prepare(`${ADD} VALUES (@userId, @endpointId, @hour, @gpuType, @workerSeconds, @gpuSeconds, @jobs, @requests) ${ON_CONFLICT}`);
  const addAll = db.transaction((rows: UsageRow[]) => {
    for (const row of rows) insert.run(row);
  });
  const readUser = db.prepare("SELECT * FROM usage_hours WHERE user_id = ? AND hour >= ? AND hour < ? ORDER BY hour, endpoint_id, gpu_type");
  const readAll = db.prepare("SELECT * FROM usage_hours WHERE hour >= ? AND hour < ? ORDER BY hour, user_id, endpoint_id, gpu_type");
  return {
    add: async (rows) => addAll(rows),
    read: async ({ userId, from, to }) =>
      (userId === undefined ? readAll.all(from, to) : readUser.all(userId, from, to)).map((r) => rowOf(r as Record<string, unknown>)),
    close: () => db.close(),
  };
}

export function openPostgresUsageStore(pool: Queryable): UsageStore {
  return {
    async add(rows) {
      if (rows.length === 0) return;
      // One statement: the rows as parallel arrays (a transaction of its own).
      await pool.query(
        `${ADD} SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::float8[], $6::float8[], $7::bigint[], $8::bigint[]) ${ON_CONFLICT}`,
        [
          rows.map((r) => r.userId),
          rows.map((r) => r.endpointId),
          rows.map((r) => r.hour),
          rows.map((r) => r.gpuType),
          rows.map((r) => r.workerSeconds),
          rows.map((r) => r.gpuSeconds),
          rows.map((r) => r.jobs),
          rows.map((r) => r.requests),
        ],
      );
    },
    async read({ userId, from, to }) {
      const { rows } =
        userId === undefined
          ? await pool.query("SELECT * FROM usage_hours WHERE hour >= $1 AND hour < $2 ORDER BY hour, user_id, endpoint_id, gpu_type", [from, to])
          : await pool.query("SELECT * FROM usage_hours WHERE user_id = $1 AND hour >= $2 AND hour < $3 ORDER BY hour, endpoint_id, gpu_type", [
              userId,
              from,
              to,
            ]);
      return rows.map(rowOf);
    },
    close() {
      // The pool belongs to the main store, which closes it.
    },
  };
}
