// Validation of an OpenAI chat-completion request body (POST .../openai/v1/chat/completions). Pure: the
// service turns the verdict into a problem+json answer (400 for a body that is not a JSON object, 422 with one
// `errors` entry per fault otherwise). Keys this route does not know are allowed: OpenAI clients send extras.

import type { ChatMessage, ChatRole } from "../llm/backend.js";

export const CHAT_ROLES: readonly ChatRole[] = ["system", "user", "assistant", "tool", "developer", "function"];

/** A validated chat request, normalised: `stop` is always a list, `null` options are dropped. */
export interface ChatCompletionRequest {
  model: string;
  messages: ChatMessage[];
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  stream: boolean;
  stop?: string[];
  seed?: number;
  stream_options?: { include_usage?: boolean };
}

export type ChatRequestVerdict =
  | { ok: true; request: ChatCompletionRequest }
  | { ok: false; status: 400 | 422; detail: string; errors: string[] };

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const isInteger = (value: unknown): value is number => typeof value === "number" && Number.isInteger(value);

/** Faults of the sampling options shared by chat requests and plain text-generation inputs. */
export function samplingErrors(body: Record<string, unknown>): string[] {
  const errors: string[] = [];
  const present = (key: string) => body[key] !== undefined && body[key] !== null;
  for (const key of ["max_tokens", "max_completion_tokens"]) {
    if (present(key) && !(isInteger(body[key]) && (body[key] as number) >= 1)) errors.push(`$.${key}: must be an integer >= 1`);
  }
  if (present("temperature")) {
    const t = body.temperature;
    if (typeof t !== "number" || !Number.isFinite(t) || t < 0 || t > 2) errors.push("$.temperature: must be a number from 0 to 2");
  }
  if (present("top_p")) {
    const p = body.top_p;
    if (typeof p !== "number" || !Number.isFinite(p) || p <= 0 || p > 1) errors.push("$.top_p: must be a number greater than 0 and at most 1");
  }
  if (present("stop")) {
    const stop = body.stop;
    if (Array.isArray(stop)) {
      if (stop.length > 4) errors.push("$.stop: must hold at most 4 strings");
      stop.forEach((s, i) => {
        if (typeof s !== "string") errors.push(`$.stop[${i}]: must be a string`);
      });
    } else if (typeof stop !== "string") {
      errors.push("$.stop: must be a string or an array of strings");
    }
  }
  if (present("seed") && !(isInteger(body.seed) && Math.abs(body.seed as number) <= Number.MAX_SAFE_INTEGER)) {
    errors.push("$.seed: must be an integer");
  }
  return errors;
}

/** Faults of a `messages` array, as `$.messages...: message` strings. */
export function messagesErrors(messages: unknown): string[] {
  if (messages === undefined) return ["$.messages: is required"];
  if (!Array.isArray(messages)) return ["$.messages: must be an array"];
  if (messages.length === 0) return ["$.messages: must hold at least one message"];
  const errors: string[] = [];
  messages.forEach((message, i) => {
    const at = `$.messages[${i}]`;
    if (!isObject(message)) {
      errors.push(`${at}: must be an object with role and content`);
      return;
    }
    if (message.role === undefined) errors.push(`${at}.role: is required`);
    else if (typeof message.role !== "string" || !CHAT_ROLES.includes(message.role as ChatRole)) {
      errors.push(`${at}.role: must be one of ${CHAT_ROLES.join(", ")}`);
    }
    if (message.content === undefined) errors.push(`${at}.content: is required`);
    else if (typeof message.content !== "string") errors.push(`${at}.content: must be a string`);
  });
  return errors;
}

/** Every fault of a chat request body that is a JSON object; empty when it is valid. */
export function chatRequestErrors(body: Record<string, unknown>): string[] {
  const errors: string[] = [];
  if (body.model === undefined) errors.push("$.model: is required");
  else if (typeof body.model !== "string" || body.model.length === 0) errors.push("$.model: must be a non-empty string");
  errors.push(...messagesErrors(body.messages));
  errors.push(...samplingErrors(body));
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean") errors.push("$.stream: must be a boolean");
  if (body.n !== undefined && body.n !== null && body.n !== 1) errors.push("$.n: only 1 is supported");
  if (body.stream_options !== undefined && body.stream_options !== null) {
    if (!isObject(body.stream_options)) errors.push("$.stream_options: must be an object");
    else if (body.stream_options.include_usage !== undefined && typeof body.stream_options.include_usage !== "boolean") {
      errors.push("$.stream_options.include_usage: must be a boolean");
    }
  }
  return errors;
}

/** Normalise the sampling options of a body already checked by samplingErrors(). */
export function normaliseSampling(body: Record<string, unknown>): Pick<ChatCompletionRequest, "max_tokens" | "temperature" | "top_p" | "stop" | "seed"> {
  const out: Pick<ChatCompletionRequest, "max_tokens" | "temperature" | "top_p" | "stop" | "seed"> = {};
  // max_completion_tokens is the newer name; when both are sent, the smaller bound wins.
  const bounds = [body.max_tokens, body.max_completion_tokens].filter(isInteger);
  if (bounds.length > 0) out.max_tokens = Math.min(...bounds);
  if (typeof body.temperature === "number") out.temperature = body.temperature;
  if (typeof body.top_p === "number") out.top_p = body.top_p;
  if (typeof body.stop === "string") out.stop = [body.stop];
  else if (Array.isArray(body.stop)) out.stop = body.stop as string[];
  if (isInteger(body.seed)) out.seed = body.seed;
  return out;
}

/** Check a parsed body: 400 when it is not a JSON object, 422 listing every fault, else the request. */
export function checkChatRequest(body: unknown): ChatRequestVerdict {
  if (!isObject(body)) {
    return { ok: false, status: 400, detail: "The request body must be a JSON object", errors: [] };
  }
  const errors = chatRequestErrors(body);
  if (errors.length > 0) {
    return { ok: false, status: 422, detail: `The chat completion request is invalid (${errors.length} problem${errors.length > 1 ? "s" : ""})`, errors };
  }
  const request: ChatCompletionRequest = {
    model: body.model as string,
    messages: (body.messages as Array<Record<string, unknown>>).map((m) => ({ role: m.role as ChatRole, content: m.content as string })),
    stream: body.stream === true,
    ...normaliseSampling(body),
  };
  if (isObject(body.stream_options) && typeof body.stream_options.include_usage === "boolean") {
    request.stream_options = { include_usage: body.stream_options.include_usage };
  }
  return { ok: true, request };
}

/** Check a raw body: malformed JSON is 400. */
export function parseChatRequest(text: string): ChatRequestVerdict {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    return { ok: false, status: 400, detail: `The request body is not valid JSON: ${(err as Error).message}`, errors: [] };
  }
  return checkChatRequest(body);
}
