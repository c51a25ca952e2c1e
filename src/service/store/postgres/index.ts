// The server-grade store: PostgreSQL through node-postgres (`svc server --store postgres://...`). It implements
// the same `Store` as the embedded SQLite file, and the conditional job commands (`JobCommands`) that let
// several replicas share one database.
//
// A batch of the engine's writes is one transaction. Round trips, not rows, are what a batch costs on a
// network: consecutive inserts and updates are sent as one statement each over `unnest` arrays (a tick's 200
// submissions are one INSERT, not 200), with the job ops folded first as the SQLite store folds them.

import pg from "pg";
import { foldJobOps } from "../sqlite.js";
import {
  JOB_COLUMNS,
  JOB_KEYS,
  rowToApp,
  rowToBuild,
  rowToEndpoint,
  rowToEnvironment,
  rowToJob,
  rowToKey,
  rowToLog,
  rowToWebhook,
  rowToWebhookDelivery,
  rowToWebhookSettings,
} from "../rows.js";
import { DROPPED_LOG_STREAM, type EndpointRow, type JobCommands, type JobRow, type LogRow, type Store, type StoreOp, type StreamChunkRow } from "../types.js";
import type { DeployStoreOp, ReleaseRow } from "../deploy-rows.js";
import { migrate } from "./migrate.js";
import { ARCHIVE_JOBS, HISTORY_JOB, listQuery, rowToHistory, SWEEP_HISTORY } from "../job-history.js";
import type { Queryable } from "../queryable.js";

export type { Queryable };

/** PostgreSQL's type of each job column in `unnest` arrays. */
const JOB_PG_TYPES: Record<keyof JobRow, string> = {
  id: "text",
  endpointId: "text",
  status: "text",
  input: "text",
  function: "text",
  webhook: "text",
  sync: "boolean",
  lowPriority: "boolean",
  createdAt: "bigint",
  startedAt: "bigint",
  completedAt: "bigint",
  output: "text",
  error: "text",
  errorType: "text",
  errorStack: "text",
  attempt: "integer",
  retried: "integer",
  executionTimeoutMs: "bigint",
  ttlMs: "bigint",
  expiresAt: "bigint",
  lease: "text",
  workerId: "text",
  streamCursor: "bigint",
  maxRetries: "integer",
  webhookEvents: "text",
  progress: "text",
  notBefore: "bigint",
  deadlineAt: "bigint",
  s3Bucket: "text",
};

const INT8_OID = 20;

/** Epoch-ms columns are bigint; every value svc stores fits a double exactly, so they are read as numbers. */
const TYPES = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
};

/** The change feed's topic (cluster/change-feed.ts, channel svc_changes) of a handed-off job's commit. */
export const HANDOFF_TOPIC = "handoff";

/**
 * The settings of the connections that keep their plans (`plannedOnce` in openPostgresStore): no sequential scans,
 * so that a plan made while a table was small still reads it by index once it is large.
 */
export const PLANNED_ONCE_SETTINGS = "-c enable_seqscan=off";

export interface PostgresStoreOptions {
  /** Connections this replica keeps at most (default 10), and two more for statements planned once. */
  maxConnections?: number;
  /** Connection attempts give up after this long (default 5 s): the store is then unavailable, a 503. */
  connectTimeoutMs?: number;
}

export type PostgresStore = Store &
  JobCommands & {
    pool: pg.Pool;
    db: Queryable;
    /** Run `body` in one transaction on one connection. */
    transaction<T>(body: (client: Queryable) => Promise<T>): Promise<T>;
  };

/**
 * Text PostgreSQL can hold: it refuses NUL characters in text, which a worker's log line may carry. JSON texts
 * never do (JSON escapes them). Pure.
 */
export function pgText(text: string): string {
  return text.includes("\u0000") ? text.replaceAll("\u0000", "\uFFFD") : text;
}

/**
 * Query parameters PostgreSQL accepts: a NUL in a text parameter is refused (22021), and an id or name from a
 * request may carry one (`/status/x%00y`). Nothing svc stores contains NUL, so U+FFFD in its place finds what the
 * original would have found: nothing. Pure.
 */
export function pgParams(values: readonly unknown[] | undefined): unknown[] | undefined {
  if (!values) return undefined;
  let out: unknown[] | undefined;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    const clean = typeof v === "string" ? (v.includes("\u0000") ? pgText(v) : v) : Array.isArray(v) ? cleanArray(v) : v;
    if (clean !== v) (out ??= [...values])[i] = clean;
  }
  return out ?? (values as unknown[]);
}

