// The paths of /openapi.json beyond the management API: the job API of an endpoint, its OpenAI-compatible
// route, logs, apps/builds/environments, and the load-balanced address. Bodies and answers name the schemas of
// api-schemas.ts; `x-svc-body-limit` is each body's limit in bytes (the service answers 413 above it).

import { OPENAI_BODY_LIMIT, RUN_BODY_LIMIT, RUNSYNC_BODY_LIMIT } from "./body-limits.js";
import type { SchemaName } from "./schema.js";
import { webhookPaths } from "../webhooks/openapi.js";

const ref = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: SchemaName) => ({ "application/json": { schema: ref(name) } });
const problem = (description: string) => ({ description, content: { "application/problem+json": { schema: ref("ErrorResponse") } } });
const errors = {
  "400": problem("Bad Request"),
  "401": problem("Unauthorized: key missing, unknown, revoked or expired"),
  "403": problem("Forbidden: the key lacks the scope"),
  "404": problem("Not Found: unknown (or another user's) endpoint, job, app or environment, or an expired job"),
  "429": problem("Too Many Requests: the user's rate limit"),
};
const invalid = { "422": problem("Unprocessable Entity: `errors` lists every failure as `$.path: message`") };
const tooLarge = { "413": problem("Content Too Large: the body is over the route's limit") };
const ok = (description: string, content?: object) => ({ "200": { description, ...(content ? { content } : {}) } });
const path = (name: string, description?: string) => ({
  name,
  in: "path",
  required: true,
  schema: { type: "string" },
  ...(description ? { description } : {}),
});
const query = (name: string, description: string, type: "integer" | "string" | "boolean" = "integer") => ({
  name,
  in: "query",
  required: false,
  schema: { type },
  description,
});
const DEPLOY_BODY_LIMIT = 8 * 1024 * 1024;
const idempotencyKey = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  schema: { type: "string", minLength: 1, maxLength: 255 },
  description:
    "svc addition: one job per key (per user and endpoint) while that job's result is kept; a repeat answers with the first job (header `Idempotent-Replayed: true`), a repeat with another body is 422",
};
const keyedErrors = {
  "422": problem("Unprocessable Entity: `errors` lists every failure as `$.path: message`; also an Idempotency-Key reused with another body"),
};

