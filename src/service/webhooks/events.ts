// Which moments of a job are posted to its webhook. `started`: a worker took it (once per attempt); `progress`:
// the handler reported progress; `completed`: it ended COMPLETED; `failed`: it ended any other way (FAILED,
// TIMED_OUT, CANCELLED: the record's status says which). Without a filter a webhook gets `completed` and
// `failed`: the job's final record, as the provider's webhooks do. Pure.

import type { JobStatus } from "svc/internal";

export const WEBHOOK_EVENTS = ["started", "progress", "completed", "failed"] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];
export const DEFAULT_WEBHOOK_EVENTS: readonly WebhookEvent[] = ["completed", "failed"];

export function isWebhookEvent(v: unknown): v is WebhookEvent {
  return typeof v === "string" && (WEBHOOK_EVENTS as readonly string[]).includes(v);
}

/** The event of a final status. */
export function finalEvent(status: JobStatus): WebhookEvent {
  return status === "COMPLETED" ? "completed" : "failed";
}

/** A filter as stored (comma-separated, in WEBHOOK_EVENTS order), from a list of events. */
export function eventsText(events: readonly WebhookEvent[]): string {
  return WEBHOOK_EVENTS.filter((e) => events.includes(e)).join(",");
}

/** A stored filter back as a list (unknown names, from a newer svc, are left out). */
export function eventsOf(text: string): WebhookEvent[] {
  return text.split(",").filter(isWebhookEvent);
}

/**
 * Whether a job's webhook gets `event`: the job's own filter when it has one, else its endpoint's, else the
 * default. An empty filter sends nothing.
 */
export function wants(event: WebhookEvent, jobFilter: string | null | undefined, endpointFilter: string | null | undefined): boolean {
  const filter = jobFilter ?? endpointFilter;
  if (filter === null || filter === undefined) return DEFAULT_WEBHOOK_EVENTS.includes(event);
  return eventsOf(filter).includes(event);
}