function cleanArray(values: unknown[]): unknown[] {
  let out: unknown[] | undefined;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === "string" && v.includes("\u0000")) (out ??= [...values])[i] = pgText(v);
  }
  return out ?? values;
}

/**
 * Statements are prepared once per connection (named by their text): svc sends a bounded set of texts, and a
 * prepared one skips parsing and planning, which was half of a small batch's time.
 */
const statementNames = new Map<string, string>();
const MAX_PREPARED = 500;
/**
 * Log retention reads an endpoint's lines from its oldest, a bounded part at a time, through logs_endpoint in seq
 * order, and stops. Planned without statistics (a table just filled) PostgreSQL estimated a handful of rows and read
 * all of the endpoint's lines through a bitmap scan to sort them (200,000 lines read for a part of 5,000): in these
 * transactions only ordered index scans are allowed.
 */
const ORDERED_INDEX_SCANS_ONLY = "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)";
/** Beyond every seq: the end of a range with no upper bound. */
const PG_MAX_BIGINT = "9223372036854775807";

function statementName(text: string): string | undefined {
  let name = statementNames.get(text);
  if (name === undefined) {
    // An unbounded variety of texts (none expected) is run unprepared rather than filling every connection.
    if (statementNames.size >= MAX_PREPARED) return undefined;
    name = `svc${statementNames.size}`;
    statementNames.set(text, name);
  }
  return name;
}

function safe(target: pg.Pool | pg.PoolClient): Queryable {
  return { query: (text, values) => target.query({ text, values: pgParams(values), name: statementName(text) }) as never };
}

/** node-postgres reports a dropped connection without a SQLSTATE: give it one, so storageCause sees "unavailable". */
function withConnectionCode(err: unknown): unknown {
  if (err instanceof Error && (err as { code?: unknown }).code === undefined && /connection|terminat|timeout|ECONN/i.test(err.message)) {
    (err as { code?: string }).code = "08006";
  }
  return err;
}

/** The `options` parameter of a connection URL, if it has one. */
function connectionOptions(url: string): string | undefined {
  try {
    return new URL(url).searchParams.get("options") ?? undefined;
  } catch {
    // Not a URL pg's own parser would refuse either (a key=value string): it has no options for this to keep.
    return undefined;
  }
}

