// A job's webhook, end to end: which events it gets (events.ts), the message written to the outbox with the job's
// change it tells of, delivery signed and retried (../webhook-outbox.ts), each endpoint's filter and signing
// secrets (settings.ts), each job's delivery log, and where a webhook may go at all (address-policy.ts, applied at
// submit and at every connection: deliver.ts). docs/webhooks.md is the user's side of it.

import { newId } from "../keys/auth.js";
import type { SecretBox } from "../secrets/box.js";
import type { JobRow, Store, StoreOp, WebhookDeliveryRow, WebhookRow } from "../store/types.js";
import { WebhookOutbox } from "../jobs/webhook-outbox.js";
import { wants, type WebhookEvent } from "./events.js";
import { retryPolicy, type RetryPolicy } from "./schedule.js";
import { WebhookSettings } from "./settings.js";
import { WebhookAddressPolicy, type WebhookAddressOptions, type WebhookRule } from "./address-policy.js";
import { postWebhook } from "./deliver.js";

export { WEBHOOK_EVENTS, type WebhookEvent } from "./events.js";

export interface WebhooksOptions {
  store: Store;
  box: SecretBox;
  /** Writes through the engine's batches. */
  write(ops: StoreOp[]): Promise<void>;
  log(message: string): void;
  /** Whether this process delivers (replicas: the one serving jobs). */
  active(): boolean;
  /** The job record as the job API shows it (the body of every message). */
  recordJson(row: JobRow, now: number): string;
  retry?: Partial<RetryPolicy>;
  /** Attempt time limit, ms (default 10 s). */
  timeoutMs?: number;
  /** How often the outbox looks for due messages besides when one is written (default 500 ms). */
  intervalMs?: number;
  /** Each delivery attempt's outcome (metrics). */
  onAttempt?(outcome: "delivered" | "retrying" | "failed"): void;
  /** Where webhooks may go: the operator's allow-list, the resolver, the service's own listener. */
  addresses?: WebhookAddressOptions;
  /** A webhook URL the address rules refused, at submit (422) or at delivery (metrics). */
  onRefused?(rule: WebhookRule, stage: "submit" | "delivery"): void;
}

/** What a job's delivery log answers: every attempt, and the messages still to be delivered. */
export interface DeliveryLog {
  jobId: string;
  deliveries: Array<Omit<WebhookDeliveryRow, "jobId" | "endpointId">>;
  pending: Array<{ messageId: string; event: string; attempts: number; nextAttemptAt: number }>;
}

export class Webhooks {
  readonly settings: WebhookSettings;
  readonly outbox: WebhookOutbox;
  readonly retry: RetryPolicy;
  readonly addresses: WebhookAddressPolicy;

  constructor(private readonly options: WebhooksOptions) {
    this.retry = retryPolicy(options.retry);
    this.addresses = new WebhookAddressPolicy(options.addresses);
    this.settings = new WebhookSettings(options.store, options.box, options.write, options.log);
    this.outbox = new WebhookOutbox({
      due: (now, limit) => options.store.dueWebhooks(now, limit),
      write: options.write,
      log: options.log,
      active: options.active,
      send: (post) => postWebhook(post, this.addresses),
      onRefused: (rule) => options.onRefused?.(rule, "delivery"),
      secrets: (endpointId) => this.settings.signingSecrets(endpointId),
      retry: this.retry,
      timeoutMs: options.timeoutMs,
      intervalMs: options.intervalMs,
      onAttempt: options.onAttempt,
    });
  }

  /**
   * The outbox row telling `event` of `row` to its webhook, or none (no webhook, or its filter leaves the event
   * out). `output`: what a progress event carries as the record's output. The caller writes it in the batch of the
   * change it tells of.
   */
  message(row: JobRow, event: WebhookEvent, now: number, output?: unknown): WebhookRow | undefined {
    if (!row.webhook || !wants(event, row.webhookEvents, this.settings.eventsOf(row.endpointId))) return undefined;
    const shown = output === undefined ? row : { ...row, output: JSON.stringify(output) };
    return {
      id: newId(12),
      jobId: row.id,
      endpointId: row.endpointId,
      event,
      url: row.webhook,
      body: this.options.recordJson(shown, now),
      attempts: 0,
      nextAt: now,
      createdAt: now,
    };
  }

  /** Count a webhook URL refused at submit (the route answers 422). */
  refusedAtSubmit(rule: WebhookRule): void {
    this.options.onRefused?.(rule, "submit");
  }

  /** `message` as the ops to write. */
  ops(row: JobRow, event: WebhookEvent, now = Date.now(), output?: unknown): StoreOp[] {
    const webhook = this.message(row, event, now, output);
    return webhook ? [{ op: "insertWebhook", webhook }] : [];
  }

  /**
   * Tell `event` of a job now, outside any batch of its own (a handler's progress report: ctx.progress). Resolves
   * once the message is stored (true) or when none is wanted (false).
   */
  async jobEvent(row: JobRow, event: WebhookEvent, output?: unknown): Promise<boolean> {
    const ops = this.ops(row, event, Date.now(), output);
    if (ops.length === 0) return false;
    await this.options.write(ops);
    this.outbox.kick();
    return true;
  }

  /** A job's delivery log. */
  async log(jobId: string): Promise<DeliveryLog> {
    const [attempts, pending] = await Promise.all([this.options.store.webhookDeliveries?.(jobId) ?? [], this.options.store.pendingWebhooks?.(jobId) ?? []]);
    return {
      jobId,
      deliveries: attempts.map(({ jobId: _job, endpointId: _endpoint, ...d }) => d),
      // A message tried and failed has attempts > 0; one not tried yet is due now.
      pending: pending.map((w) => ({ messageId: `msg_${w.id}`, event: w.event, attempts: w.attempts, nextAttemptAt: w.nextAt })),
    };
  }

  async close(ms?: number): Promise<void> {
    await this.outbox.close(ms);
  }
}
