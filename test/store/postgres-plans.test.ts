// The PostgreSQL store's batch statements stay on the jobs table's indexes however the table grew since they were
// first prepared. A generic plan made while the table was nearly empty scanned the whole table on every batch
// update, so each batch slowed in step with the number of jobs kept.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { batchStatements, openPostgresStore, PLANNED_ONCE_SETTINGS, type PostgresStore } from "../../src/service/store/postgres/index.js";
import { PG_MIGRATIONS } from "../../src/service/schema/postgres.js";
import type { JobRow } from "../../src/service/store/types.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";

const unavailable = postgresUnavailable();
if (unavailable) console.warn(`PostgreSQL plan tests skipped: ${unavailable}`);

function job(id: string): JobRow {
  return {
    id,
    endpointId: "e1",
    status: "IN_QUEUE",
    input: "{}",
    function: null,
    webhook: null,
    sync: false,
    lowPriority: false,
    createdAt: Date.now(),
    startedAt: null,
    completedAt: null,
    output: null,
    error: null,
    errorType: null,
    errorStack: null,
    attempt: 0,
    retried: 0,
    executionTimeoutMs: 60_000,
    ttlMs: 60_000,
    expiresAt: null,
    lease: null,
    workerId: null,
    streamCursor: 0,
    maxRetries: null,
  };
}

