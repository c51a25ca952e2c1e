// The embedded store: one SQLite file (WAL, synchronous=NORMAL) through better-sqlite3. Every batch is one
// transaction; statements are prepared once. Schema changes are numbered migrations (PRAGMA user_version).
//
// Checkpoints (copying the WAL into the database file, with an fsync) run on a thread of their own, over a
// second connection: on the event loop every checkpoint stalled all requests behind its fsync. A commit is
// durable once it is in the WAL (synchronous=NORMAL), so this changes nothing about what a crash keeps.

import type Database from "better-sqlite3";
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { dirname } from "node:path";
import { UserError } from "../../errors.js";
import { openDatabase, sqliteDriverPath } from "./driver.js";
import { DROPPED_LOG_STREAM, type JobCommands, type JobRow, type LogPruning, type Store, type StoreOp, type StreamChunkRow } from "./types.js";
import { JOB_COLUMNS, JOB_KEYS, rowToEndpoint, rowToJob, rowToKey, rowToLog, rowToWebhook, rowToWebhookDelivery, rowToWebhookSettings } from "./rows.js";
import { isDeployOp, prepareDeployStatements } from "./deploy-sqlite.js";
import { ARCHIVE_JOB, HISTORY_JOB, listQuery, rowToHistory, sqliteStatement, SWEEP_HISTORY } from "./job-history.js";

const historyStatement = (q: { text: string; values: unknown[] }) => sqliteStatement(q.text, q.values);

type SqlValue = string | number | null;
const toSql = (v: unknown): SqlValue => (typeof v === "boolean" ? (v ? 1 : 0) : ((v as SqlValue) ?? null));

/** How often the checkpoint thread copies the WAL into the database file (a no-op when nothing changed). */
const CHECKPOINT_EVERY_MS = 200;

