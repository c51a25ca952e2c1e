// The webhook routes:
//
//   GET   /v1/endpoints/{id}/webhook                  the endpoint's filter and secret's dates  (management:read)
//   PATCH /v1/endpoints/{id}/webhook                  {events: [...] | null} -> set its filter  (management:write)
//   POST  /v1/endpoints/{id}/webhook/rotate-secret    {keepPreviousSeconds?} -> a new signing secret, answered
//                                                     this once                                 (management:write)
//   GET   /v2/{endpoint_id}/webhook-deliveries/{job}  a job's delivery log                      (the job API's keys)
//
// Every endpoint has these, app endpoints (`svc deploy`) and REST endpoints alike; another user's is not found.

import type { RouteCall as Call, Route } from "../http/router.js";
import type { EndpointRow } from "../store/types.js";
import type { JobEngine } from "../engine/index.js";
import { isPlainObject, sendJson } from "../http/wire.js";
import { SMALL_BODY_LIMIT } from "../http/body-limits.js";
import { HttpProblem } from "../http/problems.js";
import { userEndpoint } from "../jobs/routes.js";
import { readObjectBody, requireAccess } from "../management/context.js";
import { SCHEMAS, validate } from "../http/schema.js";
import type { WebhookEvent } from "./events.js";
import type { Webhooks } from "./index.js";
import { DEFAULT_PREVIOUS_SECRET_MS } from "./settings.js";

/** What the webhook routes read: the endpoints served, whether a job exists, and the webhooks themselves. */
export interface WebhookRouteDeps {
  endpoints: ReadonlyMap<string, EndpointRow>;
  engine: Pick<JobEngine, "recordHead">;
  webhooks?: Webhooks;
}

type RouteCall = Call<WebhookRouteDeps>;

function webhooksOf(call: RouteCall): Webhooks {
  if (!call.ctx.webhooks) throw new HttpProblem(404, `No route ${call.url.pathname}`);
  return call.ctx.webhooks;
}

/** The caller's endpoint `id`, for a management read or write. */
function ownEndpoint(call: RouteCall, write: boolean): string {
  requireAccess(call.principal, "endpoints", write);
  const id = call.params.id!;
  const endpoint = call.ctx.endpoints.get(id);
  if (!endpoint || endpoint.userId !== call.principal.userId) throw new HttpProblem(404, `No endpoint ${id}`);
  return endpoint.id;
}

async function settingsRoute(call: RouteCall): Promise<void> {
  const webhooks = webhooksOf(call);
  if (call.req.method === "GET") {
    call.req.resume();
    return sendJson(call.res, webhooks.settings.view(ownEndpoint(call, false)));
  }
  const id = ownEndpoint(call, true);
  const body = await readObjectBody(call.req);
  // null (back to the default) is the one value the schema does not describe.
  const errors = validate(SCHEMAS.UpdateWebhookSettingsRequest, body.events === null ? { ...body, events: [] } : body);
  if (errors.length > 0) throw new HttpProblem(422, "The webhook settings are not valid", { errors });
  const events = body.events === null ? null : [...new Set(body.events as WebhookEvent[])];
  sendJson(call.res, await webhooks.settings.setEvents(id, events));
}

async function rotateRoute(call: RouteCall): Promise<void> {
  const webhooks = webhooksOf(call);
  const id = ownEndpoint(call, true);
  // No body is a rotation with the default overlap; a body that is there must be an object.
  const raw = await call.json();
  if (raw !== undefined && !isPlainObject(raw)) throw new HttpProblem(400, "The request body must be a JSON object (or none)");
  const body = raw ?? {};
  const errors = validate(SCHEMAS.RotateWebhookSecretRequest, body);
  if (errors.length > 0) throw new HttpProblem(422, "The rotation is not valid", { errors });
  const keep = (body as { keepPreviousSeconds?: number }).keepPreviousSeconds;
  const { secret, view } = await webhooks.settings.rotate(id, keep === undefined ? DEFAULT_PREVIOUS_SECRET_MS : keep * 1000);
  // The one answer holding the value: not to be kept by anything between here and the caller.
  call.res.setHeader("cache-control", "no-store");
  sendJson(call.res, { secret, settings: view });
}

async function deliveriesRoute(call: RouteCall): Promise<void> {
  const endpoint = userEndpoint(call.ctx, call.principal, call.params.endpoint!);
  const jobId = call.params.job!;
  // The log lives as long as its job: an unknown or expired job is not found, as by /status.
  if (!(await call.ctx.engine.recordHead(endpoint.id, jobId))) throw new HttpProblem(404, `No job ${jobId}`);
  sendJson(call.res, await webhooksOf(call).log(jobId));
}

const MANAGE = { auth: "user", rateLimited: true, purpose: "call the management API" } as const;

export const WEBHOOK_ROUTES: Array<Route<WebhookRouteDeps>> = [
  { ...MANAGE, methods: ["GET", "PATCH"], pattern: "/v1/endpoints/:id/webhook", body: "handler", handler: settingsRoute },
  { ...MANAGE, methods: ["POST"], pattern: "/v1/endpoints/:id/webhook/rotate-secret", body: SMALL_BODY_LIMIT, handler: rotateRoute },
  {
    auth: "user",
    bareKey: true,
    rateLimited: true,
    purpose: "call the job API",
    methods: ["GET"],
    pattern: "/v2/:endpoint/webhook-deliveries/:job",
    body: "none",
    handler: deliveriesRoute,
  },
];