/** The store on the database at `url`, brought to the schema of `migrations` (src/service/schema/postgres.ts). */
export async function openPostgresStore(url: string, migrations: readonly string[], options: PostgresStoreOptions = {}): Promise<PostgresStore> {
  // Statements are prepared once per connection, and after five runs PostgreSQL may keep one generic plan for a
  // prepared statement, chosen with the table's size at that moment: planned while the jobs table was nearly empty,
  // the batch update (`UPDATE jobs ... FROM unnest(...)`) kept scanning the whole table, and every batch slowed in
  // step with the table (1.5 ms at 4 000 jobs, 6.4 ms at 48 000; millions of jobs a day would stop the service).
  // Planning each run with its real parameters picks the id index at any size; parsing is still saved. Set as a
  // connection parameter (no statement of its own), after any `options` the URL gives.
  const urlOptions = connectionOptions(url);
  const newPool = (max: number, planOptions: string) => {
    const p = new pg.Pool({
      connectionString: url,
      options: [urlOptions, planOptions].filter(Boolean).join(" ") || undefined,
      max,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
      types: TYPES,
      application_name: "svc",
    });
    // An idle connection the server drops (restart, failover) is an error event on the pool: without a listener
    // it would end the process. The next query opens a new connection; a failing one is a 503 for that request.
    p.on("error", () => undefined);
    return p;
  };
  const pool = newPool(options.maxConnections ?? 10, "-c plan_cache_mode=force_custom_plan");
  // Statements whose kept plan cannot go wrong as tables grow keep PostgreSQL's default planning on connections of
  // their own, which plans a statement once instead of at every run: inserts (a follower's hand-offs, new jobs),
  // counters, and the batch updates of jobs, which find their rows by `id = ANY(...)`. Sequential scans are off
  // there, so a plan made while a table was nearly empty (when reading it whole is cheapest) still goes through
  // the index once it is large; these statements never need to read a table whole. Planning was a third of the
  // database's time on a follower's inserts of a few jobs each, ~0.2 ms of a /runsync's final commit, and 18 µs a
  // job of every batch of takes and results (docs/design/0004-postgres-plans.md). Opened on first use.
  let plannedOncePool: pg.Pool | undefined;
  const plannedOnce = () => safe((plannedOncePool ??= newPool(2, PLANNED_ONCE_SETTINGS)));
  const first = await pool.connect();
  try {
    await migrate(first, migrations);
  } finally {
    first.release();
  }

  const db = safe(pool);
  const queryOn = async <R extends pg.QueryResultRow = Record<string, unknown>>(target: Queryable, text: string, values?: unknown[]) => {
    try {
      return await target.query<R>(text, values);
    } catch (err) {
      throw withConnectionCode(err);
    }
  };
  const query = <R extends pg.QueryResultRow = Record<string, unknown>>(text: string, values?: unknown[]) => queryOn<R>(db, text, values);

  const transaction = async <T>(body: (client: Queryable) => Promise<T>): Promise<T> => {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw withConnectionCode(err);
    }
    let broken: unknown;
    try {
      await client.query("BEGIN");
      const result = await body(safe(client));
      await client.query("COMMIT");
      return result;
    } catch (err) {
      broken = err;
      await client.query("ROLLBACK").catch((rollbackErr: unknown) => {
        broken = rollbackErr; // the connection is gone: release it as broken, not back into the pool
      });
      throw withConnectionCode(err);
    } finally {
      client.release(broken instanceof Error && !("severity" in broken) ? broken : undefined);
    }
  };

  const jobRows = (rows: Record<string, unknown>[]) => rows.map(rowToJob);

  /** A batch's statements, atomically: one alone (on the planned-once connections if it may), else a transaction. The last one's rows. */
  const runBatch = async (statements: Statement[]): Promise<Record<string, unknown>[]> => {
    if (statements.length === 1) {
      const [only] = statements as [Statement];
      return (await queryOn(only.planOnce ? plannedOnce() : db, only.text, only.values)).rows;
    }
    return transaction(async (client) => {
      let rows: Record<string, unknown>[] = [];
      for (const statement of statements) rows = (await client.query(statement.text, statement.values)).rows;
      return rows;
    });
  };

  const store: PostgresStore = {
    pool,
    db,
    transaction,
    async apply(ops) {
      if (ops.length === 0) return;
      await runBatch(opsStatements(ops));
    },
    async handOffJobs(jobs, from) {
      if (jobs.length === 0) return;
      const insert = jobInsert(jobs);
      // No NOTIFY in this transaction: PostgreSQL serialises the commits of transactions that notify (a lock held
      // through the WAL flush), which throttled every follower's inserts to one fsync at a time. The caller
      // announces the commit on the change feed (engine hook onHandedOff), and the replica serving jobs rescans.
      await queryOn(
        plannedOnce(),
        `WITH inserted AS (${insert.text} RETURNING id)
         INSERT INTO job_handoffs (job_id, replica) SELECT id, $${insert.values.length + 1}::text FROM inserted`,
        [...insert.values, from],
      );
    },
    async applyAndAdopt(ops) {
      // The adoption is the last statement's CTEs: one round trip, one commit, with the batch's own writes.
      const rows = jobRows(await runBatch(opsStatements(ops, { adopt: true })));
      // A job cancelled before its adoption loses its mark and is not adopted.
      return rows.filter((row) => row.status === "IN_QUEUE");
    },
    async vacuumHandoffs() {
      // Not a prepared statement: VACUUM runs outside any transaction, as a statement of its own. Without
      // truncating: shortening the file takes a lock that would stall the followers' inserts for that moment, and
      // the space freed is reused by the next marks anyway.
      try {
        await pool.query("VACUUM (TRUNCATE false) job_handoffs");
      } catch (err) {
        throw withConnectionCode(err);
      }
    },
    async getJob(id) {
      const { rows } = await query("SELECT * FROM jobs WHERE id = $1", [id]);
      return rows[0] ? rowToJob(rows[0]) : undefined;
    },
    async getJobHead(id) {
      const columns = JOB_KEYS.filter((k) => k !== "output").map((k) => JOB_COLUMNS[k]);
      const { rows } = await query(`SELECT ${columns.join(", ")}, octet_length(output) AS output_bytes FROM jobs WHERE id = $1`, [id]);
      const r = rows[0];
      if (!r) return undefined;
      return { ...rowToJob({ ...r, output: null }), outputBytes: (r.output_bytes as number | null) ?? null };
    },
    async jobOutput(id) {
      const { rows } = await query<{ output: string | null }>("SELECT output FROM jobs WHERE id = $1", [id]);
      const output = rows[0]?.output;
      return output === null || output === undefined ? undefined : Buffer.from(output, "utf8");
    },
    async jobInput(id) {
      const { rows } = await query<{ input: string }>("SELECT input FROM jobs WHERE id = $1", [id]);
      return rows[0]?.input;
    },
    async activeJobs() {
      const { rows } = await query("SELECT * FROM jobs WHERE status IN ('IN_QUEUE', 'IN_PROGRESS') ORDER BY seq");
      return jobRows(rows);
    },
    async recentJobIds(endpointId, limit, filter) {
      const q = listQuery("jobs", endpointId, limit, filter);
      const { rows } = await query<{ id: string }>(q.text, q.values);
      return rows.map((r) => r.id);
    },
    async archiveJobs(ids, resultExpiredAt, keptUntil) {
      if (ids.length === 0) return;
      // One statement for all: the rows as an array (the sweep's batch is at most a few thousand).
      await query(ARCHIVE_JOBS, [ids, resultExpiredAt, keptUntil]);
    },
    async jobHistory(endpointId, limit, filter) {
      const q = listQuery("job_history", endpointId, limit, filter);
      return (await query(q.text, q.values)).rows.map(rowToHistory);
    },
    async historyJob(endpointId, id) {
      const r = (await query(HISTORY_JOB, [endpointId, id])).rows[0];
      return r ? rowToHistory(r) : undefined;
    },
    async sweepJobHistory(now, limit) {
      return (await query(SWEEP_HISTORY, [now, limit])).rowCount ?? 0;
    },
    async chunksAfter(jobId, seq) {
      const { rows } = await query<{ job_id: string; seq: number; data: string }>(
        "SELECT job_id, seq, data FROM stream_chunks WHERE job_id = $1 AND seq > $2 ORDER BY seq",
        [jobId, seq],
      );
      return rows.map((r) => ({ jobId: r.job_id, seq: r.seq, data: r.data }) satisfies StreamChunkRow);
    },
    async lastChunkSeq(jobId) {
      const { rows } = await query<{ seq: number }>("SELECT COALESCE(max(seq), 0) AS seq FROM stream_chunks WHERE job_id = $1", [jobId]);
      return rows[0]!.seq;
    },
    async expiredJobIds(now, limit) {
      const { rows } = await query<{ id: string }>("SELECT id FROM jobs WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY expires_at LIMIT $2", [
        now,
        limit,
      ]);
      return rows.map((r) => r.id);
    },
    async endpoints() {
      const { rows } = await query("SELECT * FROM endpoints ORDER BY created_at, id");
      return rows.map(rowToEndpoint);
    },
    async keyByHash(hash) {
      const { rows } = await query("SELECT * FROM api_keys WHERE hash = $1", [hash]);
      return rows[0] ? rowToKey(rows[0]) : undefined;
    },
    async dueWebhooks(now, limit) {
      const { rows } = await query("SELECT * FROM webhook_outbox WHERE next_at <= $1 ORDER BY next_at, created_at LIMIT $2", [now, limit]);
      return rows.map(rowToWebhook);
    },
    async pendingWebhooks(jobId) {
      const { rows } = await query("SELECT * FROM webhook_outbox WHERE job_id = $1 ORDER BY created_at, id", [jobId]);
      return rows.map(rowToWebhook);
    },
    async webhookDeliveries(jobId) {
      const { rows } = await query("SELECT * FROM webhook_deliveries WHERE job_id = $1 ORDER BY seq", [jobId]);
      return rows.map(rowToWebhookDelivery);
    },
    async webhookSettings(endpointId) {
      const { rows } =
        endpointId === undefined
          ? await query("SELECT * FROM webhook_settings ORDER BY endpoint_id")
          : await query("SELECT * FROM webhook_settings WHERE endpoint_id = $1", [endpointId]);
      return rows.map(rowToWebhookSettings);
    },
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
    async apps(userId) {
      const { rows } = await query("SELECT * FROM apps WHERE user_id = $1 ORDER BY name", [userId]);
      return rows.map(rowToApp);
    },
    async environments(userId, app) {
      const { rows } = await query("SELECT * FROM environments WHERE user_id = $1 AND app = $2 ORDER BY name", [userId, app]);
      return rows.map(rowToEnvironment);
    },
    async releases(userId, app, env, limit) {
      const { rows } = await query<{ record: string }>(
        "SELECT record FROM releases WHERE user_id = $1 AND app = $2 AND env = $3 ORDER BY started_at DESC, seq DESC LIMIT $4",
        [userId, app, env, limit],
      );
      return rows.map((r) => JSON.parse(r.record) as ReleaseRow);
    },
    async build(userId, id) {
      const { rows } = await query("SELECT * FROM builds WHERE user_id = $1 AND id = $2", [userId, id]);
      return rows[0] ? rowToBuild(rows[0]) : undefined;
    },

    // ------------------------------------------------------------ conditional job commands

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
      return jobRows(rows);
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
      return store.getJob(jobId);
    },
    async now() {
      const { rows } = await query<{ now: number }>("SELECT svc_now_ms() AS now");
      return rows[0]!.now;
    },
    async close() {
      await Promise.all([pool.end(), plannedOncePool?.end()]);
    },
  };
  return store;
}