// The checkpoint thread (eval'd: the same code runs from src/ under the tests and from dist/).
const CHECKPOINTER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.exec("PRAGMA busy_timeout = 5000");
// exec, not pragma(): no statement object is left to the garbage collector every tick.
// A failed checkpoint (the database busy) loses nothing: the WAL keeps every commit, and the next tick retries.
const checkpoint = () => { try { db.exec("PRAGMA wal_checkpoint(PASSIVE)"); } catch {} };
const timer = setInterval(checkpoint, workerData.everyMs);
parentPort.on("message", () => { clearInterval(timer); db.close(); parentPort.close(); });
`;

/** Start checkpointing `file` on a thread; this connection stops checkpointing itself. Undefined: could not. */
function startCheckpointer(db: Database.Database, file: string): { stop(): Promise<void> } | undefined {
  let worker: Worker;
  try {
    worker = new Worker(CHECKPOINTER_SOURCE, { eval: true, workerData: { file, driver: sqliteDriverPath(), everyMs: CHECKPOINT_EVERY_MS } });
  } catch {
    return undefined;
  }
  worker.unref();
  db.pragma("wal_autocheckpoint = 0");
  // Should the thread ever stop, this connection checkpoints again as SQLite does by default.
  worker.once("error", () => {
    if (db.open) db.pragma("wal_autocheckpoint = 1000");
  });
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  return {
    stop() {
      // Held open until the thread has closed its connection (unref'd, it would not keep the process alive).
      worker.ref();
      worker.postMessage("stop");
      return exited;
    },
  };
}

/**
 * One batch with every update of a job folded into the batch's earlier insert or update of that job: one
 * statement per job instead of one per change (a job taken in the tick it was submitted is inserted
 * IN_PROGRESS). Only job inserts/updates and independent appends (chunks, logs, counters) are folded across;
 * any other op keeps its place relative to everything. Pure.
 */
export function foldJobOps(ops: StoreOp[]): StoreOp[] {
  const out: StoreOp[] = [];
  const lastWrite = new Map<string, number>();
  for (const o of ops) {
    if (o.op === "updateJob") {
      const at = lastWrite.get(o.id);
      if (at !== undefined) {
        const prev = out[at]!;
        if (prev.op === "insertJob") out[at] = { op: "insertJob", job: { ...prev.job, ...o.set } };
        else if (prev.op === "updateJob") out[at] = { op: "updateJob", id: o.id, set: { ...prev.set, ...o.set } };
        continue;
      }
      lastWrite.set(o.id, out.length);
    } else if (o.op === "insertJob") lastWrite.set(o.job.id, out.length);
    else if (o.op !== "insertChunk" && o.op !== "insertLog" && o.op !== "addCounters") lastWrite.clear();
    out.push(o);
  }
  return out;
}

/** The store on `file`, brought to the schema of `migrations` (src/service/schema/sqlite.ts). */
export function openSqliteStore(file: string, migrations: readonly string[]): Store & JobCommands {
  mkdirSync(dirname(file), { recursive: true });
  const db = openDatabase(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  try {
    migrate(db, migrations);
  } catch (err) {
    db.close();
    throw err;
  }
  const checkpointer = startCheckpointer(db, file);

  const insertJob = db.prepare(`INSERT INTO jobs (${JOB_KEYS.map((k) => JOB_COLUMNS[k]).join(", ")}) VALUES (${JOB_KEYS.map(() => "?").join(", ")})`);
  const updateStatements = new Map<string, Database.Statement>();
  const updateFor = (keys: string[]) => {
    const signature = keys.join(",");
    let statement = updateStatements.get(signature);
    if (!statement) {
      const sets = keys.map((k) => `${JOB_COLUMNS[k as keyof JobRow]} = ?`).join(", ");
      statement = db.prepare(`UPDATE jobs SET ${sets} WHERE id = ?`);
      updateStatements.set(signature, statement);
    }
    return statement;
  };
  const deleteJob = db.prepare("DELETE FROM jobs WHERE id = ?");
  const deleteChunks = db.prepare("DELETE FROM stream_chunks WHERE job_id = ?");
  const deleteChunksAfter = db.prepare("DELETE FROM stream_chunks WHERE job_id = ? AND seq > ?");
  const insertChunk = db.prepare("INSERT OR REPLACE INTO stream_chunks (job_id, seq, data) VALUES (?, ?, ?)");
  const insertLog = db.prepare("INSERT INTO logs (endpoint_id, worker_id, job_id, ts, stream, text) VALUES (?, ?, ?, ?, ?, ?)");
  const upsertEndpoint = db.prepare(
    `INSERT INTO endpoints (id, user_id, app, env, name, type, resource, artifact_path, revision, created_at, updated_at)
     VALUES (@id, @userId, @app, @env, @name, @type, @resource, @artifactPath, @revision, @createdAt, @updatedAt)
     ON CONFLICT (id) DO UPDATE SET type = excluded.type, resource = excluded.resource,
       artifact_path = excluded.artifact_path, revision = excluded.revision, updated_at = excluded.updated_at`,
  );
  const deleteEndpoint = db.prepare("DELETE FROM endpoints WHERE id = ?");
  const deleteEndpointJobs = db.prepare("DELETE FROM jobs WHERE endpoint_id = ?");
  const deleteEndpointHistory = db.prepare("DELETE FROM job_history WHERE endpoint_id = ?");
  // The job history's statements that take no filter, prepared once (job-history.ts writes them for both stores).
  const archiveJob = db.prepare(sqliteStatement(ARCHIVE_JOB, []).text);
  const historyJob = db.prepare(sqliteStatement(HISTORY_JOB, []).text);
  const sweepHistory = db.prepare(sqliteStatement(SWEEP_HISTORY, []).text);
  const deleteEndpointChunks = db.prepare("DELETE FROM stream_chunks WHERE job_id IN (SELECT id FROM jobs WHERE endpoint_id = ?)");
  const deleteEndpointLogs = db.prepare("DELETE FROM logs WHERE endpoint_id = ?");
  const addCounters = db.prepare("UPDATE endpoints SET completed = completed + ?, failed = failed + ?, retried = retried + ? WHERE id = ?");
  const insertKey = db.prepare("INSERT OR REPLACE INTO api_keys (id, hash, user_id, scopes, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)");
  const revokeKey = db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?");
  const deleteKey = db.prepare("DELETE FROM api_keys WHERE id = ?");
  const insertWebhook = db.prepare(
    "INSERT OR REPLACE INTO webhook_outbox (id, job_id, endpoint_id, event, url, body, attempts, next_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
  );
  const retryWebhook = db.prepare("UPDATE webhook_outbox SET attempts = ?, next_at = ? WHERE id = ?");
  const deleteWebhook = db.prepare("DELETE FROM webhook_outbox WHERE id = ?");
  const dueWebhooks = db.prepare("SELECT * FROM webhook_outbox WHERE next_at <= ? ORDER BY next_at, created_at LIMIT ?");
  const pendingWebhooks = db.prepare("SELECT * FROM webhook_outbox WHERE job_id = ? ORDER BY created_at, id");
  const insertDelivery = db.prepare(
    `INSERT INTO webhook_deliveries (job_id, endpoint_id, message_id, event, attempt, at, duration_ms, status, error, outcome)
     VALUES (@jobId, @endpointId, @messageId, @event, @attempt, @at, @durationMs, @status, @error, @outcome)`,
  );
  const deliveriesOf = db.prepare("SELECT * FROM webhook_deliveries WHERE job_id = ? ORDER BY seq");
  const pruneDeliveries = db.prepare("DELETE FROM webhook_deliveries WHERE at < ? AND job_id NOT IN (SELECT id FROM jobs)");
  const deleteEndpointDeliveries = db.prepare("DELETE FROM webhook_deliveries WHERE endpoint_id = ?");
  const putWebhookSettings = db.prepare(
    `INSERT INTO webhook_settings (endpoint_id, events, secret, secret_key_id, secret_created_at, previous_secret, previous_key_id, previous_expires_at, updated_at)
     VALUES (@endpointId, @events, @secret, @secretKeyId, @secretCreatedAt, @previousSecret, @previousKeyId, @previousExpiresAt, @updatedAt)
     ON CONFLICT (endpoint_id) DO UPDATE SET events = excluded.events, secret = excluded.secret, secret_key_id = excluded.secret_key_id,
       secret_created_at = excluded.secret_created_at, previous_secret = excluded.previous_secret, previous_key_id = excluded.previous_key_id,
       previous_expires_at = excluded.previous_expires_at, updated_at = excluded.updated_at`,
  );
  const allWebhookSettings = db.prepare("SELECT * FROM webhook_settings ORDER BY endpoint_id");
  const webhookSettingsOf = db.prepare("SELECT * FROM webhook_settings WHERE endpoint_id = ?");
  const deleteWebhookSettings = db.prepare("DELETE FROM webhook_settings WHERE endpoint_id = ?");
  const getJob = db.prepare("SELECT * FROM jobs WHERE id = ?");
  // octet_length reads the size from the record header: the output itself is not loaded (length(CAST ...) would).
  const getJobHead = db.prepare(
    `SELECT ${JOB_KEYS.filter((k) => k !== "output")
      .map((k) => JOB_COLUMNS[k])
      .join(", ")}, octet_length(output) AS output_bytes FROM jobs WHERE id = ?`,
  );
  const getJobOutput = db.prepare("SELECT CAST(output AS BLOB) AS output FROM jobs WHERE id = ?");
  const getJobInput = db.prepare("SELECT input FROM jobs WHERE id = ?").pluck();
  const activeJobs = db.prepare("SELECT * FROM jobs WHERE status IN ('IN_QUEUE', 'IN_PROGRESS') ORDER BY seq");
  const chunksAfter = db.prepare("SELECT job_id, seq, data FROM stream_chunks WHERE job_id = ? AND seq > ? ORDER BY seq");
  const lastChunk = db.prepare("SELECT COALESCE(MAX(seq), 0) AS seq FROM stream_chunks WHERE job_id = ?");
  const expired = db.prepare("SELECT id FROM jobs WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?");
  // The console's recent jobs of an endpoint (jobs_endpoint index; seq orders by submission)
  const recentJobIds = db.prepare("SELECT id FROM jobs WHERE endpoint_id = ? ORDER BY seq DESC LIMIT ?");
  const allEndpoints = db.prepare("SELECT * FROM endpoints ORDER BY created_at, id");
  const keyByHash = db.prepare("SELECT * FROM api_keys WHERE hash = ?");
  const deployState = prepareDeployStatements(db);
  const commands = prepareJobCommands(db);
  const pruneLogs = prepareLogPruning(db);

  const applyOne = (o: StoreOp) => {
    switch (o.op) {
      case "insertJob":
        insertJob.run(JOB_KEYS.map((k) => toSql(o.job[k])));
        break;
      case "updateJob": {
        const keys = Object.keys(o.set);
        if (keys.length === 0) break;
        updateFor(keys).run([...keys.map((k) => toSql((o.set as Record<string, unknown>)[k])), o.id]);
        break;
      }
      case "deleteJob":
        deleteChunks.run(o.id);
        deleteJob.run(o.id);
        break;
      case "insertChunk":
        insertChunk.run(o.chunk.jobId, o.chunk.seq, o.chunk.data);
        break;
      case "deleteChunksAfter":
        deleteChunksAfter.run(o.jobId, o.seq);
        break;
      case "insertLog":
        insertLog.run(o.line.endpointId, o.line.workerId, o.line.jobId, o.line.ts, o.line.stream, o.line.text);
        break;
      case "upsertEndpoint":
        upsertEndpoint.run({ ...o.endpoint, resource: JSON.stringify(o.endpoint.resource) });
        break;
      case "deleteEndpoint":
        deleteEndpointChunks.run(o.id);
        deleteEndpointJobs.run(o.id);
        deleteEndpointHistory.run(o.id);
        deleteEndpointLogs.run(o.id);
        deleteEndpointDeliveries.run(o.id);
        deleteWebhookSettings.run(o.id);
        deleteEndpoint.run(o.id);
        break;
      case "addCounters":
        addCounters.run(o.completed, o.failed, o.retried, o.endpointId);
        break;
      case "insertKey":
        insertKey.run(o.key.id, o.key.hash, o.key.userId, JSON.stringify(o.key.scopes), o.key.createdAt, o.key.revokedAt);
        break;
      case "revokeKey":
        revokeKey.run(o.at, o.id);
        break;
      case "deleteKey":
        deleteKey.run(o.id);
        break;
      case "insertWebhook": {
        const w = o.webhook;
        insertWebhook.run(w.id, w.jobId, w.endpointId, w.event, w.url, w.body, w.attempts, w.nextAt, w.createdAt);
        break;
      }
      case "insertWebhookDelivery":
        insertDelivery.run(o.delivery);
        break;
      case "putWebhookSettings":
        putWebhookSettings.run(o.settings);
        break;
      case "pruneWebhookDeliveries":
        pruneDeliveries.run(o.before);
        break;
      case "retryWebhook":
        retryWebhook.run(o.attempts, o.nextAt, o.id);
        break;
      case "deleteWebhook":
        deleteWebhook.run(o.id);
        break;
      default:
        if (isDeployOp(o)) deployState.apply(o);
    }
  };
  const applyAll = db.transaction((ops: StoreOp[]) => {
    for (const o of ops) applyOne(o);
  });

  return {
    ...deployState.reads,
    ...commands,
    async apply(ops) {
      if (ops.length > 0) applyAll(ops.length > 1 ? foldJobOps(ops) : ops);
    },
    async getJob(id) {
      const r = getJob.get(id) as Record<string, unknown> | undefined;
      return r ? rowToJob(r) : undefined;
    },
    async getJobHead(id) {
      const r = getJobHead.get(id) as Record<string, unknown> | undefined;
      if (!r) return undefined;
      return { ...rowToJob({ ...r, output: null }), outputBytes: (r.output_bytes as number | null) ?? null };
    },
    async jobOutput(id) {
      const r = getJobOutput.get(id) as { output: Uint8Array | null } | undefined;
      return r?.output ? Buffer.from(r.output.buffer, r.output.byteOffset, r.output.byteLength) : undefined;
    },
    async jobInput(id) {
      return (getJobInput.get(id) as string | undefined) ?? undefined;
    },
    async activeJobs() {
      return (activeJobs.all() as Record<string, unknown>[]).map(rowToJob);
    },
    async recentJobIds(endpointId, limit, filter) {
      if (!filter) return (recentJobIds.all(endpointId, limit) as Array<{ id: string }>).map((r) => r.id);
      const q = historyStatement(listQuery("jobs", endpointId, limit, filter));
      return (db.prepare(q.text).all(...q.values) as Array<{ id: string }>).map((r) => r.id);
    },
    async archiveJobs(ids, resultExpiredAt, keptUntil) {
      db.transaction(() => {
        for (const id of ids) archiveJob.run(...sqliteStatement(ARCHIVE_JOB, [id, resultExpiredAt, keptUntil]).values);
      })();
    },
    async jobHistory(endpointId, limit, filter) {
      const q = historyStatement(listQuery("job_history", endpointId, limit, filter));
      return (db.prepare(q.text).all(...q.values) as Record<string, unknown>[]).map(rowToHistory);
    },
    async historyJob(endpointId, id) {
      const r = historyJob.get(...sqliteStatement(HISTORY_JOB, [endpointId, id]).values) as Record<string, unknown> | undefined;
      return r ? rowToHistory(r) : undefined;
    },
    async sweepJobHistory(now, limit) {
      return sweepHistory.run(...sqliteStatement(SWEEP_HISTORY, [now, limit]).values).changes;
    },
    async chunksAfter(jobId, seq) {
      return (chunksAfter.all(jobId, seq) as Array<{ job_id: string; seq: number; data: string }>).map((r) => ({
        jobId: r.job_id,
        seq: r.seq,
        data: r.data,
      })) satisfies StreamChunkRow[];
    },
    async lastChunkSeq(jobId) {
      return (lastChunk.get(jobId) as { seq: number }).seq;
    },
    async expiredJobIds(now, limit) {
      return (expired.all(now, limit) as Array<{ id: string }>).map((r) => r.id);
    },
    async endpoints() {
      return (allEndpoints.all() as Record<string, unknown>[]).map(rowToEndpoint);
    },
    async keyByHash(hash) {
      const r = keyByHash.get(hash) as Record<string, unknown> | undefined;
      return r ? rowToKey(r) : undefined;
    },
    async dueWebhooks(now, limit) {
      return (dueWebhooks.all(now, limit) as Record<string, unknown>[]).map(rowToWebhook);
    },
    async pendingWebhooks(jobId) {
      return (pendingWebhooks.all(jobId) as Record<string, unknown>[]).map(rowToWebhook);
    },
    async webhookDeliveries(jobId) {
      return (deliveriesOf.all(jobId) as Record<string, unknown>[]).map(rowToWebhookDelivery);
    },
    async webhookSettings(endpointId) {
      const rows = endpointId === undefined ? allWebhookSettings.all() : webhookSettingsOf.all(endpointId);
      return (rows as Record<string, unknown>[]).map(rowToWebhookSettings);
    },
    async logs(q) {
      const where = ["endpoint_id = ?"];
      const params: SqlValue[] = [q.endpointId];
      if (q.jobId) {
        where.push("job_id = ?");
        params.push(q.jobId);
      }
      if (q.since !== undefined) {
        where.push("ts >= ?");
        params.push(q.since);
      }
      if (q.afterId !== undefined) {
        where.push("seq > ?");
        params.push(q.afterId);
      }
      params.push(q.limit);
      const rows = db.prepare(`SELECT * FROM logs WHERE ${where.join(" AND ")} ORDER BY seq LIMIT ?`).all(params) as Array<Record<string, unknown>>;
      return rows.map(rowToLog);
    },
    async droppedLogNotices(q) {
      // The stream is written into the statement: only then may SQLite use the partial index logs_dropped.
      const where = ["endpoint_id = ?", `stream = '${DROPPED_LOG_STREAM}'`];
      const params: SqlValue[] = [q.endpointId];
      if (q.jobId) {
        where.push("job_id = ?");
        params.push(q.jobId);
      }
      if (q.since !== undefined) {
        where.push("ts >= ?");
        params.push(q.since);
      }
      params.push(q.limit);
      const rows = db.prepare(`SELECT text FROM logs WHERE ${where.join(" AND ")} ORDER BY seq LIMIT ?`).all(params) as Array<{ text: string }>;
      return rows.map((r) => r.text);
    },
    async logBytes(q) {
      return pruneLogs.bytes(q);
    },
    async pruneLogs(q) {
      return pruneLogs.prune(q);
    },
    async close() {
      await checkpointer?.stop();
      // The last connection to close checkpoints what is left and removes the WAL.
      if (db.open) db.close();
    },
  };
}

/**
 * Log retention over SQLite. Every statement walks the logs_endpoint index (endpoint_id, seq) from the endpoint's
 * oldest line and stops where the range ends: its cost is the lines it removes, not the lines kept. octet_length
 * reads a text's size from the record header (a long line's overflow pages are not read).
 */
function prepareLogPruning(db: Database.Database): {
  bytes(q: { endpointId: string; lineOverheadBytes: number; afterSeq: number; limit: number }): { bytes: number; lines: number; lastSeq: number | null };
  prune(q: { endpointId: string; before: number; dropBytes: number; lineOverheadBytes: number; limit: number }): LogPruning;
} {
  const total = db.prepare(
    `SELECT COALESCE(SUM(octet_length(text) + ?), 0) AS bytes, COUNT(*) AS lines, MAX(seq) AS lastSeq
     FROM (SELECT seq, text FROM logs WHERE endpoint_id = ? AND seq > ? ORDER BY seq LIMIT ?)`,
  );
  // Among the oldest `limit` lines only: the range never reads further than what one call may remove.
  const firstRecent = db.prepare("SELECT seq FROM (SELECT seq, ts FROM logs WHERE endpoint_id = ? ORDER BY seq LIMIT ?) WHERE ts >= ? ORDER BY seq LIMIT 1");
  const oldest = db.prepare(
    `SELECT MAX(seq) AS last, COUNT(*) AS n, COALESCE(SUM(octet_length(text) + ?), 0) AS bytes
     FROM (SELECT seq, text FROM logs WHERE endpoint_id = ? AND seq < ? ORDER BY seq LIMIT ?)`,
  );
  // The oldest lines whose running size reaches `dropBytes` (or `limit` lines): where that range ends.
  const sizeBoundary = db.prepare(
    `SELECT seq AS last, rn AS n, total AS bytes FROM (
       SELECT seq, SUM(octet_length(text) + ?) OVER w AS total, ROW_NUMBER() OVER w AS rn
       FROM logs WHERE endpoint_id = ? WINDOW w AS (ORDER BY seq ROWS UNBOUNDED PRECEDING))
     WHERE total >= ? OR rn >= ? LIMIT 1`,
  );
  const removeThrough = db.prepare("DELETE FROM logs WHERE endpoint_id = ? AND seq <= ?");
  const prune = db.transaction((q: { endpointId: string; before: number; dropBytes: number; lineOverheadBytes: number; limit: number }): LogPruning => {
    const { endpointId, lineOverheadBytes: overhead } = q;
    const recent = firstRecent.get(endpointId, q.limit, q.before) as { seq: number } | undefined;
    const aged = oldest.get(overhead, endpointId, recent?.seq ?? Number.MAX_SAFE_INTEGER, q.limit) as { last: number | null; n: number; bytes: number };
    if (aged.last !== null) removeThrough.run(endpointId, aged.last);
    let removedBySize = 0;
    let removedBytes = aged.bytes;
    const left = q.limit - aged.n;
    if (q.dropBytes > removedBytes && left > 0) {
      const sized = (sizeBoundary.get(overhead, endpointId, q.dropBytes - removedBytes, left) ??
        oldest.get(overhead, endpointId, Number.MAX_SAFE_INTEGER, left)) as { last: number | null; n: number; bytes: number };
      if (sized.last !== null) {
        removeThrough.run(endpointId, sized.last);
        removedBySize = sized.n;
        removedBytes += sized.bytes;
      }
    }
    return { removedByAge: aged.n, removedBySize, removedBytes };
  });
  return {
    bytes: (q) => total.get(q.lineOverheadBytes, q.endpointId, q.afterSeq, q.limit) as { bytes: number; lines: number; lastSeq: number | null },
    prune: (q) => prune.immediate(q),
  };
}

function migrate(db: Database.Database, migrations: readonly string[]): void {
  const current = db.pragma("user_version", { simple: true }) as number;
  if (current > migrations.length) {
    throw new UserError(`The data file was written by a newer svc (schema ${current}, this svc knows ${migrations.length})`, {
      hint: "Upgrade svc, or point --data-dir at another directory.",
    });
  }
  for (let version = current; version < migrations.length; version++) {
    db.transaction(() => {
      db.exec(migrations[version]!);
      db.pragma(`user_version = ${version + 1}`);
    })();
  }
}

/**
 * The conditional job commands over SQLite: each one transaction (BEGIN IMMEDIATE, so another process on the same
 * file waits rather than claiming the same job), by this process's clock.
 */
function prepareJobCommands(db: Database.Database): JobCommands {
  const queued = db.prepare(
    "SELECT id FROM jobs WHERE endpoint_id = ? AND status = 'IN_QUEUE' AND (not_before IS NULL OR not_before <= ?) ORDER BY low_priority, seq LIMIT ?",
  );
  const take = db.prepare(
    `UPDATE jobs SET status = 'IN_PROGRESS', lease = ?, worker_id = ?, attempt = attempt + 1, started_at = ?, lease_expires_at = ?
     WHERE id = ? AND status = 'IN_QUEUE' RETURNING *`,
  );
  const extend = db.prepare("UPDATE jobs SET lease_expires_at = ? WHERE lease = ? AND status = 'IN_PROGRESS'");
  const expired = db.prepare("SELECT id FROM jobs WHERE status = 'IN_PROGRESS' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ?");
  const requeue = db.prepare("UPDATE jobs SET status = 'IN_QUEUE', lease = NULL, worker_id = NULL, lease_expires_at = NULL WHERE id = ? RETURNING *");
  const release = db.prepare(
    "UPDATE jobs SET status = 'IN_QUEUE', lease = NULL, worker_id = NULL, lease_expires_at = NULL WHERE id = ? AND lease = ? AND status = 'IN_PROGRESS'",
  );
  const cancel = db.prepare(
    `UPDATE jobs SET status = 'CANCELLED', completed_at = ?, expires_at = ? + ttl_ms, lease = NULL, lease_expires_at = NULL
     WHERE id = ? AND status IN ('IN_QUEUE', 'IN_PROGRESS')`,
  );
  const getJob = db.prepare("SELECT * FROM jobs WHERE id = ?");
  const completes = new Map<string, Database.Statement>();
  const completeFor = (keys: string[]) => {
    const signature = keys.join(",");
    let statement = completes.get(signature);
    if (!statement) {
      const sets = [...keys.map((k) => `${JOB_COLUMNS[k as keyof JobRow]} = ?`), "lease = NULL", "lease_expires_at = NULL"];
      statement = db.prepare(`UPDATE jobs SET ${sets.join(", ")} WHERE id = ? AND lease = ? AND status = 'IN_PROGRESS'`);
      completes.set(signature, statement);
    }
    return statement;
  };
  const claim = db.transaction((endpointId: string, workerId: string, max: number, leaseMs: number) => {
    const now = Date.now();
    const ids = (queued.all(endpointId, now, max) as Array<{ id: string }>).map((r) => r.id);
    return ids.map((id) => {
      const r = take.get(randomUUID(), workerId, now, now + leaseMs, id) as Record<string, unknown>;
      return { ...rowToJob(r), leaseExpiresAt: r.lease_expires_at as number };
    });
  });
  const extendAll = db.transaction((leases: string[], until: number) => leases.filter((lease) => extend.run(until, lease).changes === 1));
  const requeueAll = db.transaction((limit: number) =>
    (expired.all(Date.now(), limit) as Array<{ id: string }>).map((r) => rowToJob(requeue.get(r.id) as Record<string, unknown>)),
  );
  return {
    async claim({ endpointId, workerId, max, leaseMs }) {
      return claim.immediate(endpointId, workerId, max, leaseMs);
    },
    async completeIfLeased(jobId, lease, set) {
      const keys = Object.keys(set).filter((k) => k in JOB_COLUMNS && k !== "id" && k !== "lease");
      const values = keys.map((k) => toSql((set as Record<string, unknown>)[k]));
      return completeFor(keys).run([...values, jobId, lease]).changes === 1;
    },
    async extendLeases(leases, leaseMs) {
      const extended = new Set(extendAll.immediate(leases, Date.now() + leaseMs));
      return { extended: leases.filter((l) => extended.has(l)), lost: leases.filter((l) => !extended.has(l)) };
    },
    async requeueExpired(limit) {
      return requeueAll.immediate(limit);
    },
    async releaseLease(jobId, lease) {
      return release.run(jobId, lease).changes === 1;
    },
    async cancelJob(jobId, at) {
      cancel.run(at, at, jobId);
      const r = getJob.get(jobId) as Record<string, unknown> | undefined;
      return r ? rowToJob(r) : undefined;
    },
    async now() {
      return Date.now();
    },
  };
}
