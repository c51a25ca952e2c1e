// The usage table, for both stores: appended to their migrations (schema/sqlite.ts, schema/postgres.ts).
// Imports nothing, so the stores' schemas never import the code that uses it. One row per user, endpoint, hour
// (epoch ms of its start) and GPU type ('' for a worker without GPUs); each write adds to it.

/** Appended to SQLITE_MIGRATIONS (schema/sqlite.ts). */
export const USAGE_MIGRATION = `
  CREATE TABLE usage_hours (
    user_id TEXT NOT NULL, endpoint_id TEXT NOT NULL, hour INTEGER NOT NULL, gpu_type TEXT NOT NULL,
    worker_seconds REAL NOT NULL, gpu_seconds REAL NOT NULL, jobs INTEGER NOT NULL,
    PRIMARY KEY (user_id, hour, endpoint_id, gpu_type));`;

/** Appended to the PostgreSQL migrations. */
export const PG_USAGE_MIGRATION = `
  CREATE TABLE usage_hours (
    user_id text NOT NULL, endpoint_id text NOT NULL, hour bigint NOT NULL, gpu_type text NOT NULL,
    worker_seconds double precision NOT NULL, gpu_seconds double precision NOT NULL, jobs bigint NOT NULL,
    PRIMARY KEY (user_id, hour, endpoint_id, gpu_type));`;