// ---------------------------------------------------------------- batches

/** One SQL statement with its parameters. */
export interface Statement {
  text: string;
  values: unknown[];
  /**
   * Reads no table whose growth could make a kept plan wrong (it only inserts, or updates endpoints' counters by
   * id): planned once per connection instead of at every run (see `plannedOnce` in openPostgresStore).
   */
  planOnce?: boolean;
}

type Segment = {
  inserts: JobRow[];
  updates: Map<string, Array<{ id: string; set: Partial<JobRow> }>>;
  chunks: Map<string, StreamChunkRow>;
  logs: LogRow[];
  counters: Map<string, { completed: number; failed: number; retried: number }>;
};

const emptySegment = (): Segment => ({ inserts: [], updates: new Map(), chunks: new Map(), logs: [], counters: new Map() });

/**
 * The statements a batch of ops becomes, in order, as few as their order allows. Between two ops that must keep
 * their place (deletes, endpoints, keys, deploy records), the job inserts, job updates (one per set of columns),
 * chunks, logs and counters become ONE statement: each a data-modifying CTE of it. That is sound because
 * foldJobOps has left at most one write per job there (no CTE needs to see another's row), and chunks, logs and
 * counters are independent appends. A batch without such ops is then one statement: atomic by itself, sent
 * without BEGIN/COMMIT, one round trip. Pure.
 */
