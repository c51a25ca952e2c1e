// The SQLite schema: numbered migrations (PRAGMA user_version), applied by the store at open
// (store/sqlite.ts). Each feature's tables come from its own schema module, in order here.

import { DEPLOY_MIGRATION, RELEASES_MIGRATION } from "../store/deploy-sqlite.js";
import { MANAGEMENT_MIGRATION, MANAGEMENT_MIGRATION_2, REGISTRY_AUTH_MIGRATION, TEMPLATE_SHM_MIGRATION } from "../management/store.js";
import { SECRETS_MIGRATION } from "../secrets/store.js";
import { IDEMPOTENCY_MIGRATION } from "../idempotency/schema.js";
import { USAGE_MIGRATION } from "../metrics/usage-schema.js";
import { WEBHOOKS_MIGRATION } from "../webhooks/schema.js";
import { VOLUME_KEYS_MIGRATION } from "../volumes/schema.js";
import { DROPPED_LOG_STREAM } from "../store/types.js";

/** Migration N brings the schema from version N to N+1. Append only. */
export const SQLITE_MIGRATIONS: readonly string[] = [
  `CREATE TABLE endpoints (
     id TEXT PRIMARY KEY, user_id TEXT NOT NULL, app TEXT NOT NULL, env TEXT NOT NULL, name TEXT NOT NULL,
     type TEXT NOT NULL, resource TEXT NOT NULL, artifact_path TEXT NOT NULL, revision TEXT NOT NULL,
     created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
     completed INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0, retried INTEGER NOT NULL DEFAULT 0);
   CREATE INDEX endpoints_app_env ON endpoints (user_id, app, env);
   CREATE TABLE jobs (
     seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, endpoint_id TEXT NOT NULL,
     status TEXT NOT NULL, input TEXT NOT NULL, function TEXT, webhook TEXT, sync INTEGER NOT NULL,
     low_priority INTEGER NOT NULL, created_at INTEGER NOT NULL, started_at INTEGER, completed_at INTEGER,
     output TEXT, error TEXT, error_type TEXT, error_stack TEXT, attempt INTEGER NOT NULL, retried INTEGER NOT NULL,
     execution_timeout_ms INTEGER, ttl_ms INTEGER NOT NULL, expires_at INTEGER, lease TEXT, worker_id TEXT,
     stream_cursor INTEGER NOT NULL DEFAULT 0);
   CREATE INDEX jobs_active ON jobs (status) WHERE status IN ('IN_QUEUE', 'IN_PROGRESS');
   CREATE INDEX jobs_expires ON jobs (expires_at) WHERE expires_at IS NOT NULL;
   CREATE INDEX jobs_endpoint ON jobs (endpoint_id);
   CREATE TABLE stream_chunks (job_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (job_id, seq));
   CREATE TABLE logs (
     seq INTEGER PRIMARY KEY AUTOINCREMENT, endpoint_id TEXT NOT NULL, worker_id TEXT NOT NULL, job_id TEXT,
     ts INTEGER NOT NULL, stream TEXT NOT NULL, text TEXT NOT NULL);
   CREATE INDEX logs_endpoint ON logs (endpoint_id, seq);
   CREATE INDEX logs_job ON logs (job_id, seq) WHERE job_id IS NOT NULL;
   CREATE TABLE api_keys (
     id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL, scopes TEXT NOT NULL,
     created_at INTEGER NOT NULL, revoked_at INTEGER);`,
  // Apps, environments and uploaded builds
  DEPLOY_MIGRATION,
  // Network volumes, templates, REST endpoints, key names and expiry
  MANAGEMENT_MIGRATION,
  // A job's own retry limit (null: its endpoint's)
  `ALTER TABLE jobs ADD COLUMN max_retries INTEGER;`,
  // Restart counters of REST endpoints
  MANAGEMENT_MIGRATION_2,
  // secrets of users, sealed
  SECRETS_MIGRATION,
  // releases of builds into environments, with their outcome
  RELEASES_MIGRATION,
  // when a running job's lease runs out, for the conditional job commands (JobCommands)
  `ALTER TABLE jobs ADD COLUMN lease_expires_at INTEGER;`,
  // webhooks to deliver, written with the job's final state (the outbox)
  `CREATE TABLE webhook_outbox (
     id TEXT PRIMARY KEY, job_id TEXT NOT NULL, url TEXT NOT NULL, body TEXT NOT NULL, attempts INTEGER NOT NULL,
     next_at INTEGER NOT NULL, created_at INTEGER NOT NULL);
   CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at);`,
  // which job each Idempotency-Key made
  IDEMPOTENCY_MIGRATION,
  // signed webhooks: events, a delivery log, each endpoint's filter and signing secrets
  WEBHOOKS_MIGRATION,
  // a running job's latest progress, a retry's backoff, and the end of a job's ttl (counted from submission)
  `ALTER TABLE jobs ADD COLUMN progress TEXT;
   ALTER TABLE jobs ADD COLUMN not_before INTEGER;
   ALTER TABLE jobs ADD COLUMN deadline_at INTEGER;`,
  // access keys of the S3 API on network volumes, their secrets sealed
  VOLUME_KEYS_MIGRATION,
  // usage by user, endpoint, hour and GPU type (metrics/usage.ts)
  USAGE_MIGRATION,
  // the service's notices of log lines dropped over the quotas, found without reading the lines (droppedLogNotices)
  `CREATE INDEX logs_dropped ON logs (endpoint_id, seq) WHERE stream = '${DROPPED_LOG_STREAM}';`,
  // the /dev/shm size a template's image is allowed
  TEMPLATE_SHM_MIGRATION,
  // users' container registry credentials, sealed, and the one a template's image is pulled with
  REGISTRY_AUTH_MIGRATION,
  // the network volume a job's s3Config named, whose key its worker gets
  `ALTER TABLE jobs ADD COLUMN s3_bucket TEXT;`,
  // a load-balanced endpoint's requests in its usage
  `ALTER TABLE usage_hours ADD COLUMN requests INTEGER NOT NULL DEFAULT 0;`,
  // the job history: a job's record kept after its result expired (store: archiveJobs)
  `CREATE TABLE job_history (
     id TEXT PRIMARY KEY, endpoint_id TEXT NOT NULL, status TEXT NOT NULL, function TEXT, sync INTEGER NOT NULL,
     created_at INTEGER NOT NULL, started_at INTEGER, completed_at INTEGER, error TEXT, error_type TEXT,
     attempt INTEGER NOT NULL, retried INTEGER NOT NULL, worker_id TEXT, result_expired_at INTEGER NOT NULL,
     kept_until INTEGER NOT NULL);
   CREATE INDEX job_history_endpoint ON job_history (endpoint_id, created_at);
   CREATE INDEX job_history_kept ON job_history (kept_until);`,
];