/** The job API (`{queue_base_url}/v2/{endpoint_id}`, keys with admin, jobs:* or jobs:<endpoint_id>) and the OpenAI route. */
function jobApi(): Record<string, unknown> {
  const tags = ["job API"];
  const endpoint = path("endpoint_id");
  const job = path("job_id");
  const withJob = (summary: string, method: "get" | "post", answer: SchemaName, params: object[] = []) => ({
    parameters: [endpoint, job],
    [method]: { tags, summary, parameters: params, responses: { ...ok(summary, json(answer)), ...errors } },
  });
  return {
    "/v2/{endpoint_id}/run": {
      parameters: [endpoint],
      post: {
        tags,
        summary: "Queue a job; answers once it is stored",
        parameters: [idempotencyKey],
        requestBody: { required: true, content: json("RunRequest") },
        "x-svc-body-limit": RUN_BODY_LIMIT,
        responses: { ...ok("Queued", json("JobAccepted")), ...errors, ...keyedErrors, ...tooLarge },
      },
    },
    "/v2/{endpoint_id}/runsync": {
      parameters: [endpoint],
      post: {
        tags,
        summary: "Run a job and wait for its result (up to `wait` ms, then its current record)",
        parameters: [query("wait", "ms to wait, 1000..300000 (default 90000)"), idempotencyKey],
        requestBody: { required: true, content: json("RunRequest") },
        "x-svc-body-limit": RUNSYNC_BODY_LIMIT,
        responses: { ...ok("The job's record", json("JobRecord")), ...errors, ...keyedErrors, ...tooLarge },
      },
    },
    "/v2/{endpoint_id}/status/{job_id}": withJob("A job's record", "get", "JobRecord", [query("ttl", "ms the result is kept from now")]),
    "/v2/{endpoint_id}/status-sync/{job_id}": withJob("A job's record once final (or after `wait` ms)", "get", "JobRecord", [
      query("wait", "ms to wait"),
      query("ttl", "ms the result is kept from now"),
    ]),
    "/v2/{endpoint_id}/stream/{job_id}": withJob("The stream chunks since the last read (waits briefly for new ones)", "get", "StreamResult"),
    "/v2/{endpoint_id}/cancel/{job_id}": withJob("Cancel a queued or running job", "post", "JobAccepted"),
    "/v2/{endpoint_id}/retry/{job_id}": withJob("Run a FAILED or TIMED_OUT job again, same id", "post", "JobAccepted"),
    "/v2/{endpoint_id}/purge-queue": {
      parameters: [endpoint],
      post: { tags, summary: "Remove every queued job", responses: { ...ok("Removed", json("PurgeResult")), ...errors } },
    },
    "/v2/{endpoint_id}/health": {
      parameters: [endpoint],
      get: { tags, summary: "Job and worker counts", responses: { ...ok("Counts", json("Health")), ...errors } },
    },
    "/v2/{endpoint_id}/jobs": {
      parameters: [endpoint],
      get: {
        tags,
        summary: "The endpoint's recent jobs, newest first, then its job history (jobs whose results expired: resultExpired)",
        parameters: [
          query("limit", "1..500 (default 50)"),
          query("status", "only these statuses, comma-separated (FAILED,TIMED_OUT: the failures)", "string"),
          query("since", "only jobs submitted at this time or later (epoch ms or ISO 8601)", "string"),
        ],
        responses: { ...ok("Jobs", json("JobList")), ...errors },
      },
    },
    "/v2/{endpoint_id}/jobs/{job_id}": {
      parameters: [endpoint, path("job_id")],
      get: {
        tags,
        summary: "One job's record: live, or from the job history once its result expired (resultExpired: true; docs/job-api.md)",
        responses: { ...ok("The job's record", { "application/json": { schema: { type: "object" } } }), ...errors },
      },
    },
    "/v2/{endpoint_id}/openai/v1/chat/completions": {
      parameters: [endpoint],
      post: {
        tags: ["OpenAI-compatible"],
        summary: "OpenAI Chat Completions on the endpoint's workers (docs/llm.md); `stream: true` answers server-sent events",
        requestBody: { required: true, content: json("ChatCompletionRequest") },
        "x-svc-body-limit": OPENAI_BODY_LIMIT,
        responses: { ...ok("chat.completion (or text/event-stream of chat.completion.chunk)", json("OpenAiObject")), ...errors, ...invalid },
      },
    },
    "/v2/{endpoint_id}/openai/v1/completions": {
      parameters: [endpoint],
      post: {
        tags: ["OpenAI-compatible"],
        summary: "OpenAI completions of a prompt on the endpoint's text workers (docs/llm.md); `stream: true` answers server-sent events",
        requestBody: { required: true, content: json("OpenAiObject") },
        "x-svc-body-limit": OPENAI_BODY_LIMIT,
        responses: { ...ok("text_completion (or text/event-stream of text_completion)", json("OpenAiObject")), ...errors, ...invalid },
      },
    },
    "/v2/{endpoint_id}/openai/v1/embeddings": {
      parameters: [endpoint],
      post: {
        tags: ["OpenAI-compatible"],
        summary: "OpenAI embeddings of texts on a function that uses the SDK's embeddings() (docs/llm.md)",
        requestBody: { required: true, content: json("OpenAiObject") },
        "x-svc-body-limit": OPENAI_BODY_LIMIT,
        responses: { ...ok("list of embeddings", json("OpenAiObject")), ...errors, ...invalid },
      },
    },
    "/v2/{endpoint_id}/openai/v1/responses": {
      parameters: [endpoint],
      post: {
        tags: ["OpenAI-compatible"],
        summary: "OpenAI Responses API on the same workers; `stream: true` answers typed server-sent events",
        requestBody: { required: true, content: json("ResponsesRequest") },
        "x-svc-body-limit": OPENAI_BODY_LIMIT,
        responses: { ...ok("response", json("OpenAiObject")), ...errors, ...invalid },
      },
    },
    "/v2/{endpoint_id}/openai/v1/responses/{response_id}": {
      parameters: [endpoint, path("response_id")],
      get: {
        tags: ["OpenAI-compatible"],
        summary: "A stored response, while its job's result is kept",
        responses: { ...ok("response", json("OpenAiObject")), ...errors },
      },
    },
    "/v2/{endpoint_id}/openai/v1/models": {
      parameters: [endpoint],
      get: { tags: ["OpenAI-compatible"], summary: "What the endpoint serves", responses: { ...ok("list of models", json("OpenAiObject")), ...errors } },
    },
  };
}