export function batchStatements(ops: StoreOp[], options: { adopt?: boolean } = {}): Statement[] {
  const out: Statement[] = [];
  let segment = emptySegment();
  const flush = () => {
    const parts = segmentParts(segment);
    if (parts.length > 0) out.push(combine(parts));
    segment = emptySegment();
  };
  const finish = () => {
    if (!options.adopt) return flush();
    // The adoption joins the last segment's statement: the batch's writes and it commit together.
    const own = segmentParts(segment);
    const parts = [...own, ...adoptionParts(jobIdsOf(ops)).map((p) => ({ ...p, text: p.text.replaceAll("{taken}", `w${own.length}`) }))];
    // Which of them are still queued is applyAndAdopt's to filter: pushed down into the lookup, the condition had
    // PostgreSQL read every queued job through the queue index instead of the few adopted by id.
    out.push(combine(parts, `SELECT * FROM w${parts.length - 1} ORDER BY seq`));
  };
  for (const o of ops) {
    switch (o.op) {
      case "insertJob":
        segment.inserts.push(o.job);
        break;
      case "updateJob": {
        const keys = Object.keys(o.set).filter((k) => k in JOB_COLUMNS && k !== "id");
        if (keys.length === 0) break;
        const signature = keys.sort().join(",");
        let list = segment.updates.get(signature);
        if (!list) segment.updates.set(signature, (list = []));
        list.push({ id: o.id, set: o.set });
        break;
      }
      case "insertChunk":
        segment.chunks.set(`${o.chunk.jobId}\u0000${o.chunk.seq}`, o.chunk);
        break;
      case "insertLog":
        segment.logs.push(o.line);
        break;
      case "addCounters": {
        const c = segment.counters.get(o.endpointId) ?? { completed: 0, failed: 0, retried: 0 };
        c.completed += o.completed;
        c.failed += o.failed;
        c.retried += o.retried;
        segment.counters.set(o.endpointId, c);
        break;
      }
      default:
        flush();
        out.push(...barrierStatements(o));
    }
  }
  finish();
  return out;
}

/** A batch's ops as statements, a job's several changes folded into one first. Pure. */
function opsStatements(ops: StoreOp[], options: { adopt?: boolean } = {}): Statement[] {
  return batchStatements(ops.length > 1 ? foldJobOps(ops) : ops, options);
}

