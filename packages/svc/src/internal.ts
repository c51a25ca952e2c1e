// `svc/internal`: what svc-cli (the service, the build, the worker runtime, the CLI) shares with the SDK. Not a
// public API: no semver promise beyond the exact version svc-cli depends on. It exists so that both sides of
// the worker protocol (the manifest, the handler contract, the job input of a chat request) and the error
// hierarchy have ONE definition: an error the SDK throws is an instance of the class the CLI catches.
// docs/packages.md lists what belongs here.

export * from "./errors.js";
export { processAlive } from "./process-alive.js";

// The build's output and the worker protocol.
export * from "./manifest.js";
export * from "./config.js";
export * from "./env-policy.js";
export type { HandlerSpec, InvokeContext, InvokeResult, LoadedHandler } from "./handler.js";
export type { RouteContext, RouteDefinition } from "./endpoint.js";
export * from "./job-context.js";
export * from "./gpus/pools.js";
export * from "./models.js";

// Where a call goes (worker, dev session, deployed app) and the job API client.
export {
  DEV_SESSION_FILE,
  PEER_CACHE_MS,
  clearPeerCache,
  envSetting,
  findDevSession,
  reachablePeerUrl,
  readDotEnv,
  resolveEndpoint,
  setRuntime,
  type DevSession,
  type RuntimeContext,
} from "./context.js";
export * from "./target.js";
export { HttpConnectionError, KeepAliveClient, type HttpAnswer, type HttpCall } from "./keep-alive-client.js";
export { FINAL_STATUSES, JobsClient, QUIET_HEADER, parseServiceJson, problemOf, readJson, type JobRecord, type JobStatus } from "./jobs-client.js";

// Language-model endpoints: the service's OpenAI route and the worker's textGeneration() read the same shapes.
export { chunkMetrics, textGeneration, type TextBackend, type TextGenerationOutput } from "./llm.js";
export * from "./llm/backend.js";
export * from "./llm/tokens.js";
export { MarkovTextBackend } from "./llm/markov.js";
export * from "./openai/validate.js";
export * from "./openai/job-input.js";
export * from "./openai/embeddings.js";
