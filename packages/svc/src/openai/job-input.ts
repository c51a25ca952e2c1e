// The job a chat request becomes: the service writes it (src/openai/route.ts in svc-cli), textGeneration() reads
// it on the worker. Part of the SDK because both sides of the worker protocol must agree on it.

import type { ChatCompletionRequest } from "./validate.js";

export const CHAT_COMPLETIONS_ROUTE = "/v1/chat/completions";

/**
 * The job input of a chat request. `Echo` is what a Responses API request echoes back in its response object:
 * the service fills and reads it; the worker never looks at it.
 */
export interface OpenAiJobInput<Echo = unknown> {
  openai: {
    route: typeof CHAT_COMPLETIONS_ROUTE;
    input: ChatCompletionRequest;
    /** Set when the request came through the Responses API. */
    responses?: { model: string; echo: Echo };
  };
}

export function chatJobInput<Echo = unknown>(request: ChatCompletionRequest, responses?: { model: string; echo: Echo }): OpenAiJobInput<Echo> {
  return { openai: { route: CHAT_COMPLETIONS_ROUTE, input: request, ...(responses ? { responses } : {}) } };
}

export function isOpenAiJobInput(value: unknown): value is OpenAiJobInput {
  const openai = (value as { openai?: { route?: unknown; input?: unknown } } | null)?.openai;
  return typeof openai === "object" && openai !== null && openai.route === CHAT_COMPLETIONS_ROUTE && typeof openai.input === "object";
}

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter";
export const FINISH_REASONS: readonly FinishReason[] = ["stop", "length", "tool_calls", "content_filter"];