/** The jobs a batch writes. */
function jobIdsOf(ops: StoreOp[]): string[] {
  const ids = new Set<string>();
  for (const o of ops) if (o.op === "updateJob" || o.op === "deleteJob") ids.add(o.id);
  return [...ids];
}

/**
 * Handed-off jobs taken by the replica serving jobs (engine/handoff.ts), as CTEs: every mark (a row of
 * job_handoffs) deleted, the marked jobs returned (the last part). A job whose endpoint was deleted as it was
 * handed off (its follower had not heard) goes as that endpoint's jobs went. Jobs the batch itself writes are left
 * for the next adoption: one statement must not change a row twice (PostgreSQL would apply only one of the two
 * changes).
 */
function adoptionParts(batchJobIds: string[]): Statement[] {
  // The parts are CTEs w<i> of one statement (combine): the first is the marks taken, which the others read. The
  // jobs are looked up by `id = ANY(array)`, which the id index answers: joined with the CTE, the planner (which
  // cannot know how many marks there are) read the whole jobs table, twice per adoption.
  return [
    { text: `DELETE FROM job_handoffs WHERE NOT (job_id = ANY($1::text[])) RETURNING job_id`, values: [batchJobIds] },
    {
      text: `DELETE FROM jobs j WHERE j.id = ANY(ARRAY(SELECT job_id FROM {taken}))
             AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.id = j.endpoint_id)`,
      values: [],
    },
    {
      text: `SELECT j.* FROM jobs j WHERE j.id = ANY(ARRAY(SELECT job_id FROM {taken}))
             AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = j.endpoint_id)`,
      values: [],
    },
  ];
}

/**
 * Statements written with $1.. each, as one: CTEs of a single statement, their parameters renumbered, and `tail`
 * (which may read the last CTE, `w<n-1>`) as what it returns. Pure.
 */
