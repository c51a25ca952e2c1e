// The one query interface of the PostgreSQL stores: the main store's pool and transactions provide it, and each
// feature's PostgreSQL store (idempotency, usage, volume keys, artifacts, the cluster's tables) queries through it.

import type pg from "pg";

/** What the store's modules query through: a pool or a transaction's client, with parameters made acceptable. */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}