describe.skipIf(unavailable !== undefined)("PostgreSQL store plans", () => {
  let server: TestPostgres;
  let store: PostgresStore;
  beforeAll(async () => {
    server = await startPostgres();
    // One connection: every statement below is prepared and planned on the same one, as a busy replica's are.
    store = await openPostgresStore(await server.createDatabase(), PG_MIGRATIONS, { maxConnections: 1 });
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  /** Rows of the jobs table read by sequential scans and rows updated so far (this connection's counts flushed first). */
  async function tableCounts(): Promise<{ scanned: number; updated: number }> {
    await store.pool.query("SELECT pg_stat_force_next_flush()");
    const { rows } = await store.pool.query<{ scanned: string; updated: string }>(
      "SELECT seq_tup_read AS scanned, n_tup_upd AS updated FROM pg_stat_user_tables WHERE relname = 'jobs'",
    );
    return { scanned: Number(rows[0]!.scanned), updated: Number(rows[0]!.updated) };
  }

  async function tuplesScanned(): Promise<number> {
    return (await tableCounts()).scanned;
  }

  /**
   * The rows sequential scans read once `updates` more rows were updated: the batches run on the store's other
   * connections, whose counts reach the statistics when those connections flush them (within about 10 s idle).
   */
  async function scannedOnceUpdated(before: { updated: number }, updates: number): Promise<number> {
    for (const deadline = Date.now() + 20_000; ; ) {
      const now = await tableCounts();
      if (now.updated >= before.updated + updates) return now.scanned;
      if (Date.now() > deadline) throw new Error(`the statistics never counted ${updates} updates`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  const finish = (ids: string[]) =>
    store.apply(ids.map((id) => ({ op: "updateJob" as const, id, set: { status: "COMPLETED" as const, output: "1", completedAt: Date.now() } })));

  it("updates a batch of jobs through the id index after the table grew from nearly empty", async () => {
    // While the table is nearly empty, the batch update runs often enough for PostgreSQL to settle on one plan.
    await store.apply(["a", "b", "c", "d"].map((id) => ({ op: "insertJob" as const, job: job(id) })));
    for (let i = 0; i < 8; i++) await finish(["a", "b"]);

    const kept = 20_000;
    for (let start = 0; start < kept; start += 1000) {
      await store.apply(Array.from({ length: 1000 }, (_, i) => ({ op: "insertJob" as const, job: job(`kept-${start + i}`) })));
    }
    const before = await tableCounts();
    for (let i = 0; i < 5; i++) await finish([`kept-${i * 2}`, `kept-${i * 2 + 1}`]);
    const scanned = (await scannedOnceUpdated(before, 10)) - before.scanned;
    // By index: a handful of rows per batch. A sequential scan reads all 20 004 jobs each time.
    expect(scanned).toBeLessThan(kept);
    const { rows } = await store.pool.query<{ status: string; n: string }>(
      "SELECT status, count(*) AS n FROM jobs WHERE id LIKE 'kept-%' GROUP BY status ORDER BY status",
    );
    expect(rows.map((r) => [r.status, Number(r.n)])).toEqual([
      ["COMPLETED", 10],
      ["IN_QUEUE", kept - 10],
    ]);
  }, 60_000);
  it("keeps a batch of takes and results on the id index with a plan made while the table was nearly empty", async () => {
    // The statement a batch of job updates becomes, prepared on a connection set as the store's planned-once ones
    // are, and planned once (generic) while the table holds a few jobs, as a service's first batches are.
    const [update] = batchStatements(
      ["p1", "p2"].map((id) => ({ op: "updateJob" as const, id, set: { status: "IN_PROGRESS" as const, lease: `lease-${id}`, workerId: "w", startedAt: 1 } })),
    );
    expect(update!.planOnce).toBe(true);
    // A database of its own: its jobs table starts empty whatever the tests before it left.
    const url = await server.createDatabase();
    const own = await openPostgresStore(url, PG_MIGRATIONS, { maxConnections: 1 });
    const client = new pg.Client({ connectionString: url, options: PLANNED_ONCE_SETTINGS });
    await client.connect();
    try {
      await own.apply(["p1", "p2", "p3"].map((id) => ({ op: "insertJob" as const, job: job(id) })));
      await client.query("SET plan_cache_mode = force_generic_plan");
      await client.query(`PREPARE batch AS ${update!.text}`);
      // The batch's arrays as literals (EXECUTE takes no bound parameters).
      const args = update!.values.map((v) => client.escapeLiteral(`{${(v as unknown[]).map((x) => (x === null ? "NULL" : `"${String(x)}"`)).join(",")}}`));
      await client.query(`EXECUTE batch(${args.join(", ")})`);
      // The table grows: the plan kept is the one made above.
      for (let start = 0; start < 20_000; start += 2000) {
        await own.apply(Array.from({ length: 2000 }, (_, i) => ({ op: "insertJob" as const, job: job(`grown-${start + i}`) })));
      }
      const { rows } = await client.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (FORMAT JSON) EXECUTE batch(${args.join(", ")})`);
      const plan = JSON.stringify(rows[0]!["QUERY PLAN"]);
      expect(plan).not.toContain('"Node Type":"Seq Scan"');
      expect(plan).toMatch(/"Node Type":"(Index Scan|Bitmap Index Scan)"/);
    } finally {
      await client.end();
      await own.close();
    }
  }, 60_000);

  it("finds the jobs whose retention ran out through the expiry index, not by reading every kept job", async () => {
    const now = Date.now();
    // Large enough for the planner, which has no statistics yet, to prefer reading the table to the index.
    const kept = 250_000;
    for (let start = 0; start < kept; start += 5000) {
      await store.apply(
        Array.from({ length: 5000 }, (_, i) => ({
          op: "insertJob" as const,
          job: { ...job(`later-${start + i}`), status: "COMPLETED" as const, expiresAt: now + 3_600_000 },
        })),
      );
    }
    await store.apply([{ op: "insertJob", job: { ...job("gone"), status: "COMPLETED", expiresAt: now - 1 } }]);
    const before = await tuplesScanned();
    expect(await store.expiredJobIds(now, 5000)).toEqual(["gone"]);
    // The retention sweep asks every 10 s; with a million jobs kept, reading them all took 116 ms each time.
    expect((await tuplesScanned()) - before).toBeLessThan(kept);
  }, 60_000);

  it("sweeps logs and counts their drop notices through the logs indexes, not by reading every kept line", async () => {
    // Rows read, by sequential scans and through indexes.
    const logsScanned = async () => {
      await store.pool.query("SELECT pg_stat_force_next_flush()");
      const { rows } = await store.pool.query<{ scanned: string }>(
        "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) AS scanned FROM pg_stat_user_tables WHERE relname = 'logs'",
      );
      return Number(rows[0]!.scanned);
    };
    const kept = 200_000;
    const now = Date.now();
    for (let start = 0; start < kept; start += 5000) {
      await store.apply(
        Array.from({ length: 5000 }, (_, i) => ({
          op: "insertLog" as const,
          line: { ts: now, endpointId: "e1", workerId: "w1", jobId: null, stream: "stdout", text: `line ${start + i}` },
        })),
      );
    }
    await store.apply([
      { op: "insertLog", line: { ts: now, endpointId: "e1", workerId: "w1", jobId: null, stream: "dropped", text: "[svc] 5 log lines dropped: x" } },
    ]);
    const before = await logsScanned();
    expect(await store.droppedLogNotices!({ endpointId: "e1", limit: 100 })).toEqual(["[svc] 5 log lines dropped: x"]);
    // Nothing past the age: one look at the oldest line. Then a small size excess: the oldest line goes.
    expect(await store.pruneLogs!({ endpointId: "e1", before: now - 1, dropBytes: 0, lineOverheadBytes: 100, limit: 5000 })).toMatchObject({
      removedByAge: 0,
      removedBySize: 0,
    });
    expect(await store.pruneLogs!({ endpointId: "e1", before: now - 1, dropBytes: 1, lineOverheadBytes: 100, limit: 5000 })).toMatchObject({
      removedBySize: 1,
    });
    expect((await store.logBytes!({ endpointId: "e1", lineOverheadBytes: 100, afterSeq: 0, limit: 5000 })).lines).toBe(5000);
    // About the 5,000 lines measured; the notice, the age's and the size's ends are a few rows each.
    expect((await logsScanned()) - before).toBeLessThan(10_000);
  }, 120_000);
});