function combine(parts: Statement[], tail?: string): Statement {
  if (parts.length === 1 && tail === undefined) return parts[0]!;
  const values: unknown[] = [];
  const ctes = parts.map((part, i) => {
    const offset = values.length;
    values.push(...part.values);
    return `w${i} AS (${part.text.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + offset}`)})`;
  });
  return { text: `WITH ${ctes.join(", ")} ${tail ?? "SELECT 1"}`, values, planOnce: tail === undefined && parts.every((p) => p.planOnce) };
}

const sqlValue = (v: unknown) => (v === undefined ? null : v);

/**
 * Jobs inserted whole, as one statement with one parameter: the rows as JSON, read by json_to_recordset. One
 * JSON.stringify a batch, where an array a column had node-postgres escape every value into an array literal:
 * less CPU a job in the service and in PostgreSQL, a few per cent more jobs a second (docs/design/0005-postgres-one-statement-batches.md).
 */
function jobInsert(jobs: JobRow[]): Statement {
  return { text: JOB_INSERT, values: [jobsJson(jobs)], planOnce: true };
}

const JOB_INSERT = `INSERT INTO jobs (${JOB_KEYS.map((k) => JOB_COLUMNS[k]).join(", ")})
  SELECT ${JOB_KEYS.map((k) => `"${k}"`).join(", ")} FROM json_to_recordset($1::json) AS r(${JOB_KEYS.map((k) => `"${k}" ${JOB_PG_TYPES[k]}`).join(", ")})`;

/** A NUL or a lone surrogate as JSON.stringify escapes it (an escape is preceded by an even run of backslashes). */
const UNHOLDABLE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/g;

/**
 * Job rows as the JSON of their insert. A text column cannot hold a NUL, and PostgreSQL refuses one, or a lone
 * surrogate, escaped in JSON read as text: both become U+FFFD, as a NUL does in any parameter (pgParams) and a lone
 * surrogate does in node's UTF-8 (how an array's text was sent). Absent fields are NULL. Pure.
 */
export function jobsJson(jobs: readonly JobRow[]): string {
  const text = JSON.stringify(jobs);
  return text.includes("\\u") ? text.replace(UNHOLDABLE_ESCAPE, "$1\\ufffd") : text;
}

function segmentParts(s: Segment): Statement[] {
  const parts: Statement[] = [];
  if (s.inserts.length > 0) parts.push(jobInsert(s.inserts));
  for (const [signature, list] of s.updates) {
    const keys = signature.split(",") as Array<keyof JobRow>;
    // A job whose lease the engine ends has no lease expiry either (the conditional commands read it).
    // Each job's values by its place in the list of ids: the rows are found by `id = ANY(...)`, which the id index
    // answers, with no join for a kept plan to get wrong (see plannedOnce in openPostgresStore).
    const valueAt = (k: keyof JobRow, i: number) => `($${i + 2}::${JOB_PG_TYPES[k]}[])[array_position($1::text[], j.id)]`;
    const leaseAt = keys.indexOf("lease" as keyof JobRow);
    const leaseExpiry =
      leaseAt >= 0 ? `, lease_expires_at = CASE WHEN ${valueAt("lease" as keyof JobRow, leaseAt)} IS NULL THEN NULL ELSE j.lease_expires_at END` : "";
    parts.push({
      text: `UPDATE jobs AS j SET ${keys.map((k, i) => `${JOB_COLUMNS[k]} = ${valueAt(k, i)}`).join(", ")}${leaseExpiry}
       WHERE j.id = ANY($1::text[])`,
      values: [list.map((u) => u.id), ...keys.map((k) => list.map((u) => sqlValue((u.set as Record<string, unknown>)[k])))],
      planOnce: true,
    });
  }
  if (s.chunks.size > 0) {
    const chunks = [...s.chunks.values()];
    parts.push({
      text: `INSERT INTO stream_chunks (job_id, seq, data) SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])
       ON CONFLICT (job_id, seq) DO UPDATE SET data = excluded.data`,
      values: [chunks.map((c) => c.jobId), chunks.map((c) => c.seq), chunks.map((c) => c.data)],
      planOnce: true,
    });
  }
  if (s.logs.length > 0) {
    const l = s.logs;
    parts.push({
      text: `INSERT INTO logs (endpoint_id, worker_id, job_id, ts, stream, text)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[])`,
      values: [
        l.map((x) => x.endpointId),
        l.map((x) => x.workerId),
        l.map((x) => x.jobId),
        l.map((x) => x.ts),
        l.map((x) => pgText(x.stream)),
        l.map((x) => pgText(x.text)),
      ],
      planOnce: true,
    });
  }
  if (s.counters.size > 0) {
    const c = [...s.counters];
    parts.push({
      text: `UPDATE endpoints AS e SET completed = e.completed + v.completed, failed = e.failed + v.failed, retried = e.retried + v.retried
       FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS v(id, completed, failed, retried) WHERE e.id = v.id`,
      values: [c.map(([id]) => id), c.map(([, x]) => x.completed), c.map(([, x]) => x.failed), c.map(([, x]) => x.retried)],
      // By the endpoints' primary key: the table holds endpoints, not jobs, and is analysed as its counters change.
      planOnce: true,
    });
  }
  return parts;
}

function barrierStatements(o: StoreOp): Statement[] {
  const one = (text: string, values: unknown[]): Statement[] => [{ text, values }];
  switch (o.op) {
    case "deleteJob":
      return [
        { text: "DELETE FROM stream_chunks WHERE job_id = $1", values: [o.id] },
        { text: "DELETE FROM jobs WHERE id = $1", values: [o.id] },
      ];
    case "deleteChunksAfter":
      return one("DELETE FROM stream_chunks WHERE job_id = $1 AND seq > $2", [o.jobId, o.seq]);
    case "upsertEndpoint": {
      const e: EndpointRow = o.endpoint;
      return one(
        `INSERT INTO endpoints (id, user_id, app, env, name, type, resource, artifact_path, revision, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         ON CONFLICT (id) DO UPDATE SET type = excluded.type, resource = excluded.resource,
           artifact_path = excluded.artifact_path, revision = excluded.revision, updated_at = excluded.updated_at`,
        [e.id, e.userId, e.app, e.env, e.name, e.type, JSON.stringify(e.resource), e.artifactPath, e.revision, e.createdAt, e.updatedAt],
      );
    }
    case "deleteEndpoint":
      return [
        { text: "DELETE FROM stream_chunks WHERE job_id IN (SELECT id FROM jobs WHERE endpoint_id = $1)", values: [o.id] },
        { text: "DELETE FROM jobs WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM job_history WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM logs WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM webhook_deliveries WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM webhook_settings WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM endpoints WHERE id = $1", values: [o.id] },
      ];
    case "insertKey":
      return one(
        `INSERT INTO api_keys (id, hash, user_id, scopes, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET hash = excluded.hash, user_id = excluded.user_id, scopes = excluded.scopes,
           created_at = excluded.created_at, revoked_at = excluded.revoked_at`,
        [o.key.id, o.key.hash, o.key.userId, JSON.stringify(o.key.scopes), o.key.createdAt, o.key.revokedAt],
      );
    case "revokeKey":
      return one("UPDATE api_keys SET revoked_at = $1 WHERE id = $2", [o.at, o.id]);
    case "deleteKey":
      return one("DELETE FROM api_keys WHERE id = $1", [o.id]);
    case "insertWebhook": {
      const w = o.webhook;
      return one(
        `INSERT INTO webhook_outbox (id, job_id, endpoint_id, event, url, body, attempts, next_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (id) DO UPDATE SET body = excluded.body, attempts = excluded.attempts, next_at = excluded.next_at`,
        [w.id, w.jobId, w.endpointId, w.event, w.url, w.body, w.attempts, w.nextAt, w.createdAt],
      );
    }
    case "insertWebhookDelivery": {
      const d = o.delivery;
      return one(
        `INSERT INTO webhook_deliveries (job_id, endpoint_id, message_id, event, attempt, at, duration_ms, status, error, outcome)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        [d.jobId, d.endpointId, d.messageId, d.event, d.attempt, d.at, d.durationMs, d.status, d.error === null ? null : pgText(d.error), d.outcome],
      );
    }
    case "putWebhookSettings": {
      const w = o.settings;
      return one(
        `INSERT INTO webhook_settings (endpoint_id, events, secret, secret_key_id, secret_created_at, previous_secret, previous_key_id, previous_expires_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (endpoint_id) DO UPDATE SET events = excluded.events, secret = excluded.secret, secret_key_id = excluded.secret_key_id,
           secret_created_at = excluded.secret_created_at, previous_secret = excluded.previous_secret, previous_key_id = excluded.previous_key_id,
           previous_expires_at = excluded.previous_expires_at, updated_at = excluded.updated_at`,
        [w.endpointId, w.events, w.secret, w.secretKeyId, w.secretCreatedAt, w.previousSecret, w.previousKeyId, w.previousExpiresAt, w.updatedAt],
      );
    }
    case "pruneWebhookDeliveries":
      return one("DELETE FROM webhook_deliveries WHERE at < $1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = webhook_deliveries.job_id)", [o.before]);
    case "retryWebhook":
      return one("UPDATE webhook_outbox SET attempts = $1, next_at = $2 WHERE id = $3", [o.attempts, o.nextAt, o.id]);
    case "deleteWebhook":
      return one("DELETE FROM webhook_outbox WHERE id = $1", [o.id]);
    default:
      return deployStatements(o as DeployStoreOp);
  }
}

