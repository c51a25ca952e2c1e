// `svc endpoint webhook show|set|rotate-secret <id>`: an endpoint's webhook event filter and signing secret
// (any endpoint: app endpoints from `svc deploy` and REST endpoints alike). docs/webhooks.md.

import type { Command } from "commander";
import { UsageError } from "../../errors.js";
import { fields, listFlag, management } from "../management.js";
import { createOutput } from "../output.js";
import { durationFlag } from "../duration.js";
import { WEBHOOK_EVENTS } from "../../service/webhooks/events.js";

interface WebhookSettings {
  endpointId: string;
  events: string[];
  eventsDefault: boolean;
  signingSecret: { createdAt: number; previousExpiresAt: number | null } | null;
}

const path = (id: string, rest = "") => `/v1/endpoints/${encodeURIComponent(id)}/webhook${rest}`;

function human(s: WebhookSettings): string {
  const secret = s.signingSecret;
  return fields({
    endpoint: s.endpointId,
    events: `${s.events.join(", ") || "(none)"}${s.eventsDefault ? " (default)" : ""}`,
    signingSecret: secret ? `made ${new Date(secret.createdAt).toISOString()}` : "none yet (made at the first delivery; rotate-secret makes one and shows it)",
    ...(secret?.previousExpiresAt ? { previousSecret: `still signs until ${new Date(secret.previousExpiresAt).toISOString()}` } : {}),
  });
}

/** The events of --events: names from WEBHOOK_EVENTS, or "default". Pure. */
export function eventsFlag(values: string[]): string[] | null {
  if (values.length === 1 && values[0] === "default") return null;
  const bad = values.filter((v) => !(WEBHOOK_EVENTS as readonly string[]).includes(v));
  if (bad.length > 0) throw new UsageError(`--events takes ${WEBHOOK_EVENTS.join(", ")} (or default), not ${bad.join(", ")}`);
  return values;
}

export function registerWebhook(endpoint: Command): void {
  const webhook = endpoint.command("webhook").description("An endpoint's webhook events and signing secret (docs/webhooks.md)");
  webhook
    .command("show")
    .description("The events its jobs' webhooks get, and when its signing secret was made (never the secret)")
    .argument("<id>", "endpoint id")
    .option("--json", "print JSON")
    .action(async (id: string, o: { json?: boolean }) => {
      const s = await management<WebhookSettings>("GET", path(id));
      createOutput({ json: o.json }).result(s, () => human(s));
    });
  webhook
    .command("set")
    .description("Set the events its jobs' webhooks get unless a job names its own")
    .argument("<id>", "endpoint id")
    .requiredOption("--events <list>", `comma separated: ${WEBHOOK_EVENTS.join(", ")}; or default (completed, failed)`, listFlag)
    .option("--json", "print JSON")
    .action(async (id: string, o: { events: string[]; json?: boolean }) => {
      const s = await management<WebhookSettings>("PATCH", path(id), { events: eventsFlag(o.events) });
      createOutput({ json: o.json }).result(s, () => human(s));
    });
  webhook
    .command("rotate-secret")
    .description("Make a new signing secret and print it (the only time it is shown); the one it replaces still signs for --keep-previous")
    .argument("<id>", "endpoint id")
    .option(
      "--keep-previous <duration>",
      "how long the replaced secret still signs too (e.g. 1h; a bare number is seconds; default 1d; 0: not at all)",
      durationFlag("--keep-previous", "s"),
    )
    .option("--json", "print JSON")
    .action(async (id: string, o: { keepPrevious?: number; json?: boolean }) => {
      const answer = await management<{ secret: string; settings: WebhookSettings }>(
        "POST",
        path(id, "/rotate-secret"),
        o.keepPrevious === undefined ? {} : { keepPreviousSeconds: o.keepPrevious },
      );
      const out = createOutput({ json: o.json });
      out.warn("the signing secret is shown this once: store it where your webhook receiver reads it");
      out.result(answer, () => answer.secret);
    });
}
