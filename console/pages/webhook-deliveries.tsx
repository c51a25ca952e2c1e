// A job's webhook delivery log in its job view: each attempt (time, event, HTTP status or error, duration,
// outcome) and the messages still to be delivered. Polled while the job view is open; a job without a webhook
// shows nothing.

import { useState } from "preact/hooks";
import { api } from "../api.js";
import { formatMs, ListTable, ProblemMessage, Time, usePolling } from "../ui.js";

interface DeliveryLog {
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

/** How often the log is read again while the view is open (retries come seconds to minutes apart). */
const DELIVERIES_POLL_MS = 3_000;

export function WebhookDeliveries({ endpointId, jobId }: { endpointId: string; jobId: string }) {
  const [log, setLog] = useState<DeliveryLog | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  usePolling(
    async () => {
      try {
        setLog(await api<DeliveryLog>(`/v2/${encodeURIComponent(endpointId)}/webhook-deliveries/${encodeURIComponent(jobId)}`));
        setProblem(null);
      } catch (err) {
        setProblem(err);
      }
    },
    DELIVERIES_POLL_MS,
    [endpointId, jobId],
  );
  if (problem) return <ProblemMessage error={problem} />;
  if (!log || (log.deliveries.length === 0 && log.pending.length === 0)) return null;
  return (
    <>
      <h3>Webhook deliveries</h3>
      <ListTable label="Webhook deliveries" columns={["Time", "Event", "Attempt", "Result", "Duration", "Outcome"]}>
        {log.deliveries.map((d) => (
          <tr key={`${d.messageId}:${d.attempt}`} data-outcome={d.outcome}>
            <td>
              <Time t={d.at} />
            </td>
            <td>{d.event}</td>
            <td>{d.attempt}</td>
            <td class={d.error ? "error-text" : undefined}>{d.status !== null ? `HTTP ${d.status}` : d.error}</td>
            <td>{formatMs(d.durationMs)}</td>
            <td>{d.outcome}</td>
          </tr>
        ))}
      </ListTable>
      {log.pending.map((p) => (
        <p key={p.messageId} class="muted">
          {p.event}: {p.attempts === 0 ? "to be sent" : `${p.attempts} attempt(s) failed; next`} <Time t={p.nextAttemptAt} />
        </p>
      ))}
    </>
  );
}
