// Webhook delivery from the outbox: a job's webhook is a row written in the same transaction as its final state
// (engine/), so neither a crash nor a kill -9 between the two loses it; this module POSTs due rows, deletes
// each once its receiver answered 2xx, and reschedules a failed one with backoff (250 ms, 1 s, 4 s) up to four
// attempts, after which it is dropped and logged. A row whose delivery a crash interrupted is sent again after a
// restart: receivers may see a webhook twice (at least once), never not at all.

import type { StoreOp, WebhookRow } from "../store/types.js";

/** Attempts before a webhook is given up. */
export const WEBHOOK_ATTEMPTS = 4;
const BACKOFF_MS = [250, 1_000, 4_000];

/** What a failed attempt changes: try again later, or give up. Pure. */
export function afterFailure(row: WebhookRow, now: number): StoreOp {
  const attempts = row.attempts + 1;
  if (attempts >= WEBHOOK_ATTEMPTS) return { op: "deleteWebhook", id: row.id };
  return { op: "retryWebhook", id: row.id, attempts, nextAt: now + BACKOFF_MS[Math.min(attempts - 1, BACKOFF_MS.length - 1)]! };
}

export interface WebhookOutboxOptions {
  due(now: number, limit: number): Promise<WebhookRow[]>;
  write(ops: StoreOp[]): Promise<void>;
  log(message: string): void;
  /** Whether this process delivers (replicas: the one serving jobs). */
  active(): boolean;
  intervalMs?: number;
  /** One attempt's time limit (default 10 s). */
  timeoutMs?: number;
}

export class WebhookOutbox {
  private readonly timer: NodeJS.Timeout;
  private readonly inFlight = new Map<string, Promise<void>>();
  private scanning = false;
  private closed = false;

  constructor(private readonly options: WebhookOutboxOptions) {
    this.timer = setInterval(() => this.kick(), options.intervalMs ?? 500);
    this.timer.unref();
  }

  /** Look for due rows now (a webhook was just written). */
  kick(): void {
    if (this.scanning || this.closed || !this.options.active()) return;
    this.scanning = true;
    void this.scan()
      .catch((err: unknown) => this.options.log(`could not read the webhook outbox: ${(err as Error).message}`))
      .finally(() => (this.scanning = false));
  }

  private async scan(): Promise<void> {
    const rows = await this.options.due(Date.now(), 64);
    for (const row of rows) {
      if (this.inFlight.has(row.id)) continue;
      const delivery = this.deliver(row).finally(() => this.inFlight.delete(row.id));
      this.inFlight.set(row.id, delivery);
    }
  }

  private async deliver(row: WebhookRow): Promise<void> {
    let outcome: string;
    try {
      const response = await fetch(row.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: row.body,
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
      });
      await response.arrayBuffer().catch(() => undefined /* the status is what counts; the body is not read */);
      if (response.ok) {
        await this.options.write([{ op: "deleteWebhook", id: row.id }]);
        return;
      }
      outcome = `answered ${response.status}`;
    } catch (err) {
      outcome = (err as Error).message;
    }
    const next = afterFailure(row, Date.now());
    if (next.op === "deleteWebhook") this.options.log(`webhook ${row.url} of job ${row.jobId} failed after ${WEBHOOK_ATTEMPTS} attempts (last: ${outcome})`);
    // Refused by the store too: the row stays as it was and is tried again at the next scan.
    await this.options.write([next]).catch((err: unknown) => this.options.log(`could not record a webhook attempt: ${(err as Error).message}`));
  }

  /** Stop scanning; wait up to `ms` for deliveries under way (what is left is sent after the next start). */
  async close(ms = 1_000): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await Promise.race([Promise.allSettled([...this.inFlight.values()]), new Promise((r) => setTimeout(r, ms).unref())]);
  }
}
