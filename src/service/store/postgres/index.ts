// The server-grade store: PostgreSQL through node-postgres (`svc server --store postgres://...`). It implements
// the same `Store` as the embedded SQLite file, and the conditional job commands (`JobCommands`) that let
// several replicas share one database.
//
// This module opens the store: its pools, the migrations run, and the reads of jobs, streams, endpoints, keys,
// webhooks and deploy records. A batch of the engine's writes is one transaction, or one statement when its order
// allows (batch.ts, barrier-statements.ts); the log reads and retention are logs.ts's, the conditional job commands
// job-commands.ts's, and how a statement reaches a connection is connection.ts's.

import pg from "pg";
import {
  JOB_COLUMNS,
  JOB_KEYS,
  rowToApp,
  rowToBuild,
  rowToEndpoint,
  rowToEnvironment,
  rowToJob,
  rowToKey,
  rowToWebhook,
  rowToWebhookDelivery,
  rowToWebhookSettings,
} from "../rows.js";
import type { JobCommands, Store, StreamChunkRow } from "../types.js";
import type { ReleaseRow } from "../deploy-rows.js";
import { migrate } from "./migrate.js";
import { ARCHIVE_JOBS, HISTORY_JOB, listQuery, rowToHistory, SWEEP_HISTORY } from "../job-history.js";
import type { Queryable } from "../queryable.js";
import { jobInsert, opsStatements } from "./batch.js";
import { connectionOptions, PLANNED_ONCE_SETTINGS, queryOn, safe, type Statement, transactionOn, TYPES, withConnectionCode } from "./connection.js";
import { jobCommands } from "./job-commands.js";
import { logStatements } from "./logs.js";

export type { Queryable, Statement };
export { batchStatements, jobsJson } from "./batch.js";
export { PLANNED_ONCE_SETTINGS, pgParams, pgText } from "./connection.js";

/** The change feed's topic (cluster/change-feed.ts, channel svc_changes) of a handed-off job's commit. */
export const HANDOFF_TOPIC = "handoff";

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
  const query = <R extends pg.QueryResultRow = Record<string, unknown>>(text: string, values?: unknown[]) => queryOn<R>(db, text, values);
  const transaction = <T>(body: (client: Queryable) => Promise<T>): Promise<T> => transactionOn(pool, body);

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
    ...logStatements(db, transaction),
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
    ...jobCommands(db, (id) => store.getJob(id)),
    async close() {
      await Promise.all([pool.end(), plannedOncePool?.end()]);
    },
  };
  return store;
}
