// Validation of an OpenAI chat-completion request body (POST .../openai/v1/chat/completions). Pure: the
// service turns the verdict into a problem+json answer (400 for a body that is not a JSON object, 422 with one
// `errors` entry per fault otherwise). Keys this route does not know are allowed: OpenAI clients send extras.
// Every message shape of the current Chat Completions API is accepted (docs/llm.md): content as a string, an
// array of parts, or null on an assistant message that carries tool_calls; tool messages with tool_call_id.

import type { ChatMessage, ChatRole } from "../llm/backend.js";
import { errorMessage } from "../errors.js";

export const CHAT_ROLES: readonly ChatRole[] = ["system", "user", "assistant", "tool", "developer", "function"];

/** A part of a message's content. Text is read by text models; other parts go to the worker as they came. */
export type ContentPart = { type: "text"; text: string } | { type: string; [key: string]: unknown };

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A message as the request sent it (validated). */
export interface ChatRequestMessage {
  role: ChatRole;
  content: string | ContentPart[] | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

export interface ToolDefinition {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean | null };
}

export type ToolChoice = "none" | "auto" | "required" | { type: "function"; function: { name: string } };

/** A validated chat request, normalised: `stop` is always a list, `null` options are dropped. */
export interface ChatCompletionRequest {
  model: string;
  messages: ChatRequestMessage[];
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  stream: boolean;
  stop?: string[];
  seed?: number;
  stream_options?: { include_usage?: boolean };
  tools?: ToolDefinition[];
  tool_choice?: ToolChoice;
  parallel_tool_calls?: boolean;
  response_format?: { type: string; [key: string]: unknown };
}

export type ChatRequestVerdict = { ok: true; request: ChatCompletionRequest } | { ok: false; status: 400 | 422; detail: string; errors: string[] };

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);
const isInteger = (value: unknown): value is number => typeof value === "number" && Number.isInteger(value);
const present = (body: Record<string, unknown>, key: string) => Object.hasOwn(body, key) && body[key] !== undefined && body[key] !== null;

/** The text of a message's content: a string as it is, the text parts of an array joined, null as "". Pure. */
export function contentText(content: ChatRequestMessage["content"] | undefined): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((p) => (p.type === "text" && typeof p.text === "string" ? p.text : p.type === "refusal" && typeof p.refusal === "string" ? p.refusal : ""))
    .filter(Boolean)
    .join("\n");
}

/**
 * The messages as a text model reads them: content as text; an assistant's tool calls and a tool's result
 * written out, so a text model sees the whole conversation. Pure.
 */
export function textMessages(messages: readonly ChatRequestMessage[]): ChatMessage[] {
  return messages.map((m) => {
    let content = contentText(m.content);
    if (m.tool_calls?.length) {
      const calls = m.tool_calls.map((c) => `${c.function.name}(${c.function.arguments})`).join("\n");
      content = content ? `${content}\n${calls}` : calls;
    }
    return { role: m.role, content };
  });
}

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

function partErrors(part: unknown, at: string, role: unknown): string[] {
  if (!isObject(part)) return [`${at}: must be an object with a type`];
  if (typeof part.type !== "string") return [`${at}.type: must be a string`];
  switch (part.type) {
    case "text":
      return typeof part.text === "string" ? [] : [`${at}.text: must be a string`];
    case "refusal":
      return role === "assistant" && typeof part.refusal === "string"
        ? []
        : [`${at}: a refusal part belongs to an assistant message, with refusal as a string`];
    case "image_url":
      return isObject(part.image_url) && typeof part.image_url.url === "string" ? [] : [`${at}.image_url.url: must be a string`];
    case "input_audio":
      return isObject(part.input_audio) && typeof part.input_audio.data === "string" ? [] : [`${at}.input_audio.data: must be a string`];
    default:
      // Newer part types (files, ...) go to the worker as they are: the model decides what it reads.
      return [];
  }
}

function toolCallErrors(calls: unknown, at: string): string[] {
  if (!Array.isArray(calls)) return [`${at}: must be an array`];
  const errors: string[] = [];
  calls.forEach((call, i) => {
    const c = `${at}[${i}]`;
    if (!isObject(call)) return void errors.push(`${c}: must be an object with id, type and function`);
    if (typeof call.id !== "string") errors.push(`${c}.id: must be a string`);
    if (call.type !== undefined && call.type !== "function") errors.push(`${c}.type: must be "function"`);
    if (!isObject(call.function)) return void errors.push(`${c}.function: must be an object with name and arguments`);
    if (typeof call.function.name !== "string") errors.push(`${c}.function.name: must be a string`);
    if (typeof call.function.arguments !== "string") errors.push(`${c}.function.arguments: must be a string (JSON text)`);
  });
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
    const role = message.role;
    if (role === undefined) errors.push(`${at}.role: is required`);
    else if (typeof role !== "string" || !CHAT_ROLES.includes(role as ChatRole)) {
      errors.push(`${at}.role: must be one of ${CHAT_ROLES.join(", ")}`);
    }
    const hasToolCalls = Array.isArray(message.tool_calls) && message.tool_calls.length > 0;
    const content = message.content;
    if (content === undefined || content === null) {
      // An assistant message that only calls tools has no content.
      if (!(role === "assistant" && hasToolCalls)) errors.push(`${at}.content: is required${role === "assistant" ? " (or tool_calls)" : ""}`);
    } else if (Array.isArray(content)) {
      content.forEach((part, j) => errors.push(...partErrors(part, `${at}.content[${j}]`, role)));
    } else if (typeof content !== "string") {
      errors.push(`${at}.content: must be a string or an array of content parts`);
    }
    if (message.name !== undefined && typeof message.name !== "string") errors.push(`${at}.name: must be a string`);
    if (message.tool_calls !== undefined && message.tool_calls !== null) {
      if (role !== "assistant") errors.push(`${at}.tool_calls: only assistant messages call tools`);
      else errors.push(...toolCallErrors(message.tool_calls, `${at}.tool_calls`));
    }
    if (role === "tool" && typeof message.tool_call_id !== "string") errors.push(`${at}.tool_call_id: is required on a tool message (a string)`);
  });
  return errors;
}

