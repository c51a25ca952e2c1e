// The store's reads of endpoints' log lines and their retention on PostgreSQL: lines in seq order, the dropped-
// line notices, and the counting and pruning of an endpoint's oldest lines a bounded part at a time.

import { rowToLog } from "../rows.js";
import type { Queryable } from "../queryable.js";
import { DROPPED_LOG_STREAM, type Store } from "../types.js";
import { queryOn } from "./connection.js";

/**
 * Log retention reads an endpoint's lines from its oldest, a bounded part at a time, through logs_endpoint in seq
 * order, and stops. Planned without statistics (a table just filled) PostgreSQL estimated a handful of rows and read
 * all of the endpoint's lines through a bitmap scan to sort them (200,000 lines read for a part of 5,000): in these
 * transactions only ordered index scans are allowed.
 */
const ORDERED_INDEX_SCANS_ONLY = "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)";
/** Beyond every seq: the end of a range with no upper bound. */
const PG_MAX_BIGINT = "9223372036854775807";

/** The log methods of the store over `db`, with `transaction` for the retention's statements. */
export function logStatements(
  db: Queryable,
  transaction: <T>(body: (client: Queryable) => Promise<T>) => Promise<T>,
): Required<Pick<Store, "logs" | "droppedLogNotices" | "logBytes" | "pruneLogs">> {
  const query = <R extends Record<string, unknown> = Record<string, unknown>>(text: string, values?: unknown[]) => queryOn<R>(db, text, values);
  return {
    async logs(q) {
      const where = ["endpoint_id = $1"];
      const values: unknown[] = [q.endpointId];
      if (q.jobId) where.push(`job_id = $${values.push(q.jobId)}`);
      if (q.since !== undefined) where.push(`ts >= $${values.push(q.since)}`);
      if (q.afterId !== undefined) where.push(`seq > $${values.push(q.afterId)}`);
      const limit = `$${values.push(q.limit)}`;
      const { rows } = await query(`SELECT * FROM logs WHERE ${where.join(" AND ")} ORDER BY seq LIMIT ${limit}`, values);
      return rows.map(rowToLog);
    },
    async droppedLogNotices(q) {
      // The stream is written into the statement: only then may the planner use the partial index logs_dropped.
      const where = ["endpoint_id = $1", `stream = '${DROPPED_LOG_STREAM}'`];
      const values: unknown[] = [q.endpointId];
      if (q.jobId) where.push(`job_id = $${values.push(q.jobId)}`);
      if (q.since !== undefined) where.push(`ts >= $${values.push(q.since)}`);
      const limit = `$${values.push(q.limit)}`;
      const { rows } = await query<{ text: string }>(`SELECT text FROM logs WHERE ${where.join(" AND ")} ORDER BY seq LIMIT ${limit}`, values);
      return rows.map((r) => r.text);
    },
    async logBytes(q) {
      return transaction(async (client) => {
        await queryOn(client, ORDERED_INDEX_SCANS_ONLY);
        const { rows } = await queryOn<{ bytes: string; lines: number; last_seq: string | null }>(
          client,
          `SELECT COALESCE(SUM(octet_length(text) + $2), 0) AS bytes, count(*)::int AS lines, max(seq) AS last_seq
           FROM (SELECT seq, text FROM logs WHERE endpoint_id = $1 AND seq > $3 ORDER BY seq LIMIT $4) part`,
          [q.endpointId, q.lineOverheadBytes, q.afterSeq, q.limit],
        );
        const r = rows[0]!;
        return { bytes: Number(r.bytes), lines: r.lines, lastSeq: r.last_seq === null ? null : Number(r.last_seq) };
      });
    },
    async pruneLogs(q) {
      return transaction(async (client) => {
        await queryOn(client, ORDERED_INDEX_SCANS_ONLY);
        const run = (text: string, values: unknown[]) =>
          queryOn<{ n: number; bytes: string }>(client, text, values).then((r) => ({ n: r.rows[0]!.n, bytes: Number(r.rows[0]!.bytes) }));
        // A data-modifying CTE runs to completion whether or not the query reads it.
        const aged = await run(
          `WITH recent AS (SELECT seq FROM (SELECT seq, ts FROM logs WHERE endpoint_id = $1 ORDER BY seq LIMIT $4) oldest WHERE ts >= $2 ORDER BY seq LIMIT 1),
             range AS (SELECT seq, octet_length(text) + $3 AS size FROM logs
                       WHERE endpoint_id = $1 AND seq < COALESCE((SELECT seq FROM recent), ${PG_MAX_BIGINT}) ORDER BY seq LIMIT $4),
             gone AS (DELETE FROM logs WHERE endpoint_id = $1 AND seq <= (SELECT max(seq) FROM range))
           SELECT count(*)::int AS n, COALESCE(sum(size), 0) AS bytes FROM range`,
          [q.endpointId, q.before, q.lineOverheadBytes, q.limit],
        );
        const left = q.limit - aged.n;
        if (q.dropBytes <= aged.bytes || left <= 0) return { removedByAge: aged.n, removedBySize: 0, removedBytes: aged.bytes };
        // The oldest lines whose running size reaches what is still to drop (or `left` lines); the window is read
        // oldest first and stops there.
        const sized = await run(
          `WITH running AS (SELECT seq, sum(octet_length(text) + $2) OVER w AS total, row_number() OVER w AS rn
                            FROM logs WHERE endpoint_id = $1 WINDOW w AS (ORDER BY seq ROWS UNBOUNDED PRECEDING)),
             boundary AS (SELECT seq, total, rn FROM running WHERE total >= $3 OR rn >= $4 LIMIT 1),
             last AS (SELECT COALESCE((SELECT seq FROM boundary), (SELECT max(seq) FROM logs WHERE endpoint_id = $1)) AS seq),
             gone AS (DELETE FROM logs WHERE endpoint_id = $1 AND seq <= (SELECT seq FROM last) RETURNING octet_length(text) + $2 AS size)
           SELECT count(*)::int AS n, COALESCE(sum(size), 0) AS bytes FROM gone`,
          [q.endpointId, q.lineOverheadBytes, q.dropBytes - aged.bytes, left],
        );
        return { removedByAge: aged.n, removedBySize: sized.n, removedBytes: aged.bytes + sized.bytes };
      });
    },
  };
}
