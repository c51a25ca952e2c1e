// The volume access keys' table, for both stores: appended to their migrations (schema/sqlite.ts,
// schema/postgres.ts). Imports nothing, so the stores' schemas never import the store code that uses it.

/** Appended to SQLITE_MIGRATIONS (schema/sqlite.ts). */
export const VOLUME_KEYS_MIGRATION = `
  CREATE TABLE volume_access_keys (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL, name TEXT, read_only INTEGER NOT NULL, volume_ids TEXT,
    sealed BLOB NOT NULL, key_id TEXT NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER);
  CREATE INDEX volume_access_keys_user ON volume_access_keys (user_id);`;

/** Appended to PG_MIGRATIONS (schema/postgres.ts). */
export const PG_VOLUME_KEYS_MIGRATION = `
  CREATE TABLE volume_access_keys (
    id text PRIMARY KEY, user_id text NOT NULL, name text, read_only boolean NOT NULL, volume_ids text,
    sealed bytea NOT NULL, key_id text NOT NULL, created_at bigint NOT NULL, revoked_at bigint);
  CREATE INDEX volume_access_keys_user ON volume_access_keys (user_id);`;