function toolsErrors(body: Record<string, unknown>): string[] {
  const errors: string[] = [];
  if (present(body, "tools")) {
    if (!Array.isArray(body.tools)) errors.push("$.tools: must be an array");
    else
      body.tools.forEach((tool, i) => {
        const at = `$.tools[${i}]`;
        if (!isObject(tool) || tool.type !== "function") return void errors.push(`${at}.type: must be "function"`);
        if (!isObject(tool.function) || typeof tool.function.name !== "string" || tool.function.name === "") {
          return void errors.push(`${at}.function.name: must be a non-empty string`);
        }
        if (tool.function.parameters !== undefined && !isObject(tool.function.parameters))
          errors.push(`${at}.function.parameters: must be a JSON Schema object`);
      });
  }
  if (present(body, "tool_choice")) {
    const c = body.tool_choice;
    const named = isObject(c) && c.type === "function" && isObject(c.function) && typeof c.function.name === "string";
    if (!(c === "none" || c === "auto" || c === "required" || named))
      errors.push('$.tool_choice: must be "none", "auto", "required" or {type: "function", function: {name}}');
  }
  if (present(body, "parallel_tool_calls") && typeof body.parallel_tool_calls !== "boolean") errors.push("$.parallel_tool_calls: must be a boolean");
  if (present(body, "response_format")) {
    const f = body.response_format;
    if (!isObject(f) || !["text", "json_object", "json_schema"].includes(f.type as string))
      errors.push('$.response_format.type: must be "text", "json_object" or "json_schema"');
    else if (f.type === "json_schema" && !isObject(f.json_schema)) errors.push("$.response_format.json_schema: must be an object");
  }
  return errors;
}

/** Every fault of a chat request body that is a JSON object; empty when it is valid. */
export function chatRequestErrors(body: Record<string, unknown>): string[] {
  const errors: string[] = [];
  if (body.model === undefined) errors.push("$.model: is required");
  else if (typeof body.model !== "string" || body.model.length === 0) errors.push("$.model: must be a non-empty string");
  errors.push(...messagesErrors(body.messages));
  errors.push(...samplingErrors(body));
  errors.push(...toolsErrors(body));
  if (present(body, "stream") && typeof body.stream !== "boolean") errors.push("$.stream: must be a boolean");
  // One choice, and no log probabilities: what a worker produces is one reply with no per-token probabilities.
  if (present(body, "n") && body.n !== 1) errors.push("$.n: only 1 is supported");
  if (present(body, "logprobs") && body.logprobs !== false) errors.push("$.logprobs: not supported by this endpoint (send false or leave it out)");
  if (present(body, "stream_options")) {
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

/** A validated message with only the members the route knows. */
function normaliseMessage(m: Record<string, unknown>): ChatRequestMessage {
  const out: ChatRequestMessage = { role: m.role as ChatRole, content: (m.content ?? null) as ChatRequestMessage["content"] };
  if (typeof m.name === "string") out.name = m.name;
  if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
    out.tool_calls = (m.tool_calls as ToolCall[]).map((c) => ({
      id: c.id,
      type: "function",
      function: { name: c.function.name, arguments: c.function.arguments },
    }));
  }
  if (typeof m.tool_call_id === "string") out.tool_call_id = m.tool_call_id;
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
    messages: (body.messages as Array<Record<string, unknown>>).map(normaliseMessage),
    stream: body.stream === true,
    ...normaliseSampling(body),
  };
  if (isObject(body.stream_options) && typeof body.stream_options.include_usage === "boolean") {
    request.stream_options = { include_usage: body.stream_options.include_usage };
  }
  if (Array.isArray(body.tools) && body.tools.length > 0) request.tools = body.tools as ToolDefinition[];
  if (present(body, "tool_choice")) request.tool_choice = body.tool_choice as ToolChoice;
  if (typeof body.parallel_tool_calls === "boolean") request.parallel_tool_calls = body.parallel_tool_calls;
  if (isObject(body.response_format)) request.response_format = body.response_format as ChatCompletionRequest["response_format"];
  return { ok: true, request };
}

/** Check a raw body: malformed JSON is 400. */
export function parseChatRequest(text: string): ChatRequestVerdict {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    return { ok: false, status: 400, detail: `The request body is not valid JSON: ${errorMessage(err)}`, errors: [] };
  }
  return checkChatRequest(body);
}