/** Apps, environments, builds (`svc deploy`), and logs. */
function deployApi(): Record<string, unknown> {
  const tags = ["apps"];
  const app = path("app");
  const env = path("env");
  const action = (summary: string, answer: SchemaName | undefined, body: SchemaName | "object") => ({
    parameters: [app, env],
    post: {
      tags,
      summary,
      requestBody: { required: true, content: body === "object" ? { "application/json": { schema: { type: "object" } } } : json(body) },
      "x-svc-body-limit": DEPLOY_BODY_LIMIT,
      responses: {
        ...ok(summary, answer ? json(answer) : { "application/json": { schema: { type: "object" } } }),
        ...errors,
        ...invalid,
        "409": problem("Conflict"),
      },
    },
  });
  return {
    "/v1/apps": {
      get: {
        tags,
        summary: "The user's apps",
        responses: {
          ...ok("Apps", { "application/json": { schema: { type: "object", properties: { apps: { type: "array", items: ref("AppSummary") } } } } }),
          ...errors,
        },
      },
    },
    "/v1/apps/{app}": {
      parameters: [app],
      get: { tags, summary: "An app and its environments", responses: { ...ok("The app", { "application/json": { schema: { type: "object" } } }), ...errors } },
      delete: { tags, summary: "Delete an app: its environments, endpoints and builds (admin)", responses: { ...ok("Deleted"), ...errors } },
    },
    "/v1/apps/{app}/environments": {
      parameters: [app],
      get: {
        tags,
        summary: "The app's environments",
        responses: {
          ...ok("Environments", {
            "application/json": { schema: { type: "object", properties: { environments: { type: "array", items: ref("Environment") } } } },
          }),
          ...errors,
        },
      },
    },
    "/v1/apps/{app}/environments/{env}": {
      parameters: [app, env],
      get: { tags, summary: "An environment: its build and endpoints", responses: { ...ok("The environment", json("Environment")), ...errors } },
      put: { tags, summary: "Create the environment (and the app) when absent (admin)", responses: { ...ok("Created or present"), ...errors, ...invalid } },
      delete: { tags, summary: "Delete the environment and its endpoints (admin)", responses: { ...ok("Deleted"), ...errors } },
    },
    "/v1/apps/{app}/builds": {
      parameters: [app],
      post: {
        tags,
        summary: "Upload a build: the artifact (gzip tar) as the body, its sha256 in x-svc-sha256 (admin)",
        parameters: [{ name: "x-svc-sha256", in: "header", required: true, schema: { type: "string" } }],
        requestBody: { required: true, content: { "application/gzip": { schema: { type: "string", contentMediaType: "application/gzip" } } } },
        responses: { ...ok("Already there", json("Build")), "201": { description: "Stored", content: json("Build") }, ...errors, ...invalid, ...tooLarge },
      },
    },
    "/v1/apps/{app}/builds/{build}": {
      parameters: [app, path("build", "sha256")],
      get: { tags, summary: "A build already uploaded", responses: { ...ok("The build", json("Build")), ...errors } },
    },
    "/v1/apps/{app}/environments/{env}/plan": action("What activating a build would change", undefined, "ActivateRequest"),
    "/v1/apps/{app}/environments/{env}/activate": (() => {
      const route = action(
        "Make a build the environment's (admin): its new workers must start before it switches (docs/deploy.md, Releases)",
        undefined,
        "ActivateRequest",
      );
      Object.assign(route.post.responses, {
        "202": {
          description: "With wait: false, the release began; its outcome is in GET .../releases",
          content: { "application/json": { schema: { type: "object" } } },
        },
        "422": problem(
          "The release failed: its new workers could not start (the `release` member says which endpoint and why); the previous build keeps serving",
        ),
      });
      return route;
    })(),
    "/v1/apps/{app}/environments/{env}/releases": {
      parameters: [app, env],
      get: {
        tags,
        summary: "The environment's recent releases with their outcome, newest first",
        responses: { ...ok("Releases", json("Releases")), ...errors },
      },
    },
    "/v1/apps/{app}/environments/{env}/undeploy": action(
      "Remove endpoints of the environment (admin): {endpoints: [name]} or {all: true}",
      undefined,
      "object",
    ),
    "/v1/apps/{app}/environments/{env}/config": action("Configuration-only update (admin): {resources, dryRun}", undefined, "object"),
    "/v1/endpoints/{endpointId}/logs": {
      parameters: [path("endpointId")],
      get: {
        tags: ["logs"],
        summary: "Worker log lines of an endpoint (`follow=1`: NDJSON, one line per log line, until the client leaves)",
        parameters: [query("job", "only this job's lines", "string"), query("since", "epoch ms"), query("follow", "1 to follow", "string")],
        responses: { ...ok("Lines", { ...json("LogLines"), "application/x-ndjson": { schema: { type: "string" } } }), ...errors },
      },
    },
    "/v1/gpus": {
      get: {
        tags: ["gpus"],
        summary: "The service host's GPUs, their type ids, use, and the worker holding each (management:read; docs/gpus.md)",
        parameters: [query("refresh", "1 to read nvidia-smi now rather than answer the last sample", "string")],
        responses: { ...ok("GPUs", json("GpuList")), ...errors },
      },
    },
    "/v1/models": {
      get: {
        tags: ["models"],
        summary: "The host's model cache: its hub, size and limit, each model in it or being fetched (management:read; docs/models.md)",
        responses: { ...ok("Model cache", json("ModelCache")), ...errors },
      },
    },
    "/metrics": {
      get: {
        tags: ["observability"],
        summary: "Prometheus metrics in the text format (the operator: an admin key or the metrics scope; 404 with SVC_METRICS=off; docs/observability.md)",
        responses: { ...ok("Metrics", { "text/plain": { schema: { type: "string" } } }), ...errors },
      },
    },
    "/v1/endpoints/{endpointId}/metrics": {
      parameters: [path("endpointId")],
      get: {
        tags: ["observability"],
        summary:
          "An endpoint's recent per-minute series (requests, delay and execution percentiles, cold starts, queue depth, workers), kept in memory since the service started",
        parameters: [query("window", "1h (by minute, default) or 1d (by 5 minutes)", "string")],
        responses: { ...ok("Series", json("MetricsSeries")), ...errors },
      },
    },
    "/v1/metrics": {
      get: {
        tags: ["observability"],
        summary:
          "The same series added up over the caller's endpoints it may read (the console's home page); the operator's admin or metrics key: every user's",
        parameters: [query("window", "1h (by minute, default) or 1d (by 5 minutes)", "string")],
        responses: { ...ok("Series", json("MetricsSeries")), ...errors },
      },
    },
    "/v1/usage": {
      get: {
        tags: ["observability"],
        summary: "Worker-seconds, GPU-seconds by type, jobs and load-balanced requests per endpoint per hour (the caller's own; the operator may pass userId)",
        parameters: [
          query("from", "ISO 8601 or epoch ms (default: 24 hours before to)", "string"),
          query("to", "ISO 8601 or epoch ms (default: now)", "string"),
          query("userId", "another user's (operator only)", "string"),
        ],
        responses: { ...ok("Usage", { "application/json": { schema: { type: "object" } } }), ...errors },
      },
    },
    "/lb/{endpoint_id}/{path}": {
      parameters: [path("endpoint_id"), path("path", "Any path of the app's routes (it may hold slashes)")],
      get: {
        tags: ["load-balanced"],
        summary: "A load-balanced endpoint's route, proxied to a worker (any method; docs/lb.md)",
        responses: {
          "200": { description: "The worker's answer" },
          ...errors,
          "502": problem("Bad Gateway"),
          "503": problem("No worker ready in time"),
          "504": problem("The worker did not answer in time"),
        },
      },
    },
  };
}

export function servicePaths(): Record<string, unknown> {
  return { ...jobApi(), ...deployApi(), ...webhookPaths() };
}
