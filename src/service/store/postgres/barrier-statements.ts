// The statements of the ops a batch keeps in their place (batch.ts runs them between its combined segments):
// deletes of jobs and chunks, endpoints, API keys, webhooks' outbox, deliveries and settings, and the deploy
// records (apps, releases, environments, builds). One op, one or a few statements each.

import type { DeployStoreOp } from "../deploy-rows.js";
import type { EndpointRow, StoreOp } from "../types.js";
import { pgText, type Statement } from "./connection.js";

/** The statements of one op that keeps its place in a batch. Pure. */
export function barrierStatements(o: StoreOp): Statement[] {
  const one = (text: string, values: unknown[]): Statement[] => [{ text, values }];
  switch (o.op) {
    case "deleteJob":
      return [
        { text: "DELETE FROM stream_chunks WHERE job_id = $1", values: [o.id] },
        { text: "DELETE FROM jobs WHERE id = $1", values: [o.id] },
      ];
    case "deleteChunksAfter":
      return one("DELETE FROM stream_chunks WHERE job_id = $1 AND seq > $2", [o.jobId, o.seq]);
    case "upsertEndpoint": {
      const e: EndpointRow = o.endpoint;
      return one(
        `INSERT INTO endpoints (id, user_id, app, env, name, type, resource, artifact_path, revision, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         ON CONFLICT (id) DO UPDATE SET type = excluded.type, resource = excluded.resource,
           artifact_path = excluded.artifact_path, revision = excluded.revision, updated_at = excluded.updated_at`,
        [e.id, e.userId, e.app, e.env, e.name, e.type, JSON.stringify(e.resource), e.artifactPath, e.revision, e.createdAt, e.updatedAt],
      );
    }
    case "deleteEndpoint":
      return [
        { text: "DELETE FROM stream_chunks WHERE job_id IN (SELECT id FROM jobs WHERE endpoint_id = $1)", values: [o.id] },
        { text: "DELETE FROM jobs WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM job_history WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM logs WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM webhook_deliveries WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM webhook_settings WHERE endpoint_id = $1", values: [o.id] },
        { text: "DELETE FROM endpoints WHERE id = $1", values: [o.id] },
      ];
    case "insertKey":
      return one(
        `INSERT INTO api_keys (id, hash, user_id, scopes, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET hash = excluded.hash, user_id = excluded.user_id, scopes = excluded.scopes,
           created_at = excluded.created_at, revoked_at = excluded.revoked_at`,
        [o.key.id, o.key.hash, o.key.userId, JSON.stringify(o.key.scopes), o.key.createdAt, o.key.revokedAt],
      );
    case "revokeKey":
      return one("UPDATE api_keys SET revoked_at = $1 WHERE id = $2", [o.at, o.id]);
    case "deleteKey":
      return one("DELETE FROM api_keys WHERE id = $1", [o.id]);
    case "insertWebhook": {
      const w = o.webhook;
      return one(
        `INSERT INTO webhook_outbox (id, job_id, endpoint_id, event, url, body, attempts, next_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (id) DO UPDATE SET body = excluded.body, attempts = excluded.attempts, next_at = excluded.next_at`,
        [w.id, w.jobId, w.endpointId, w.event, w.url, w.body, w.attempts, w.nextAt, w.createdAt],
      );
    }
    case "insertWebhookDelivery": {
      const d = o.delivery;
      return one(
        `INSERT INTO webhook_deliveries (job_id, endpoint_id, message_id, event, attempt, at, duration_ms, status, error, outcome)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        [d.jobId, d.endpointId, d.messageId, d.event, d.attempt, d.at, d.durationMs, d.status, d.error === null ? null : pgText(d.error), d.outcome],
      );
    }
    case "putWebhookSettings": {
      const w = o.settings;
      return one(
        `INSERT INTO webhook_settings (endpoint_id, events, secret, secret_key_id, secret_created_at, previous_secret, previous_key_id, previous_expires_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (endpoint_id) DO UPDATE SET events = excluded.events, secret = excluded.secret, secret_key_id = excluded.secret_key_id,
           secret_created_at = excluded.secret_created_at, previous_secret = excluded.previous_secret, previous_key_id = excluded.previous_key_id,
           previous_expires_at = excluded.previous_expires_at, updated_at = excluded.updated_at`,
        [w.endpointId, w.events, w.secret, w.secretKeyId, w.secretCreatedAt, w.previousSecret, w.previousKeyId, w.previousExpiresAt, w.updatedAt],
      );
    }
    case "pruneWebhookDeliveries":
      return one("DELETE FROM webhook_deliveries WHERE at < $1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = webhook_deliveries.job_id)", [o.before]);
    case "retryWebhook":
      return one("UPDATE webhook_outbox SET attempts = $1, next_at = $2 WHERE id = $3", [o.attempts, o.nextAt, o.id]);
    case "deleteWebhook":
      return one("DELETE FROM webhook_outbox WHERE id = $1", [o.id]);
    default:
      return deployStatements(o as DeployStoreOp);
  }
}

function deployStatements(o: DeployStoreOp): Statement[] {
  const one = (text: string, values: unknown[]): Statement[] => [{ text, values }];
  switch (o.op) {
    case "upsertApp":
      return one("INSERT INTO apps (user_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", [o.app.userId, o.app.name, o.app.createdAt]);
    case "upsertRelease": {
      const r = o.release;
      return one(
        `INSERT INTO releases (user_id, app, env, id, started_at, record) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (user_id, app, env, id) DO UPDATE SET record = excluded.record`,
        [r.userId, r.app, r.env, r.id, r.startedAt, JSON.stringify(r)],
      );
    }
    case "deleteApp":
      return [
        ...["releases", "environments", "builds"].map((table) => ({
          text: `DELETE FROM ${table} WHERE user_id = $1 AND app = $2`,
          values: [o.userId, o.name],
        })),
        { text: "DELETE FROM apps WHERE user_id = $1 AND name = $2", values: [o.userId, o.name] },
      ];
    case "upsertEnvironment": {
      const e = o.environment;
      return one(
        `INSERT INTO environments (user_id, app, name, build_id, created_at, activated_at) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (user_id, app, name) DO UPDATE SET build_id = excluded.build_id, activated_at = excluded.activated_at`,
        [e.userId, e.app, e.name, e.buildId, e.createdAt, e.activatedAt],
      );
    }
    case "deleteEnvironment":
      return [
        { text: "DELETE FROM releases WHERE user_id = $1 AND app = $2 AND env = $3", values: [o.userId, o.app, o.name] },
        { text: "DELETE FROM environments WHERE user_id = $1 AND app = $2 AND name = $3", values: [o.userId, o.app, o.name] },
      ];
    case "insertBuild": {
      const b = o.build;
      return one(
        `INSERT INTO builds (id, user_id, app, size, fingerprint, manifest, path, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT DO NOTHING`,
        [b.id, b.userId, b.app, b.size, b.fingerprint, JSON.stringify(b.manifest), b.path, b.createdAt],
      );
    }
  }
}
