// The OpenAI-compatible chat route's wire format (validation, job mapping, replies, SSE), for the service.
export * from "./validate.js";
export * from "./format.js";
export * from "./sse.js";
export * from "./route.js";
