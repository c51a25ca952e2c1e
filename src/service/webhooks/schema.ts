// The webhook tables, as migrations of both stores (appended to SQLITE_MIGRATIONS in schema/sqlite.ts and
// PG_MIGRATIONS in schema/postgres.ts):
//   - jobs.webhook_events: a job's own event filter;
//   - webhook_outbox gains the endpoint (whose secret signs) and the event of each message; rows an older svc
//     wrote get them from their job;
//   - webhook_deliveries: every delivery attempt (the log `svc jobs status` and the console show);
//   - webhook_settings: an endpoint's event filter and sealed signing secrets.

const BACKFILL = `UPDATE webhook_outbox SET
     endpoint_id = (SELECT endpoint_id FROM jobs WHERE jobs.id = webhook_outbox.job_id),
     event = COALESCE((SELECT CASE WHEN status = 'COMPLETED' THEN 'completed' ELSE 'failed' END FROM jobs WHERE jobs.id = webhook_outbox.job_id), 'completed');`;

export const WEBHOOKS_MIGRATION = `
  ALTER TABLE jobs ADD COLUMN webhook_events TEXT;
  ALTER TABLE webhook_outbox ADD COLUMN endpoint_id TEXT;
  ALTER TABLE webhook_outbox ADD COLUMN event TEXT;
  ${BACKFILL}
  CREATE INDEX webhook_outbox_job ON webhook_outbox (job_id);
  CREATE TABLE webhook_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, endpoint_id TEXT NOT NULL, message_id TEXT NOT NULL,
    event TEXT NOT NULL, attempt INTEGER NOT NULL, at INTEGER NOT NULL, duration_ms INTEGER NOT NULL, status INTEGER,
    error TEXT, outcome TEXT NOT NULL);
  CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id, seq);
  CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id);
  CREATE TABLE webhook_settings (
    endpoint_id TEXT PRIMARY KEY, events TEXT, secret TEXT, secret_key_id TEXT, secret_created_at INTEGER,
    previous_secret TEXT, previous_key_id TEXT, previous_expires_at INTEGER, updated_at INTEGER NOT NULL);`;

/** The same on PostgreSQL; a change of settings is told to every replica (the change feed's "config"). */
export const PG_WEBHOOKS_MIGRATION = `
  ALTER TABLE jobs ADD COLUMN webhook_events text;
  ALTER TABLE webhook_outbox ADD COLUMN endpoint_id text;
  ALTER TABLE webhook_outbox ADD COLUMN event text;
  ${BACKFILL}
  CREATE INDEX webhook_outbox_job ON webhook_outbox (job_id);
  CREATE TABLE webhook_deliveries (
    seq bigserial PRIMARY KEY, job_id text NOT NULL, endpoint_id text NOT NULL, message_id text NOT NULL,
    event text NOT NULL, attempt integer NOT NULL, at bigint NOT NULL, duration_ms bigint NOT NULL, status integer,
    error text, outcome text NOT NULL);
  CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id, seq);
  CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id);
  CREATE TABLE webhook_settings (
    endpoint_id text PRIMARY KEY, events text, secret text, secret_key_id text, secret_created_at bigint,
    previous_secret text, previous_key_id text, previous_expires_at bigint, updated_at bigint NOT NULL);
  CREATE TRIGGER svc_changed AFTER INSERT OR UPDATE OR DELETE ON webhook_settings FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_change('config');`;
