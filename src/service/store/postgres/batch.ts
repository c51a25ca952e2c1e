// A batch of the engine's writes as PostgreSQL statements, as few as their order allows: consecutive job inserts,
// job updates, stream chunks, logs and endpoint counters as data-modifying CTEs of one statement, over `unnest`
// arrays or one JSON parameter, so that a batch costs round trips, not rows. The ops that must keep their place
// are barrier-statements.ts's.

import { foldJobOps } from "../sqlite.js";
import { JOB_COLUMNS, JOB_KEYS } from "../rows.js";
import type { JobRow, LogRow, StoreOp, StreamChunkRow } from "../types.js";
import { barrierStatements } from "./barrier-statements.js";
import { pgText, type Statement } from "./connection.js";

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
export function opsStatements(ops: StoreOp[], options: { adopt?: boolean } = {}): Statement[] {
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
export function jobInsert(jobs: JobRow[]): Statement {
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
