// Webhook delivery from the outbox: a job's webhook message is a row written in the same transaction as the job's
// change it tells of (engine: its final state, its start), so neither a crash nor a kill -9 between the two loses
// it. This module POSTs due rows, signed per the Standard Webhooks specification (webhooks/signing.ts), deletes
// each once its receiver answered 2xx, and reschedules a failed one with exponential backoff and jitter
// (webhooks/schedule.ts) until its last attempt, after which it is given up and logged. Every attempt is written
// to the job's delivery log in the same batch as the row's change. A row whose delivery a crash interrupted is
// sent again after a restart, with the same `webhook-id`: receivers may see a message twice (at least once),
// never not at all, and can drop the repeat by its id. A delivery the address rules refuse (webhooks/address-policy.ts)
// is given up at its first attempt, the rule named in the log: trying again would only probe the same address.

import type { LogFields } from "../logging.js";
import type { StoreOp, WebhookDeliveryRow, WebhookRow } from "../store/types.js";
import { DEFAULT_RETRY_POLICY, retryDelay, type RetryPolicy } from "../webhooks/schedule.js";
import { signedHeaders } from "../webhooks/signing.js";
import { WebhookRefused, type WebhookRule } from "../webhooks/address-policy.js";
import type { WebhookPost } from "../webhooks/deliver.js";
import { errorMessage } from "../../errors.js";

/** The header naming the event a delivery tells of (an svc addition beside the specification's three). */
export const EVENT_HEADER = "svc-webhook-event";
/** Delivery logs of jobs no longer stored are removed once this old. */
const ORPHAN_LOG_MS = 24 * 3600_000;
const PRUNE_EVERY_MS = 10 * 60_000;

/** A message's `webhook-id`: the same on every attempt. */
export const messageId = (row: WebhookRow) => `msg_${row.id}`;

/** What a failed attempt changes: try again after the policy's delay, or give up. Pure. */
export function afterFailure(row: WebhookRow, now: number, policy: RetryPolicy = DEFAULT_RETRY_POLICY, random = Math.random()): StoreOp {
  const attempts = row.attempts + 1;
  const delay = retryDelay(policy, attempts, random);
  if (delay === undefined) return { op: "deleteWebhook", id: row.id };
  return { op: "retryWebhook", id: row.id, attempts, nextAt: now + delay };
}

export interface WebhookOutboxOptions {
  due(now: number, limit: number): Promise<WebhookRow[]>;
  write(ops: StoreOp[]): Promise<void>;
  log(message: string, fields?: LogFields): void;
  /** Whether this process delivers (replicas: the one serving jobs). */
  active(): boolean;
  /** One attempt: the receiver's status, or a throw (WebhookRefused when the address rules refuse it). */
  send(post: WebhookPost): Promise<number>;
  /** The secrets that sign an endpoint's deliveries now, the current one first (none: unsigned). */
  secrets?(endpointId: string): Promise<string[]>;
  retry?: RetryPolicy;
  /** A draw in [0, 1) for the jitter (tests fix it). */
  random?(): number;
  intervalMs?: number;
  /** One attempt's time limit (default 10 s). */
  timeoutMs?: number;
  /** Each attempt's outcome (metrics). */
  onAttempt?(outcome: WebhookDeliveryRow["outcome"]): void;
  /** A delivery the address rules refused, by rule (metrics). */
  onRefused?(rule: WebhookRule): void;
}

export class WebhookOutbox {
  private readonly timer: NodeJS.Timeout;
  private readonly inFlight = new Map<string, Promise<void>>();
  /**
   * Rows whose attempt was recorded, by the order it was (a count): a scan's read of the due rows may have been
   * taken before such a write and come back after it (a PostgreSQL read in flight), with the row as it was: sent
   * again, or retried at once. A scan skips rows recorded since it began.
   */
  private readonly recorded = new Map<string, number>();
  private recordings = 0;
  private scanning = false;
  private closed = false;
  private lastPrune = 0;

