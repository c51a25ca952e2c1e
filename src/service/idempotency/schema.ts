// The idempotency keys' table, for both stores: appended to their migrations (schema/sqlite.ts,
// schema/postgres.ts). Imports nothing, so the stores' schemas never import the store code that uses it.

/** Appended to SQLITE_MIGRATIONS (schema/sqlite.ts). */
export const IDEMPOTENCY_MIGRATION = `
  CREATE TABLE idempotency_keys (
    user_id TEXT NOT NULL, endpoint_id TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL,
    job_id TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (user_id, endpoint_id, key));
  CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);`;

/** Appended to the PostgreSQL migrations. */
export const PG_IDEMPOTENCY_MIGRATION = `
  CREATE TABLE idempotency_keys (
    user_id text NOT NULL, endpoint_id text NOT NULL, key text NOT NULL, request_hash text NOT NULL,
    job_id text NOT NULL, created_at bigint NOT NULL, PRIMARY KEY (user_id, endpoint_id, key));
  CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);`;
