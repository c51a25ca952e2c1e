// The webhook routes (routes.ts) in /openapi.json.

import type { SchemaName } from "../http/schema.js";

const ref = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: SchemaName) => ({ "application/json": { schema: ref(name) } });
const problem = (description: string) => ({ description, content: { "application/problem+json": { schema: ref("ErrorResponse") } } });
const errors = {
  "401": problem("Unauthorized: key missing, unknown, revoked or expired"),
  "403": problem("Forbidden: the key lacks the scope"),
  "404": problem("Not Found: unknown (or another user's) endpoint, or an unknown or expired job"),
  "429": problem("Too Many Requests: the user's rate limit"),
};
const invalid = { "422": problem("Unprocessable Entity: `errors` lists every failure as `$.path: message`") };
const path = (name: string) => ({ name, in: "path", required: true, schema: { type: "string" } });

export function webhookPaths(): Record<string, unknown> {
  const tags = ["webhooks"];
  return {
    "/v1/endpoints/{endpointId}/webhook": {
      parameters: [path("endpointId")],
      get: {
        tags,
        summary: "The endpoint's webhook event filter and signing secret's dates, never its value (management:read)",
        responses: { "200": { description: "The settings", content: json("WebhookSettings") }, ...errors },
      },
      patch: {
        tags,
        summary: "Set the events the endpoint's job webhooks get unless a job names its own (management:write)",
        requestBody: { required: true, content: json("UpdateWebhookSettingsRequest") },
        responses: { "200": { description: "The settings", content: json("WebhookSettings") }, ...errors, ...invalid },
      },
    },
    "/v1/endpoints/{endpointId}/webhook/rotate-secret": {
      parameters: [path("endpointId")],
      post: {
        tags,
        summary:
          "Make a new signing secret (the endpoint's first, or one replacing the current, which still signs for keepPreviousSeconds); its value is answered this once (management:write)",
        requestBody: { required: false, content: json("RotateWebhookSecretRequest") },
        responses: { "200": { description: "The new secret", content: json("WebhookSecret") }, ...errors, ...invalid },
      },
    },
    "/v2/{endpoint_id}/webhook-deliveries/{job_id}": {
      parameters: [path("endpoint_id"), path("job_id")],
      get: {
        tags: ["job API"],
        summary: "svc addition: the job's webhook delivery attempts and the messages still to deliver (docs/webhooks.md)",
        responses: { "200": { description: "The delivery log", content: json("WebhookDeliveryLog") }, ...errors },
      },
    },
  };
}
