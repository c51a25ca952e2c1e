// The OpenAI-compatible routes' wire format (validation, job mapping, replies, SSE), for the service.
// The request checks live in the SDK (the worker's textGeneration() applies the same ones).
export {
  CHAT_ROLES,
  checkChatRequest,
  chatRequestErrors,
  contentText,
  messagesErrors,
  normaliseSampling,
  parseChatRequest,
  samplingErrors,
  textMessages,
  type ChatCompletionRequest,
  type ChatRequestMessage,
  type ChatRequestVerdict,
  type ContentPart,
  type ToolCall,
  type ToolChoice,
  type ToolDefinition,
} from "svc/internal";
export * from "./format.js";
export * from "./sse.js";
export * from "./route.js";
export * from "./completions.js";
export * from "./embeddings.js";
export * from "./passthrough.js";
export * from "./passthrough-route.js";