function deployStatements(o: DeployStoreOp): Statement[] {
  const one = (text: string, values: unknown[]): Statement[] => [{ text, values }];
  switch (o.op) {
    case "upsertApp":
      return one("INSERT INTO apps (user_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", [o.app.userId, o.app.name, o.app.createdAt]);
    case "upsertRelease": {
      const r = o.release;
      return one(
        `INSERT INTO releases (user_id, app, env, id, started_at, record) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (user_id, app, env, id) DO UPDATE SET record = excluded.record`,
        [r.userId, r.app, r.env, r.id, r.startedAt, JSON.stringify(r)],
      );
    }
    case "deleteApp":
      return [
        ...["releases", "environments", "builds"].map((table) => ({
          text: `DELETE FROM ${table} WHERE user_id = $1 AND app = $2`,
          values: [o.userId, o.name],
        })),
        { text: "DELETE FROM apps WHERE user_id = $1 AND name = $2", values: [o.userId, o.name] },
      ];
    case "upsertEnvironment": {
      const e = o.environment;
      return one(
        `INSERT INTO environments (user_id, app, name, build_id, created_at, activated_at) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (user_id, app, name) DO UPDATE SET build_id = excluded.build_id, activated_at = excluded.activated_at`,
        [e.userId, e.app, e.name, e.buildId, e.createdAt, e.activatedAt],
      );
    }
    case "deleteEnvironment":
      return [
        { text: "DELETE FROM releases WHERE user_id = $1 AND app = $2 AND env = $3", values: [o.userId, o.app, o.name] },
        { text: "DELETE FROM environments WHERE user_id = $1 AND app = $2 AND name = $3", values: [o.userId, o.app, o.name] },
      ];
    case "insertBuild": {
      const b = o.build;
      return one(
        `INSERT INTO builds (id, user_id, app, size, fingerprint, manifest, path, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT DO NOTHING`,
        [b.id, b.userId, b.app, b.size, b.fingerprint, JSON.stringify(b.manifest), b.path, b.createdAt],
      );
    }
  }
}