  constructor(private readonly options: WebhookOutboxOptions) {
    this.timer = setInterval(() => this.kick(), options.intervalMs ?? 500);
    this.timer.unref();
  }

  /** Look for due rows now (a webhook was just written). */
  kick(): void {
    if (this.scanning || this.closed || !this.options.active()) return;
    this.scanning = true;
    void this.scan()
      .catch((err: unknown) => this.options.log(`could not read the webhook outbox: ${errorMessage(err)}`))
      .finally(() => (this.scanning = false));
  }

  private async scan(): Promise<void> {
    const now = Date.now();
    if (now - this.lastPrune > PRUNE_EVERY_MS) {
      this.lastPrune = now;
      await this.options.write([{ op: "pruneWebhookDeliveries", before: now - ORPHAN_LOG_MS }]);
    }
    const since = this.recordings;
    const rows = await this.options.due(now, 64);
    for (const row of rows) {
      if (this.inFlight.has(row.id) || (this.recorded.get(row.id) ?? 0) > since) continue;
      const delivery = this.deliver(row).finally(() => this.inFlight.delete(row.id));
      this.inFlight.set(row.id, delivery);
    }
    // The next scan begins after this one: what was recorded before this one's read is in its read.
    for (const [id, order] of this.recorded) if (order <= since) this.recorded.delete(id);
  }

  private async deliver(row: WebhookRow): Promise<void> {
    const at = Date.now();
    const started = performance.now();
    let status: number | null = null;
    let error: string | null = null;
    let refused: WebhookRefused | undefined;
    try {
      const secrets = row.endpointId && this.options.secrets ? await this.options.secrets(row.endpointId) : [];
      status = await this.options.send({
        url: row.url,
        headers: { "content-type": "application/json", [EVENT_HEADER]: row.event, ...signedHeaders(secrets, messageId(row), Date.now(), row.body) },
        body: row.body,
        timeoutMs: this.options.timeoutMs ?? 10_000,
      });
      if (status >= 300 && status < 400) error = `answered ${status} (redirects are not followed)`;
      else if (status < 200 || status >= 300) error = `answered ${status}`;
    } catch (err) {
      if (err instanceof WebhookRefused) refused = err;
      error = errorMessage(err);
    }
    const durationMs = Math.round(performance.now() - started);
    const next: StoreOp =
      error === null || refused
        ? { op: "deleteWebhook", id: row.id }
        : afterFailure(row, Date.now(), this.options.retry, this.options.random?.() ?? Math.random());
    const outcome: WebhookDeliveryRow["outcome"] = error === null ? "delivered" : next.op === "retryWebhook" ? "retrying" : "failed";
    this.options.onAttempt?.(outcome);
    if (refused) this.options.onRefused?.(refused.rule);
    if (outcome === "failed")
      this.options.log(
        `webhook ${row.url} of job ${row.jobId} (${row.event}) failed after ${row.attempts + 1} attempt${row.attempts === 0 ? "" : "s"} (last: ${error})`,
        { job: row.jobId, ...(row.endpointId ? { endpoint: row.endpointId } : {}) },
      );
    const delivery: WebhookDeliveryRow = {
      jobId: row.jobId,
      endpointId: row.endpointId,
      messageId: messageId(row),
      event: row.event,
      attempt: row.attempts + 1,
      at,
      durationMs,
      status,
      error,
      outcome,
    };
    // Refused by the store: the row stays as it was and is tried again at the next scan (sent twice at worst).
    await this.options
      .write([next, { op: "insertWebhookDelivery", delivery }])
      .then(() => void this.recorded.set(row.id, ++this.recordings))
      .catch((err: unknown) => this.options.log(`could not record a webhook attempt: ${errorMessage(err)}`));
  }

  /** Stop scanning; wait up to `ms` for deliveries under way (what is left is sent after the next start). */
  async close(ms = 1_000): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await Promise.race([Promise.allSettled([...this.inFlight.values()]), new Promise((r) => setTimeout(r, ms).unref())]);
  }
}
