// The package users import: `import { Endpoint } from "svc"`.
// Keep this entry free of build/service code: it is bundled into every worker's handler.

export { Endpoint, connect, getMeta, ENDPOINT_META } from "./endpoint.js";
export type {
  EndpointDefinition,
  EndpointFunction,
  ImageEndpoint,
  QueueFunction,
  StreamingFunction,
  RouteHandler,
  RouteContext,
  RouteDefinition,
} from "./endpoint.js";
export type { EndpointConfig, HttpMethod, ImageEndpointConfig } from "./config.js";
export { JobsClient } from "./jobs-client.js";
export type { JobRecord, JobStatus, StreamChunk, StreamResult, HealthResult, SubmitOptions } from "./jobs-client.js";
export { JobFailedError } from "./remote.js";
export { NonRetryableError, ProgressError, MAX_PROGRESS_BYTES } from "./job-context.js";
export type { JobContext, JobS3Config, JobTrace } from "./job-context.js";
export type { JobHandle, RunOptions } from "./remote.js";
export { NoContextError, clearPeerCache } from "./context.js";
export { deploy, undeploy, update, createApp, deleteApp, createEnvironment, deleteEnvironment } from "./lifecycle.js";
export { UsageError, UserError, ApiError } from "./errors.js";
export * from "./llm.js";
export * from "./embeddings.js";
// Used by generated handlers only.
export { __defineHandler } from "./handler.js";
export type { LoadedHandler, InvokeContext, InvokeResult, HandlerSpec } from "./handler.js";
