// A job's webhook delivery log as `svc jobs status` prints it. Pure.

import { table } from "./management.js";

export interface DeliveryLog {
  jobId: string;
  deliveries: Array<{
    messageId: string;
    event: string;
    attempt: number;
    at: number;
    durationMs: number;
    status: number | null;
    error: string | null;
    outcome: string;
  }>;
  pending: Array<{ messageId: string; event: string; attempts: number; nextAttemptAt: number }>;
}

/** The attempts as a table, then what is still to be delivered; empty when the job's webhook was never tried. */
export function renderDeliveryLog(log: DeliveryLog): string {
  if (log.deliveries.length === 0 && log.pending.length === 0) return "";
  const rows = log.deliveries.map((d) => ({
    time: new Date(d.at).toISOString(),
    event: d.event,
    attempt: d.attempt,
    result: d.status === null ? (d.error ?? "-") : String(d.status),
    duration: `${d.durationMs} ms`,
    outcome: d.outcome,
    message: d.messageId,
  }));
  const lines = ["Webhook deliveries:"];
  if (rows.length > 0) lines.push(table(rows, ["time", "event", "attempt", "result", "duration", "outcome", "message"]));
  for (const p of log.pending) {
    lines.push(
      `${p.event} (${p.messageId}): ${p.attempts === 0 ? "to be sent" : `${p.attempts} attempt(s) failed, next`} at ${new Date(p.nextAttemptAt).toISOString()}`,
    );
  }
  return lines.join("\n");
}
