// Server-sent events for a streamed chat reply: `data: <chat.completion.chunk>\n\n` frames, first one with the
// assistant role, then content deltas, then one with finish_reason (then usage when asked), then
// `data: [DONE]\n\n`. A job that fails mid-stream ends with an error frame, which OpenAI clients raise.

import type { ChatCompletionRequest } from "svc/internal";
import {
  chatCompletionChunk,
  completionId,
  CompletionAccumulator,
  notChatOutput,
  toolCallIdPrefix,
  type OpenAiErrorObject,
  type ReplyIdentity,
} from "./format.js";

export const SSE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
  // Tell buffering proxies to pass frames on as they come.
  "x-accel-buffering": "no",
};

export const SSE_DONE = "data: [DONE]\n\n";

export function sseFrame(value: unknown): string {
  return `data: ${JSON.stringify(value)}\n\n`;
}

export function sseErrorFrame(error: Partial<OpenAiErrorObject> & { message: string }): string {
  return sseFrame({ error: { type: "server_error", param: null, code: null, ...error } });
}

/**
 * The frames of a streamed reply, produced as the chunk outputs arrive. `outputs` throwing (the job failed or
 * was cancelled), or an output that is not a chat reply (an endpoint that is not a language model), ends the
 * stream with an error frame and no [DONE]: OpenAI clients raise it, where an empty reply would pass as success.
 */
export async function* chatCompletionFrames(
  outputs: AsyncIterable<unknown>,
  request: Pick<ChatCompletionRequest, "model" | "messages" | "stream_options">,
  identity: ReplyIdentity = {},
): AsyncGenerator<string, void, undefined> {
  const base = { id: identity.id ?? completionId(), created: identity.created ?? Math.floor(Date.now() / 1000), model: request.model };
  const accumulator = new CompletionAccumulator(request, toolCallIdPrefix(base.id));
  // The role goes out at once: the client sees the reply begin before the first token is ready.
  yield sseFrame(chatCompletionChunk(base, { role: "assistant", content: "" }));
  try {
    for await (const output of outputs) {
      const notChat = notChatOutput(output);
      if (notChat) {
        yield sseErrorFrame({ message: `The endpoint's output is not a chat reply: ${notChat}`, type: "invalid_response_error" });
        return;
      }
      const { text, toolCalls } = accumulator.add(output);
      if (text) yield sseFrame(chatCompletionChunk(base, { content: text }));
      if (toolCalls.length > 0) yield sseFrame(chatCompletionChunk(base, { tool_calls: toolCalls }));
    }
  } catch (err) {
    yield sseErrorFrame({ message: `The generation failed: ${err instanceof Error ? err.message : String(err)}` });
    return;
  }
  yield sseFrame(chatCompletionChunk(base, {}, accumulator.finishReason));
  if (request.stream_options?.include_usage) {
    yield sseFrame({ id: base.id, object: "chat.completion.chunk", created: base.created, model: base.model, choices: [], usage: accumulator.usage });
  }
  yield SSE_DONE;
}
