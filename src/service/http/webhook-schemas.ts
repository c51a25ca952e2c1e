// The schemas of the webhook routes (webhooks/routes.ts), published in /openapi.json beside the job API's.

import type { Schema } from "./schema.js";
import { WEBHOOK_EVENTS } from "../webhooks/events.js";
import { MAX_PREVIOUS_SECRET_MS } from "../webhooks/settings.js";

const event: Schema = { type: "string", enum: WEBHOOK_EVENTS };
const int = (description: string): Schema => ({ type: "integer", description });
const nullableInt = (description: string): Schema => ({ type: ["integer", "null"], description });

export const WEBHOOK_SCHEMAS = {
  WebhookEvent: {
    ...event,
    description:
      "started: a worker took the job; progress: its handler reported progress; completed: it ended COMPLETED; failed: it ended FAILED, TIMED_OUT or CANCELLED",
  },
  WebhookSettings: {
    type: "object",
    properties: {
      endpointId: { type: "string" },
      events: { type: "array", items: event, description: "The events the endpoint's job webhooks get unless a job names its own (webhookEvents)" },
      eventsDefault: { type: "boolean", description: "true: no filter is set (completed and failed)" },
      signingSecret: {
        type: "object",
        description: "null until a secret is made (by a rotation, or to sign the endpoint's first delivery); never its value",
        properties: { createdAt: int("epoch ms"), previousExpiresAt: nullableInt("Until when the secret before it still signs too (epoch ms)") },
      },
    },
    required: ["endpointId", "events", "eventsDefault", "signingSecret"],
  },
  UpdateWebhookSettingsRequest: {
    type: "object",
    properties: {
      events: { type: "array", items: event, maxItems: WEBHOOK_EVENTS.length, description: "The events; null goes back to the default (completed, failed)" },
    },
    required: ["events"],
    additionalProperties: false,
  },
  RotateWebhookSecretRequest: {
    type: "object",
    properties: {
      keepPreviousSeconds: {
        type: "integer",
        minimum: 0,
        maximum: MAX_PREVIOUS_SECRET_MS / 1000,
        description: "How long the replaced secret still signs too (default 86400; 0: it stops at once)",
      },
    },
    additionalProperties: false,
  },
  WebhookSecret: {
    type: "object",
    properties: {
      secret: { type: "string", description: "whsec_...: the new signing secret, answered this once" },
      settings: { $ref: "#/components/schemas/WebhookSettings" },
    },
    required: ["secret", "settings"],
  },
  WebhookDeliveryLog: {
    type: "object",
    properties: {
      jobId: { type: "string" },
      deliveries: {
        type: "array",
        description: "Every delivery attempt, oldest first",
        items: {
          type: "object",
          properties: {
            messageId: { type: "string", description: "The webhook-id header: the same on every attempt of one message" },
            event,
            attempt: int("1 for a message's first attempt"),
            at: int("When the attempt began (epoch ms)"),
            durationMs: int("How long it took"),
            status: nullableInt("The receiver's HTTP status; null when it gave none"),
            error: { type: ["string", "null"], description: "Why the attempt failed" },
            outcome: { type: "string", enum: ["delivered", "retrying", "failed"], description: "failed: the last attempt, given up" },
          },
          required: ["messageId", "event", "attempt", "at", "durationMs", "status", "error", "outcome"],
        },
      },
      pending: {
        type: "array",
        description: "Messages not delivered yet",
        items: {
          type: "object",
          properties: { messageId: { type: "string" }, event, attempts: int("Attempts made so far"), nextAttemptAt: int("epoch ms") },
          required: ["messageId", "event", "attempts", "nextAttemptAt"],
        },
      },
    },
    required: ["jobId", "deliveries", "pending"],
  },
} satisfies Record<string, Schema>;
