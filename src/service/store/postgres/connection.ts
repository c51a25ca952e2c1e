// How svc talks to PostgreSQL through node-postgres: bigint columns read as numbers, parameters made acceptable
// (no NUL in text), each statement prepared once per connection by its text, a dropped connection given the
// SQLSTATE that marks the store unavailable, and transactions on one pooled connection. The store's modules
// (index.ts, its batches, logs and job commands) query through what this gives them.

import pg from "pg";
import type { Queryable } from "../queryable.js";

const INT8_OID = 20;

/** Epoch-ms columns are bigint; every value svc stores fits a double exactly, so they are read as numbers. */
export const TYPES = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
};

/**
 * The settings of the connections that keep their plans (`plannedOnce` in openPostgresStore): no sequential scans,
 * so that a plan made while a table was small still reads it by index once it is large.
 */
export const PLANNED_ONCE_SETTINGS = "-c enable_seqscan=off";

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

/** A pool or a pooled connection as a Queryable: parameters cleaned (pgParams), statements prepared by name. */
export function safe(target: pg.Pool | pg.PoolClient): Queryable {
  return { query: (text, values) => target.query({ text, values: pgParams(values), name: statementName(text) }) as never };
}

/** node-postgres reports a dropped connection without a SQLSTATE: give it one, so storageCause sees "unavailable". */
export function withConnectionCode(err: unknown): unknown {
  if (err instanceof Error && (err as { code?: unknown }).code === undefined && /connection|terminat|timeout|ECONN/i.test(err.message)) {
    (err as { code?: string }).code = "08006";
  }
  return err;
}

/** The `options` parameter of a connection URL, if it has one. */
export function connectionOptions(url: string): string | undefined {
  try {
    return new URL(url).searchParams.get("options") ?? undefined;
  } catch {
    // Not a URL pg's own parser would refuse either (a key=value string): it has no options for this to keep.
    return undefined;
  }
}

/** A query on `target`, a dropped connection's error given its SQLSTATE (withConnectionCode). */
export async function queryOn<R extends pg.QueryResultRow = Record<string, unknown>>(target: Queryable, text: string, values?: unknown[]) {
  try {
    return await target.query<R>(text, values);
  } catch (err) {
    throw withConnectionCode(err);
  }
}

/** Run `body` in one transaction on one of `pool`'s connections; a connection the failure broke is not put back. */
export async function transactionOn<T>(pool: pg.Pool, body: (client: Queryable) => Promise<T>): Promise<T> {
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
}
