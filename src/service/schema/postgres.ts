// The PostgreSQL schema: numbered migrations, applied once by whichever replica starts first (the store's
// `migrate`, store/postgres/migrate.ts). Each feature's tables come from its own schema module, in order here.
//
// Times are epoch milliseconds (bigint) as in the SQLite store, so rows read the same from both. Lease expiry is
// compared with the database's clock (svc_now_ms), never a replica's: replicas' clocks may disagree.

import { PG_IDEMPOTENCY_MIGRATION } from "../idempotency/schema.js";
import { PG_USAGE_MIGRATION } from "../metrics/usage-schema.js";
import { PG_WEBHOOKS_MIGRATION } from "../webhooks/schema.js";
import { PG_VOLUME_KEYS_MIGRATION } from "../volumes/schema.js";
import { DROPPED_LOG_STREAM } from "../store/types.js";

/** Migration N brings the schema from version N to N+1. Append only. */
export const PG_MIGRATIONS: readonly string[] = [
  `CREATE FUNCTION svc_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
     $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
   CREATE TABLE endpoints (
     id text PRIMARY KEY, user_id text NOT NULL, app text NOT NULL, env text NOT NULL, name text NOT NULL,
     type text NOT NULL, resource text NOT NULL, artifact_path text NOT NULL, revision text NOT NULL,
     created_at bigint NOT NULL, updated_at bigint NOT NULL,
     completed bigint NOT NULL DEFAULT 0, failed bigint NOT NULL DEFAULT 0, retried bigint NOT NULL DEFAULT 0);
   CREATE INDEX endpoints_app_env ON endpoints (user_id, app, env);
   CREATE TABLE jobs (
     seq bigserial PRIMARY KEY, id text NOT NULL UNIQUE, endpoint_id text NOT NULL,
     status text NOT NULL, input text NOT NULL, function text, webhook text, sync boolean NOT NULL,
     low_priority boolean NOT NULL, created_at bigint NOT NULL, started_at bigint, completed_at bigint,
     output text, error text, error_type text, error_stack text, attempt integer NOT NULL, retried integer NOT NULL,
     execution_timeout_ms bigint, ttl_ms bigint NOT NULL, expires_at bigint, lease text, worker_id text,
     stream_cursor bigint NOT NULL DEFAULT 0, max_retries integer, lease_expires_at bigint);
   CREATE INDEX jobs_active ON jobs (status) WHERE status IN ('IN_QUEUE', 'IN_PROGRESS');
   CREATE INDEX jobs_queue ON jobs (endpoint_id, low_priority, seq) WHERE status = 'IN_QUEUE';
   CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE status = 'IN_PROGRESS';
   CREATE UNIQUE INDEX jobs_lease ON jobs (lease) WHERE lease IS NOT NULL;
   CREATE INDEX jobs_expires ON jobs (expires_at) WHERE expires_at IS NOT NULL;
   CREATE INDEX jobs_endpoint ON jobs (endpoint_id, seq);
   CREATE TABLE stream_chunks (job_id text NOT NULL, seq bigint NOT NULL, data text NOT NULL, PRIMARY KEY (job_id, seq));
   CREATE TABLE logs (
     seq bigserial PRIMARY KEY, endpoint_id text NOT NULL, worker_id text NOT NULL, job_id text,
     ts bigint NOT NULL, stream text NOT NULL, text text NOT NULL);
   CREATE INDEX logs_endpoint ON logs (endpoint_id, seq);
   CREATE INDEX logs_job ON logs (job_id, seq) WHERE job_id IS NOT NULL;
   CREATE TABLE api_keys (
     id text PRIMARY KEY, hash text NOT NULL UNIQUE, user_id text NOT NULL, scopes text NOT NULL,
     created_at bigint NOT NULL, revoked_at bigint, name text, expires_at bigint);
   CREATE TABLE apps (user_id text NOT NULL, name text NOT NULL, created_at bigint NOT NULL, PRIMARY KEY (user_id, name));
   CREATE TABLE environments (
     user_id text NOT NULL, app text NOT NULL, name text NOT NULL, build_id text, created_at bigint NOT NULL,
     activated_at bigint, PRIMARY KEY (user_id, app, name));
   CREATE TABLE builds (
     id text NOT NULL, user_id text NOT NULL, app text NOT NULL, size bigint NOT NULL, fingerprint text NOT NULL,
     manifest text NOT NULL, path text NOT NULL, created_at bigint NOT NULL, PRIMARY KEY (user_id, id));
   CREATE TABLE releases (
     user_id text NOT NULL, app text NOT NULL, env text NOT NULL, id text NOT NULL, started_at bigint NOT NULL,
     seq bigserial, record text NOT NULL, PRIMARY KEY (user_id, app, env, id));
   CREATE INDEX releases_recent ON releases (user_id, app, env, started_at);
   CREATE TABLE network_volumes (
     id text PRIMARY KEY, user_id text NOT NULL, name text NOT NULL, size bigint NOT NULL,
     data_center text NOT NULL, type text NOT NULL, created_at bigint NOT NULL);
   CREATE INDEX network_volumes_user ON network_volumes (user_id);
   CREATE TABLE templates (
     id text PRIMARY KEY, user_id text NOT NULL, name text NOT NULL, image_name text NOT NULL, env text NOT NULL,
     container_disk_gb integer NOT NULL, created_at bigint NOT NULL);
   CREATE INDEX templates_user ON templates (user_id);
   CREATE TABLE rest_endpoints (id text PRIMARY KEY, user_id text NOT NULL, spec text NOT NULL, generation integer NOT NULL DEFAULT 0);
   CREATE TABLE secrets (
     user_id text NOT NULL, app text NOT NULL, env text NOT NULL, name text NOT NULL, sealed bytea NOT NULL,
     key_id text NOT NULL, created_at bigint NOT NULL, updated_at bigint NOT NULL, PRIMARY KEY (user_id, app, env, name));`,
  // Duties one replica runs for all (cluster/leader.ts): who holds each, until when by the database's clock.
  `CREATE TABLE svc_leases (name text PRIMARY KEY, holder text NOT NULL, acquired_at bigint NOT NULL, expires_at bigint NOT NULL);`,
  // Rate-limit windows counted across replicas (cluster/shared-rate-limiter.ts): each user's current window.
  `CREATE TABLE svc_rate_windows (user_id text NOT NULL, window_name text NOT NULL, started_at bigint NOT NULL,
     length_ms bigint NOT NULL, count bigint NOT NULL, PRIMARY KEY (user_id, window_name));`,
  // Build artifacts every replica can fetch (artifacts.ts): 1 MiB parts, and a row once all parts are in.
  `CREATE TABLE svc_artifact_parts (sha256 text NOT NULL, part integer NOT NULL, data bytea NOT NULL, PRIMARY KEY (sha256, part));
   CREATE TABLE svc_artifacts (sha256 text PRIMARY KEY, size bigint NOT NULL, parts integer NOT NULL, created_at bigint NOT NULL);`,
  // Where a lease's holder answers (the replica that serves jobs tells the others where to send them).
  `ALTER TABLE svc_leases ADD COLUMN address text;`,
  // Webhooks to deliver, written with the job's final state (the outbox).
  `CREATE TABLE webhook_outbox (
     id text PRIMARY KEY, job_id text NOT NULL, url text NOT NULL, body text NOT NULL, attempts integer NOT NULL,
     next_at bigint NOT NULL, created_at bigint NOT NULL);
   CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at);`,
  // Every replica hears of a configuration or key change at its commit (cluster/change-feed.ts): one notice per
  // statement, and PostgreSQL sends one per transaction of identical ones. An endpoint's counters, bumped by every
  // batch of results, are not configuration.
  `CREATE FUNCTION svc_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     PERFORM pg_notify('svc_changes', json_build_object('t', TG_ARGV[0])::text);
     RETURN NULL;
   END $$;
   CREATE TRIGGER svc_changed AFTER INSERT OR DELETE OR UPDATE OF user_id, app, env, name, type, resource, artifact_path, revision, updated_at
     ON endpoints FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('config');
   CREATE TRIGGER svc_changed AFTER INSERT OR UPDATE OR DELETE ON apps FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('config');
   CREATE TRIGGER svc_changed AFTER INSERT OR UPDATE OR DELETE ON environments FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('config');
   CREATE TRIGGER svc_changed AFTER INSERT OR UPDATE OR DELETE ON network_volumes FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('config');
   CREATE TRIGGER svc_changed AFTER INSERT OR UPDATE OR DELETE ON templates FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('config');
   CREATE TRIGGER svc_changed AFTER INSERT OR UPDATE OR DELETE ON rest_endpoints FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('config');
   CREATE TRIGGER svc_changed AFTER INSERT OR UPDATE OR DELETE ON secrets FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('config');
   CREATE TRIGGER svc_changed AFTER INSERT OR UPDATE OR DELETE ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('keys');`,
  // `/run` jobs a replica that does not serve jobs inserted, until the one that does adopts them (engine/handoff.ts).
  // A table of its own, not a column of jobs: clearing a mark in jobs rewrote the whole row and every index of it.
  // `adopting` names the lease's holder when that holder adopts hand-offs: an older svc taking the lease during a
  // rolling upgrade leaves the name of the holder before it, which is not its own, and followers pass /run on.
  `CREATE TABLE job_handoffs (job_id text PRIMARY KEY, replica text NOT NULL);
   ALTER TABLE svc_leases ADD COLUMN adopting text;`,
  // Which job each Idempotency-Key made (idempotency/).
  PG_IDEMPOTENCY_MIGRATION,
  // Signed webhooks: events, a delivery log, each endpoint's filter and signing secrets (webhooks/schema.ts).
  PG_WEBHOOKS_MIGRATION,
  // A running job's latest progress, a retry's backoff, and the end of a job's ttl (counted from submission).
  `ALTER TABLE jobs ADD COLUMN progress text, ADD COLUMN not_before bigint, ADD COLUMN deadline_at bigint;`,
  // Access keys of the S3 API on network volumes, their secrets sealed
  PG_VOLUME_KEYS_MIGRATION,
  // Usage by user, endpoint, hour and GPU type (metrics/usage.ts).
  PG_USAGE_MIGRATION,
  // The service's notices of log lines dropped over the quotas, found without reading the lines (droppedLogNotices).
  `CREATE INDEX logs_dropped ON logs (endpoint_id, seq) WHERE stream = '${DROPPED_LOG_STREAM}';`,
  // The /dev/shm size a template's image is allowed (null: the engine's default).
  `ALTER TABLE templates ADD COLUMN shm_size_mb integer;`,
  // Users' container registry credentials, sealed, and the one a template's image is pulled with; every replica
  // hears of a change as of the other configuration tables.
  `CREATE TABLE registry_auths (
     id text PRIMARY KEY, user_id text NOT NULL, name text NOT NULL, sealed bytea NOT NULL, key_id text NOT NULL,
     created_at bigint NOT NULL);
   CREATE UNIQUE INDEX registry_auths_user_name ON registry_auths (user_id, name);
   ALTER TABLE templates ADD COLUMN container_registry_auth_id text;
   CREATE TRIGGER svc_changed AFTER INSERT OR UPDATE OR DELETE ON registry_auths FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('config');`,
  // The network volume a job's s3Config named, whose key its worker gets.
  `ALTER TABLE jobs ADD COLUMN s3_bucket text;`,
  // A load-balanced endpoint's requests in its usage.
  `ALTER TABLE usage_hours ADD COLUMN requests bigint NOT NULL DEFAULT 0;`,
  // The job history: a job's record kept after its result expired (store: archiveJobs).
  `CREATE TABLE job_history (
     id text PRIMARY KEY, endpoint_id text NOT NULL, status text NOT NULL, function text, sync boolean NOT NULL,
     created_at bigint NOT NULL, started_at bigint, completed_at bigint, error text, error_type text,
     attempt integer NOT NULL, retried integer NOT NULL, worker_id text, result_expired_at bigint NOT NULL,
     kept_until bigint NOT NULL);
   CREATE INDEX job_history_endpoint ON job_history (endpoint_id, created_at);
   CREATE INDEX job_history_kept ON job_history (kept_until);`,
];
