// The job API's route rows: /v2/{endpoint}/... for user keys (admin, jobs:*, jobs:<endpoint>), the key bare or
// as a bearer, counted against rate limits and answered by the replica serving jobs. Handlers: routes.ts (the
// job life), list.ts (recent jobs), openai-route.ts (OpenAI's paths under an endpoint, jobs underneath).

import { RUN_BODY_LIMIT, RUNSYNC_BODY_LIMIT } from "../http/body-limits.js";
import type { Route } from "../http/router.js";
import { jobRecord, jobsList } from "./list.js";
import { openAiRoute } from "./openai-route.js";
import { jobRoutes, userEndpoint, type JobCall, type JobDeps } from "./routes.js";

export type { JobDeps } from "./routes.js";

const JOB = { auth: "user", bareKey: true, rateLimited: true, jobsReplica: true, purpose: "call the job API" } as const;

export const JOB_ROUTES: ReadonlyArray<Route<JobDeps>> = [
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/run", body: RUN_BODY_LIMIT, handedOff: true, handler: jobRoutes.run },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/runsync", body: RUNSYNC_BODY_LIMIT, handler: jobRoutes.runsync },
  { ...JOB, methods: ["GET", "POST"], pattern: "/v2/:endpoint/status/:job", body: "none", handler: jobRoutes.status },
  { ...JOB, methods: ["GET", "POST"], pattern: "/v2/:endpoint/status-sync/:job", body: "none", handler: jobRoutes.statusSync },
  { ...JOB, methods: ["GET", "POST"], pattern: "/v2/:endpoint/stream/:job", body: "none", handler: jobRoutes.stream },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/cancel/:job", body: "none", handler: jobRoutes.cancel },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/retry/:job", body: "none", handler: jobRoutes.retry },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/purge-queue", body: "none", handler: jobRoutes.purgeQueue },
  { ...JOB, methods: ["GET"], pattern: "/v2/:endpoint/health", body: "none", handler: jobRoutes.health },
  { ...JOB, methods: ["GET"], pattern: "/v2/:endpoint/jobs", body: "none", purpose: "list jobs", handler: jobsList },
  { ...JOB, methods: ["GET"], pattern: "/v2/:endpoint/jobs/:job", body: "none", purpose: "read a job's record", handler: jobRecord },
  // OpenAI's paths under the endpoint (openai-route.ts reads their bodies, within OpenAI's own limit).
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/openai/v1/chat/completions", body: "handler", handler: openAi },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/openai/v1/responses", body: "handler", handler: openAi },
  { ...JOB, methods: ["GET"], pattern: "/v2/:endpoint/openai/v1/responses/:response", body: "none", handler: openAi },
  { ...JOB, methods: ["GET"], pattern: "/v2/:endpoint/openai/v1/models", body: "none", handler: openAi },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/openai/v1/completions", body: "handler", handler: openAi },
  { ...JOB, methods: ["POST"], pattern: "/v2/:endpoint/openai/v1/embeddings", body: "handler", handler: openAi },
  // Any other path there: passed through to the workers of an endpoint that passes OpenAI's routes through,
  // else a 404 that names the OpenAI base.
  { ...JOB, methods: ["GET", "POST", "PUT", "PATCH", "DELETE"], pattern: "/v2/:endpoint/openai/*rest", body: "handler", handler: openAi },
];

function openAi(call: JobCall): Promise<void> {
  const endpoint = userEndpoint(call.ctx, call.principal, call.params.endpoint!);
  const rest = call.url.pathname.split("/").filter(Boolean).slice(3).map(decodeURIComponent);
  return openAiRoute(call.ctx, call.req, call.res, ["v2", endpoint.id, "openai", ...rest], endpoint, call.url.searchParams);
}
