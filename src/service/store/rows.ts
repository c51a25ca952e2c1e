// Rows as both stores keep them: column names, and reading a database row back into the service's records.
// SQLite gives booleans as 0/1, PostgreSQL as booleans; both give epoch-ms times as numbers.

import type { EndpointRow, JobRow, KeyRow, LogRow, WebhookDeliveryRow, WebhookRow, WebhookSettingsRow } from "./types.js";
import type { AppRow, BuildRow, EnvironmentRow } from "./deploy-rows.js";

export const JOB_COLUMNS: Record<keyof JobRow, string> = {
  id: "id",
  endpointId: "endpoint_id",
  status: "status",
  input: "input",
  function: "function",
  webhook: "webhook",
  sync: "sync",
  lowPriority: "low_priority",
  createdAt: "created_at",
  startedAt: "started_at",
  completedAt: "completed_at",
  output: "output",
  error: "error",
  errorType: "error_type",
  errorStack: "error_stack",
  attempt: "attempt",
  retried: "retried",
  executionTimeoutMs: "execution_timeout_ms",
  ttlMs: "ttl_ms",
  expiresAt: "expires_at",
  lease: "lease",
  workerId: "worker_id",
  streamCursor: "stream_cursor",
  maxRetries: "max_retries",
  webhookEvents: "webhook_events",
  progress: "progress",
  notBefore: "not_before",
  deadlineAt: "deadline_at",
  s3Bucket: "s3_bucket",
};
export const JOB_KEYS = Object.keys(JOB_COLUMNS) as Array<keyof JobRow>;

export function rowToJob(r: Record<string, unknown>): JobRow {
  const job = {} as Record<string, unknown>;
  for (const key of JOB_KEYS) job[key] = r[JOB_COLUMNS[key]];
  job.sync = r.sync === 1 || r.sync === true;
  job.lowPriority = r.low_priority === 1 || r.low_priority === true;
  // Optional; absent rather than null when the job has no limit of its own
  // Optional like it: absent rather than null (rows stored before these columns existed read the same).
  for (const key of ["maxRetries", "webhookEvents", "progress", "notBefore", "deadlineAt", "s3Bucket"] as const)
    if (job[key] === null || job[key] === undefined) delete job[key];
  return job as unknown as JobRow;
}

export function rowToEndpoint(r: Record<string, unknown>): EndpointRow {
  return {
    id: r.id as string,
    userId: r.user_id as string,
    app: r.app as string,
    env: r.env as string,
    name: r.name as string,
    type: r.type as EndpointRow["type"],
    resource: JSON.parse(r.resource as string) as EndpointRow["resource"],
    artifactPath: r.artifact_path as string,
    revision: r.revision as string,
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
    completed: r.completed as number,
    failed: r.failed as number,
    retried: r.retried as number,
  };
}

export function rowToKey(r: Record<string, unknown>): KeyRow {
  return {
    id: r.id as string,
    hash: r.hash as string,
    userId: r.user_id as string,
    scopes: JSON.parse(r.scopes as string) as string[],
    createdAt: r.created_at as number,
    revokedAt: (r.revoked_at as number | null) ?? null,
    expiresAt: (r.expires_at as number | null | undefined) ?? null,
  };
}

export function rowToWebhook(r: Record<string, unknown>): WebhookRow {
  return {
    id: r.id as string,
    jobId: r.job_id as string,
    // Rows an older svc wrote (before these columns) were final results of a job since deleted.
    endpointId: (r.endpoint_id as string | null) ?? "",
    event: (r.event as string | null) ?? "completed",
    url: r.url as string,
    body: r.body as string,
    attempts: r.attempts as number,
    nextAt: r.next_at as number,
    createdAt: r.created_at as number,
  };
}

export function rowToWebhookDelivery(r: Record<string, unknown>): WebhookDeliveryRow {
  return {
    jobId: r.job_id as string,
    endpointId: r.endpoint_id as string,
    messageId: r.message_id as string,
    event: r.event as string,
    attempt: r.attempt as number,
    at: r.at as number,
    durationMs: r.duration_ms as number,
    status: (r.status as number | null) ?? null,
    error: (r.error as string | null) ?? null,
    outcome: r.outcome as WebhookDeliveryRow["outcome"],
  };
}

export function rowToWebhookSettings(r: Record<string, unknown>): WebhookSettingsRow {
  const n = (v: unknown) => (v as number | null | undefined) ?? null;
  const t = (v: unknown) => (v as string | null | undefined) ?? null;
  return {
    endpointId: r.endpoint_id as string,
    events: t(r.events),
    secret: t(r.secret),
    secretKeyId: t(r.secret_key_id),
    secretCreatedAt: n(r.secret_created_at),
    previousSecret: t(r.previous_secret),
    previousKeyId: t(r.previous_key_id),
    previousExpiresAt: n(r.previous_expires_at),
    updatedAt: r.updated_at as number,
  };
}

export function rowToLog(r: Record<string, unknown>): LogRow & { seq: number } {
  return {
    seq: r.seq as number,
    ts: r.ts as number,
    endpointId: r.endpoint_id as string,
    workerId: r.worker_id as string,
    jobId: (r.job_id as string | null) ?? null,
    stream: r.stream as string,
    text: r.text as string,
  };
}

export function rowToApp(r: Record<string, unknown>): AppRow {
  return { userId: r.user_id as string, name: r.name as string, createdAt: r.created_at as number };
}

export function rowToEnvironment(r: Record<string, unknown>): EnvironmentRow {
  return {
    userId: r.user_id as string,
    app: r.app as string,
    name: r.name as string,
    buildId: (r.build_id as string | null) ?? null,
    createdAt: r.created_at as number,
    activatedAt: (r.activated_at as number | null) ?? null,
  };
}

export function rowToBuild(r: Record<string, unknown>): BuildRow {
  return {
    id: r.id as string,
    userId: r.user_id as string,
    app: r.app as string,
    size: r.size as number,
    fingerprint: r.fingerprint as string,
    manifest: JSON.parse(r.manifest as string) as BuildRow["manifest"],
    path: r.path as string,
    createdAt: r.created_at as number,
  };
}
