// Schemas of the job API, the apps/builds/environments routes, logs and the OpenAI-compatible route: the same
// small JSON Schema subset as the management API's (schema.ts), published in /openapi.json. The job API's
// submission body is validated with RunRequest itself (jobs/validate.ts); the others describe what the routes answer.

import type { Schema } from "./schema.js";
import { WEBHOOK_EVENTS } from "../webhooks/events.js";
import { WEBHOOK_SCHEMAS } from "./webhook-schemas.js";

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const str = (description?: string): Schema => (description ? { type: "string", description } : { type: "string" });
const int = (description?: string): Schema => (description ? { type: "integer", description } : { type: "integer" });
const anything = (description: string): Schema => ({ any: true, description });
const JOB_STATUSES = ["IN_QUEUE", "IN_PROGRESS", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"] as const;

/** The longest a job may wait in the queue and run, in ms (jobs/validate.ts uses the same numbers). */
export const MAX_TTL_MS = 7 * 24 * 3600_000;
export const MAX_EXECUTION_TIMEOUT_MS = 24 * 3600_000;

export const API_SCHEMAS = {
  ...WEBHOOK_SCHEMAS,
  JobStatus: { type: "string", enum: JOB_STATUSES },
  RunRequest: {
    type: "object",
    properties: {
      input: anything("The job's input: any JSON value but null; the function receives it"),
      function: str("Which function of the endpoint runs the job (required when it serves several)"),
      webhook: str("http(s) URL the job record is POSTed to when the job ends"),
      webhookV2: str("The same as webhook (the job API client's newer name); both only with the same URL"),
      webhookEvents: {
        type: "array",
        items: { type: "string", enum: WEBHOOK_EVENTS },
        maxItems: WEBHOOK_EVENTS.length,
        description: "svc addition: which events the webhook gets (default: the endpoint's filter, else completed and failed); docs/webhooks.md",
      },
      s3Config: anything("Where the worker may upload files: bucketName must be the id of one of your network volumes (docs/volumes.md)"),
      policy: {
        type: "object",
        properties: {
          executionTimeout: { type: "integer", minimum: 1, maximum: MAX_EXECUTION_TIMEOUT_MS, description: "ms a job may run" },
          ttl: {
            type: "integer",
            minimum: 1,
            maximum: MAX_TTL_MS,
            description:
              "ms the job may live from submission, queue and run together (default 24 h): a job still queued then is never started, a running one is stopped; either ends TIMED_OUT (errorType TtlExpired). Its result is then kept as any other's (30 min for /run, 1 min for /runsync; /status?ttl= changes that)",
          },
          lowPriority: { type: "boolean" },
        },
        additionalProperties: false,
      },
    },
    required: ["input"],
    additionalProperties: false,
  },
  JobAccepted: { type: "object", properties: { id: str(), status: ref("JobStatus") }, required: ["id", "status"] },
  JobRecord: {
    type: "object",
    properties: {
      id: str(),
      status: ref("JobStatus"),
      delayTime: int("ms from submission to start"),
      executionTime: int("ms the job ran"),
      output: anything(
        "The function's output (COMPLETED), or a streaming function's chunk outputs; while IN_PROGRESS, the latest progress its handler reported (ctx.progress), when it reported any",
      ),
      error: str("Why it FAILED or TIMED_OUT"),
      errorType: str(),
      errorStack: str("The stack, source-mapped to the user's files"),
      retries: int("Automatic retries so far"),
      attempts: int("svc's addition: how many times a worker took the job (2 on its first retry); absent until the first"),
    },
    required: ["id", "status"],
  },
  StreamResult: {
    type: "object",
    properties: {
      status: ref("JobStatus"),
      stream: {
        type: "array",
        items: {
          type: "object",
          properties: {
            output: anything("One chunk's output"),
            metrics: anything("Worker metrics"),
            attempt: int(
              "On chunks of a re-run only (2, 3, ...): the attempt of the job that streamed it; a reader that already had chunks of an attempt that did not count sees where the one that counts begins",
            ),
          },
          required: ["output"],
        },
      },
    },
    required: ["status", "stream"],
  },
  Health: {
    type: "object",
    properties: {
      jobs: {
        type: "object",
        properties: { completed: int(), failed: int(), inProgress: int(), inQueue: int(), retried: int() },
        required: ["completed", "failed", "inProgress", "inQueue", "retried"],
      },
      workers: {
        type: "object",
        properties: {
          idle: int(),
          running: int(),
          initializing: int(),
          draining: int(),
          ready: int(),
          throttled: int(),
          unhealthy: int("Workers that failed to start in the last 5 minutes"),
        },
        required: ["idle", "running", "initializing", "ready", "throttled"],
      },
      coldStarts: { type: "object", properties: { count: int(), lastMs: { type: ["integer", "null"] } } },
      lastStartError: ref("StartError"),
      stopFailures: {
        type: "object",
        description: "Workers the driver failed to stop since the service started (they may still run); absent when none",
        properties: { count: int(), lastError: str() },
      },
      throttledReason: str('Why workers are held back: "waiting for a GPU (HOPPER_141: 2 of 2 in use)"; absent when none waits'),
      workerList: {
        type: "array",
        description: "Each worker: its state and since when (idle: since its last job ended; else since it started)",
        items: {
          type: "object",
          properties: { id: str(), state: { type: "string", enum: ["initializing", "idle", "running"] }, since: int(), draining: { type: "boolean" } },
          required: ["id", "state", "since", "draining"],
        },
      },
      gpus: {
        type: "array",
        items: ref("Gpu"),
        description: "The host's GPUs this endpoint's workers hold (only where the service assigns GPUs: docs/gpus.md)",
      },
      storage: {
        type: "object",
        description: "Whether the service can write its store (ok false: writes answer 503 until it clears)",
        properties: {
          ok: { type: "boolean" },
          cause: { type: "string", enum: ["full", "read-only", "io", "busy", "unavailable"] },
          message: str(),
          since: int(),
        },
        required: ["ok"],
      },
    },
    required: ["jobs", "workers"],
  },
  PurgeResult: { type: "object", properties: { removed: int(), status: str() }, required: ["removed", "status"] },
  JobList: {
    type: "object",
    properties: {
      jobs: {
        type: "array",
        items: {
          type: "object",
          properties: {
            id: str(),
            status: ref("JobStatus"),
            createdAt: int(),
            delayTime: int(),
            executionTime: int(),
            function: { type: ["string", "null"] },
            input: anything("The input, when its JSON is at most 64 KiB"),
            inputOmitted: { type: "boolean" },
            error: str(),
            retries: int(),
            startedAt: { type: ["integer", "null"], description: "When a worker first took it" },
            completedAt: { type: ["integer", "null"], description: "When it ended" },
            workerId: { type: ["string", "null"], description: "The worker of its latest attempt" },
            attempts: int("How many times a worker took it"),
            resultExpired: { type: "boolean", description: "A history record: the job's result expired (input, output and stream are not kept)" },
            resultExpiredAt: int("When its result expired (history records)"),
            keptUntil: int("Until when the history record is kept"),
          },
          required: ["id", "status", "createdAt"],
        },
      },
    },
    required: ["jobs"],
  },
  LogLines: {
    type: "object",
    properties: {
      lines: {
        type: "array",
        items: {
          type: "object",
          properties: {
            ts: int(),
            workerId: str(),
            jobId: { type: ["string", "null"] },
            stream: str("stdout, stderr, log; `dropped` for the service's notice that lines over the log quotas were dropped"),
            text: str(),
            dropped: int("On a `dropped` notice: how many lines it tells of"),
          },
          required: ["ts", "workerId", "stream", "text"],
        },
      },
      dropped: int("Lines the log quotas dropped among all the lines asked for (the notices' counts added up, also beyond this answer's first 10,000 lines)"),
    },
    required: ["lines"],
  },
  Gpu: {
    type: "object",
    description: "One GPU of the service's host, as nvidia-smi last reported it, and the worker holding it",
    properties: {
      index: int(),
      uuid: str("What CUDA_VISIBLE_DEVICES and Docker's DeviceIDs name"),
      name: str("The card, as nvidia-smi prints it"),
      typeIds: { type: "array", items: { type: "string" }, description: "The GPU type ids it satisfies: its pools, then its card name" },
      memoryTotalMiB: int(),
      memoryUsedMiB: { type: ["integer", "null"] },
      utilizationPercent: { type: ["integer", "null"] },
      migMode: { type: ["string", "null"] },
      holder: anything(
        "The worker it is given to: {workerId, endpointId, typeId (the type of the endpoint's list it was allocated as)}; null: free; {held: true}: another user's worker",
      ),
    },
    required: ["index", "uuid", "name", "typeIds", "memoryTotalMiB", "holder"],
  },
  GpuList: {
    type: "object",
    properties: {
      gpus: { type: "array", items: ref("Gpu") },
      driverVersion: { type: ["string", "null"] },
      cudaVersion: { type: ["string", "null"] },
      assigning: { type: "boolean", description: "Whether workers get GPUs of their own (the host has GPUs and the service's workers run on it)" },
      workersOnHost: {
        type: "boolean",
        description: "Whether the service's workers run on this host (process or Docker): with no GPU here, GPU endpoints run on its CPU",
      },
      error: str("Why the last read of nvidia-smi failed"),
    },
    required: ["gpus", "assigning"],
  },
  ModelCache: {
    type: "object",
    description: "The host's model cache (docs/models.md)",
    properties: {
      hub: { type: ["string", "null"], description: "The hub models are fetched from; null: the service starts no workers" },
      root: { type: ["string", "null"], description: "The cache's directory (workers' HF_HOME)" },
      usedBytes: int("Bytes of the models in it"),
      limitBytes: { type: ["integer", "null"], description: "Past this, least recently used models no worker uses are evicted; null: no limit" },
      models: {
        type: "array",
        items: {
          type: "object",
          properties: {
            model: str('"org/name@revision"'),
            state: { type: "string", enum: ["ready", "fetching", "failed"] },
            commit: str("The commit its revision named when fetched"),
            bytes: int(),
            doneBytes: int("Fetched so far"),
            totalBytes: int(),
            lastUsed: int("When a worker last started with it, epoch ms"),
            inUse: int("Workers running with it"),
            error: anything("Why it could not be fetched: {code, message}; tried again later"),
          },
          required: ["model", "state", "inUse"],
        },
      },
    },
    required: ["hub", "root", "usedBytes", "limitBytes", "models"],
  },
  StartError: {
    type: "object",
    description: "The last error of a worker of this endpoint that failed to start",
    properties: { message: str("The worker's own error (its stack's first lines)"), at: int("When, epoch ms") },
    required: ["message", "at"],
  },
  Release: {
    type: "object",
    description: "One activation of a build in an environment and its outcome (docs/deploy.md, Releases)",
    properties: {
      id: str(),
      app: str(),
      env: str(),
      buildId: str(),
      previousBuildId: { type: ["string", "null"] },
      kind: { type: "string", enum: ["deploy", "rollback"] },
      state: { type: "string", enum: ["starting", "live", "failed", "superseded", "replaced"] },
      startedAt: int(),
      finishedAt: { type: ["integer", "null"] },
      endpoints: {
        type: "array",
        items: {
          type: "object",
          properties: {
            name: str(),
            id: str(),
            action: { type: "string", enum: ["create", "update"] },
            state: { type: "string", enum: ["starting", "ready", "failed"] },
            attempts: int(),
            failures: int(),
            error: { type: ["string", "null"] },
          },
          required: ["name", "id", "action", "state", "attempts", "failures"],
        },
      },
      error: anything("Why it failed: {endpoint, message}, or null"),
    },
    required: ["id", "buildId", "state", "startedAt", "endpoints"],
  },
  MetricsSeries: {
    type: "object",
    description: "The recent series behind the console's charts, kept in memory since the service started (docs/observability.md)",
    properties: {
      endpointId: str("GET /v1/endpoints/{id}/metrics: the endpoint"),
      endpointType: {
        type: "string",
        enum: ["queue", "lb"],
        description: "GET /v1/endpoints/{id}/metrics: the endpoint's type (a load-balanced endpoint has requests, errors and latency; no jobs or queue)",
      },
      endpointIds: { type: "array", items: str(), description: "GET /v1/metrics: the endpoints added up (the caller's; the operator's: all)" },
      window: { type: "string", enum: ["1h", "1d"] },
      stepSeconds: int("Each point's interval: 60 (1h) or 300 (1d)"),
      points: { type: "array", items: ref("MetricsPoint"), description: "Oldest first; the last is the interval now under way" },
      totals: ref("MetricsTotals"),
      since: str(),
    },
    required: ["window", "stepSeconds", "points", "totals"],
  },
  MetricsPoint: {
    type: "object",
    properties: {
      t: str("ISO start of the interval"),
      requests: int("Requests in the interval: job submissions, and a load-balanced endpoint's requests"),
      requestsPerMinute: { type: "number", description: "Requests per minute, averaged over the interval" },
      errors: int("A load-balanced endpoint's requests answered with a 5xx (its worker's, or the service's when no worker answered in time)"),
      latencyMs: ref("MetricsPercentiles"),
      jobs: ref("MetricsJobCounts"),
      delayMs: ref("MetricsPercentiles"),
      executionMs: ref("MetricsPercentiles"),
      coldStarts: int(),
      queueDepth: { type: ["integer", "null"], description: "The last sample in the interval (null: none)" },
      queueDepthMax: { type: ["integer", "null"], description: "The deepest sample in the interval (several endpoints: each one's deepest, added up)" },
      workers: anything("Workers by state at the last sample ({idle, running, initializing, ...}), or null"),
    },
    required: [
      "t",
      "requests",
      "requestsPerMinute",
      "errors",
      "latencyMs",
      "jobs",
      "delayMs",
      "executionMs",
      "coldStarts",
      "queueDepth",
      "queueDepthMax",
      "workers",
    ],
  },
  MetricsTotals: {
    type: "object",
    description: "The whole window: counts added up, percentiles of every job that ended in it, the latest sample",
    properties: {
      requests: int(),
      errors: int(),
      latencyMs: ref("MetricsPercentiles"),
      jobs: ref("MetricsJobCounts"),
      coldStarts: int(),
      delayMs: ref("MetricsPercentiles"),
      executionMs: ref("MetricsPercentiles"),
      queueDepth: { type: ["integer", "null"] },
      queueDepthMax: { type: ["integer", "null"] },
      workers: anything("Workers by state at the latest sample, or null"),
    },
    required: ["requests", "errors", "latencyMs", "jobs", "coldStarts", "delayMs", "executionMs", "queueDepth", "queueDepthMax", "workers"],
  },
  MetricsJobCounts: {
    type: "object",
    description: "Jobs that reached a final state, by status",
    properties: { COMPLETED: int(), FAILED: int(), CANCELLED: int(), TIMED_OUT: int() },
    required: ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"],
  },
  MetricsPercentiles: {
    type: "object",
    description: "ms, within about 5% (log-scale buckets 10% apart); null when no job ended (latencyMs: no load-balanced request was answered)",
    properties: { p50: { type: ["number", "null"] }, p95: { type: ["number", "null"] } },
    required: ["p50", "p95"],
  },
  Releases: { type: "object", properties: { app: str(), env: str(), releases: { type: "array", items: ref("Release") } }, required: ["releases"] },
  AppSummary: { type: "object", properties: { name: str(), createdAt: int(), environments: { type: "array", items: str() } }, required: ["name"] },
  Environment: {
    type: "object",
    properties: {
      app: str(),
      env: str(),
      build: { type: ["string", "null"] },
      fingerprint: { type: ["string", "null"] },
      createdAt: int(),
      activatedAt: { type: ["integer", "null"] },
      endpoints: { type: "array", items: anything("An endpoint: name, id, url, type, routes, workers, functions, unhealthyWorkers, lastStartError") },
      releases: { type: "array", items: ref("Release"), description: "Recent releases, newest first" },
    },
    required: ["app", "env", "endpoints"],
  },
  Build: {
    type: "object",
    properties: { id: str("The artifact's sha256"), app: str(), size: int(), fingerprint: str(), createdAt: int() },
    required: ["id", "app", "size"],
  },
  ActivateRequest: {
    type: "object",
    properties: {
      build: str("The sha256 of an uploaded build"),
      confirmRemove: { type: "array", items: str(), description: "Names of endpoints the release removes, confirmed" },
      manifest: anything("A plan (dry run) of a build not uploaded yet: its manifest"),
      wait: { type: "boolean", description: "false: answer 202 once the release began, not when it is live or failed (default true)" },
      rollback: { type: "boolean", description: "Record the release as a rollback" },
    },
    required: ["build"],
  },
  ChatCompletionRequest: {
    type: "object",
    description: "OpenAI's Chat Completions request (docs/llm.md lists what is read; other members are allowed)",
    properties: {
      model: str(),
      messages: { type: "array", items: anything("A message: {role, content, name?, tool_calls?, tool_call_id?}") },
      stream: { type: "boolean" },
      tools: { type: "array", items: anything("A function tool") },
      max_tokens: int(),
      temperature: { type: "number" },
    },
    required: ["model", "messages"],
  },
  ResponsesRequest: {
    type: "object",
    description: "OpenAI's Responses API request (docs/llm.md lists what is read; other members are allowed)",
    properties: {
      model: str(),
      input: anything("A string, or input items"),
      instructions: str(),
      previous_response_id: str(),
      stream: { type: "boolean" },
      store: { type: "boolean" },
      max_output_tokens: int(),
      tools: { type: "array", items: anything("A function tool") },
    },
    required: ["model", "input"],
  },
  OpenAiObject: anything("An object of OpenAI's API (chat.completion, response, model list), as docs/llm.md shows"),
} satisfies Record<string, Schema>;
