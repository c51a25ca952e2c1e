// The Responses API (POST .../openai/v1/responses, GET .../responses/{id}) mapped onto the same chat workers as
// the chat route: a Responses request becomes a chat request (instructions as a system message, input items as
// messages, function calls and their outputs as tool calls and tool messages), the worker's reply becomes a
// response object with output items, or its typed stream events. Pure, apart from the resolver the caller gives
// for earlier responses (previous_response_id, item_reference). docs/llm.md has the shapes.

import { CompletionAccumulator, notChatOutput, toolCallIdPrefix, type FinishReason } from "./format.js";
import {
  chatRequestErrors,
  type ChatCompletionRequest,
  type ChatRequestMessage,
  type ContentPart,
  type ToolCall,
  type ToolChoice,
  type ToolDefinition,
} from "svc/internal";

export const RESPONSES_ROUTE = "/v1/responses";

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const present = (b: Record<string, unknown>, k: string) => Object.hasOwn(b, k) && b[k] !== undefined && b[k] !== null;

/** The members of a Responses request that shape the response object (echoed back, as OpenAI does). */
export interface ResponsesEcho {
  instructions: string | null;
  max_output_tokens: number | null;
  previous_response_id: string | null;
  store: boolean;
  metadata: Record<string, string>;
  tools: unknown[];
  tool_choice: unknown;
  parallel_tool_calls: boolean;
  temperature: number | null;
  top_p: number | null;
  text: { format: Record<string, unknown> };
}

export interface ResponsesRequest {
  model: string;
  input: unknown[];
  stream: boolean;
  echo: ResponsesEcho;
  /** The chat request's options (sampling, tools) before the messages are known. */
  chat: Omit<ChatCompletionRequest, "messages">;
}

export type ResponsesVerdict = { ok: true; request: ResponsesRequest } | { ok: false; status: 400 | 422; detail: string; errors: string[] };

/** A reference to an earlier response's item or whole conversation, resolved by the caller. */
export type ResolveEarlier = (ref: { response: string } | { item: string }) => Promise<ChatRequestMessage[] | undefined>;

function contentOf(content: unknown, at: string, errors: string[]): string | ContentPart[] | null {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) {
    errors.push(`${at}: must be a string or an array of content parts`);
    return null;
  }
  return content.map((part, i): ContentPart => {
    if (!isObject(part) || typeof part.type !== "string") {
      errors.push(`${at}[${i}]: must be an object with a type`);
      return { type: "text", text: "" };
    }
    if (part.type === "input_text" || part.type === "output_text" || part.type === "text") {
      if (typeof part.text !== "string") errors.push(`${at}[${i}].text: must be a string`);
      return { type: "text", text: String(part.text ?? "") };
    }
    if (part.type === "input_image") {
      const url = typeof part.image_url === "string" ? part.image_url : undefined;
      return url
        ? { type: "image_url", image_url: { url, ...(typeof part.detail === "string" ? { detail: part.detail } : {}) } }
        : ({ ...part } as ContentPart);
    }
    if (part.type === "refusal") return { type: "refusal", refusal: String(part.refusal ?? "") };
    // Files and newer part types go to the worker as they came.
    return { ...part } as ContentPart;
  });
}

function inputErrors(input: unknown): string[] {
  if (typeof input === "string") return [];
  if (!Array.isArray(input)) return ["$.input: must be a string or an array of items"];
  if (input.length === 0) return ["$.input: must hold at least one item"];
  const errors: string[] = [];
  input.forEach((item, i) => {
    const at = `$.input[${i}]`;
    if (!isObject(item)) return void errors.push(`${at}: must be an object`);
    const type = item.type ?? "message";
    if (type === "message") {
      if (!["user", "assistant", "system", "developer"].includes(item.role as string))
        errors.push(`${at}.role: must be one of user, assistant, system, developer`);
      contentOf(item.content, `${at}.content`, errors);
    } else if (type === "function_call") {
      if (typeof item.call_id !== "string") errors.push(`${at}.call_id: must be a string`);
      if (typeof item.name !== "string") errors.push(`${at}.name: must be a string`);
      if (typeof item.arguments !== "string") errors.push(`${at}.arguments: must be a string (JSON text)`);
    } else if (type === "function_call_output") {
      if (typeof item.call_id !== "string") errors.push(`${at}.call_id: must be a string`);
      if (typeof item.output !== "string" && !Array.isArray(item.output)) errors.push(`${at}.output: must be a string or an array of content parts`);
    } else if (type === "item_reference") {
      if (typeof item.id !== "string") errors.push(`${at}.id: must be a string`);
    } else if (type !== "reasoning") {
      errors.push(
        `${at}.type: ${JSON.stringify(type)} is not an input item this endpoint takes (message, function_call, function_call_output, item_reference)`,
      );
    }
  });
  return errors;
}

/** Check a Responses request body: 400 when it is not an object, 422 listing every fault, else the request. */
export function checkResponsesRequest(body: unknown): ResponsesVerdict {
  if (!isObject(body)) return { ok: false, status: 400, detail: "The request body must be a JSON object", errors: [] };
  const errors: string[] = [];
  if (typeof body.model !== "string" || body.model === "") errors.push("$.model: must be a non-empty string");
  errors.push(...inputErrors(body.input));
  if (present(body, "instructions") && typeof body.instructions !== "string") errors.push("$.instructions: must be a string");
  if (present(body, "previous_response_id") && typeof body.previous_response_id !== "string") errors.push("$.previous_response_id: must be a string");
  if (present(body, "store") && typeof body.store !== "boolean") errors.push("$.store: must be a boolean");
  const tools: ToolDefinition[] = [];
  if (present(body, "tools")) {
    if (!Array.isArray(body.tools)) errors.push("$.tools: must be an array");
    else
      body.tools.forEach((t, i) => {
        if (!isObject(t) || t.type !== "function")
          return void errors.push(`$.tools[${i}].type: only "function" tools are served here (the worker runs them through its caller)`);
        if (typeof t.name !== "string" || t.name === "") return void errors.push(`$.tools[${i}].name: must be a non-empty string`);
        tools.push({
          type: "function",
          function: {
            name: t.name,
            ...(typeof t.description === "string" ? { description: t.description } : {}),
            ...(isObject(t.parameters) ? { parameters: t.parameters } : {}),
            ...(typeof t.strict === "boolean" ? { strict: t.strict } : {}),
          },
        });
      });
  }
  let toolChoice: ToolChoice | undefined;
  if (present(body, "tool_choice")) {
    const c = body.tool_choice;
    if (c === "none" || c === "auto" || c === "required") toolChoice = c;
    else if (isObject(c) && c.type === "function" && typeof c.name === "string") toolChoice = { type: "function", function: { name: c.name } };
    else errors.push('$.tool_choice: must be "none", "auto", "required" or {type: "function", name}');
  }
  const format = isObject(body.text) && isObject(body.text.format) ? body.text.format : { type: "text" };
  // The chat route's own checks for what both share (sampling, stream), named as the Responses API names them.
  const sampling: Record<string, unknown> = { model: "m", messages: [{ role: "user", content: "" }] };
  for (const key of ["temperature", "top_p", "stream", "parallel_tool_calls"]) if (present(body, key)) sampling[key] = body[key];
  if (present(body, "max_output_tokens")) sampling.max_tokens = body.max_output_tokens;
  errors.push(...chatRequestErrors(sampling).map((e) => e.replace("$.max_tokens", "$.max_output_tokens")));
  if (errors.length > 0)
    return { ok: false, status: 422, detail: `The response request is invalid (${errors.length} problem${errors.length > 1 ? "s" : ""})`, errors };

  const num = (k: string) => (typeof body[k] === "number" ? (body[k] as number) : null);
  const chat: Omit<ChatCompletionRequest, "messages"> = { model: body.model as string, stream: body.stream === true };
  if (typeof body.max_output_tokens === "number") chat.max_tokens = body.max_output_tokens;
  if (num("temperature") !== null) chat.temperature = num("temperature")!;
  if (num("top_p") !== null) chat.top_p = num("top_p")!;
  if (tools.length > 0) chat.tools = tools;
  if (toolChoice !== undefined) chat.tool_choice = toolChoice;
  if (typeof body.parallel_tool_calls === "boolean") chat.parallel_tool_calls = body.parallel_tool_calls;
  if (format.type === "json_object") chat.response_format = { type: "json_object" };
  else if (format.type === "json_schema")
    chat.response_format = { type: "json_schema", json_schema: { name: format.name, schema: format.schema, strict: format.strict } };
  return {
    ok: true,
    request: {
      model: body.model as string,
      input: typeof body.input === "string" ? [{ type: "message", role: "user", content: body.input }] : (body.input as unknown[]),
      stream: body.stream === true,
      chat,
      echo: {
        instructions: typeof body.instructions === "string" ? body.instructions : null,
        max_output_tokens: typeof body.max_output_tokens === "number" ? body.max_output_tokens : null,
        previous_response_id: typeof body.previous_response_id === "string" ? body.previous_response_id : null,
        store: body.store !== false,
        metadata: isObject(body.metadata) ? (body.metadata as Record<string, string>) : {},
        tools: Array.isArray(body.tools) ? body.tools : [],
        tool_choice: body.tool_choice ?? "auto",
        parallel_tool_calls: body.parallel_tool_calls !== false,
        temperature: num("temperature"),
        top_p: num("top_p"),
        text: { format },
      },
    },
  };
}

/** Thrown for a reference to a response or item this service does not have (any more): a 404 for the client. */
export class UnknownReferenceError extends Error {
  readonly status = 404;
}

/** The chat request a Responses request becomes: instructions first, earlier turns, then the input items. */
export async function toChatRequest(r: ResponsesRequest, resolve: ResolveEarlier): Promise<ChatCompletionRequest> {
  const messages: ChatRequestMessage[] = [];
  if (r.echo.instructions) messages.push({ role: "system", content: r.echo.instructions });
  if (r.echo.previous_response_id) {
    const earlier = await resolve({ response: r.echo.previous_response_id });
    if (!earlier) throw new UnknownReferenceError(`No stored response ${r.echo.previous_response_id} (unknown, not stored, or expired)`);
    // The earlier turn's own instructions do not carry over (as OpenAI documents for previous_response_id).
    messages.push(...earlier.filter((m) => m.role !== "system"));
  }
  for (const raw of r.input) {
    const item = raw as Record<string, unknown>;
    const type = item.type ?? "message";
    if (type === "message") {
      const role = item.role === "developer" ? "developer" : (item.role as ChatRequestMessage["role"]);
      messages.push({ role, content: contentOf(item.content, "", []) });
    } else if (type === "function_call") {
      const call: ToolCall = { id: item.call_id as string, type: "function", function: { name: item.name as string, arguments: item.arguments as string } };
      // Calls made in one turn are one assistant message, as the chat format has them.
      const last = messages[messages.length - 1];
      if (last?.role === "assistant" && last.tool_calls && (last.content === null || last.content === "")) last.tool_calls.push(call);
      else messages.push({ role: "assistant", content: null, tool_calls: [call] });
    } else if (type === "function_call_output") {
      messages.push({
        role: "tool",
        tool_call_id: item.call_id as string,
        content: typeof item.output === "string" ? item.output : contentOf(item.output, "", []),
      });
    } else if (type === "item_reference") {
      const found = await resolve({ item: item.id as string });
      if (!found) throw new UnknownReferenceError(`No stored item ${String(item.id)} (unknown, not stored, or expired)`);
      messages.push(...found);
    }
    // Reasoning items carry nothing a chat worker reads.
  }
  return { ...r.chat, messages };
}

export interface ResponseMeta {
  /** The job's id: the response is resp_<jobId>, its items msg_<jobId> and fc_<jobId>_<n>. */
  jobId: string;
  created: number;
  model: string;
  echo: ResponsesEcho;
}

export type OutputItem =
  | {
      id: string;
      type: "message";
      status: "completed" | "in_progress";
      role: "assistant";
      content: Array<{ type: "output_text"; text: string; annotations: unknown[]; logprobs: unknown[] }>;
    }
  | { id: string; type: "function_call"; status: "completed" | "in_progress"; call_id: string; name: string; arguments: string };

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface ResponseObject extends ResponsesEcho {
  id: string;
  object: "response";
  created_at: number;
  status: "completed" | "incomplete" | "in_progress" | "failed";
  error: { code: string; message: string } | null;
  incomplete_details: { reason: "max_output_tokens" | "content_filter" } | null;
  model: string;
  output: OutputItem[];
  output_text?: string;
  reasoning: { effort: null; summary: null };
  truncation: "disabled";
  usage: ResponseUsage | null;
  user: null;
}

export const responseId = (jobId: string) => `resp_${jobId}`;
export const messageItemId = (jobId: string) => `msg_${jobId}`;
export const callItemId = (jobId: string, index: number) => `fc_${jobId}_${index}`;

/** A response's or item's id back to its job (and item), or undefined for ids this service did not make. Pure. */
export function parseResponseRef(id: string): { jobId: string; item?: { kind: "message" } | { kind: "call"; index: number } } | undefined {
  let m = /^resp_([A-Za-z0-9-]+)$/.exec(id);
  if (m) return { jobId: m[1]! };
  m = /^msg_([A-Za-z0-9-]+)$/.exec(id);
  if (m) return { jobId: m[1]!, item: { kind: "message" } };
  m = /^fc_([A-Za-z0-9-]+)_(\d+)$/.exec(id);
  if (m) return { jobId: m[1]!, item: { kind: "call", index: Number(m[2]) } };
  return undefined;
}

function usageOf(acc: CompletionAccumulator): ResponseUsage {
  const u = acc.usage;
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.total_tokens,
  };
}

function itemsOf(acc: CompletionAccumulator, jobId: string): OutputItem[] {
  const items: OutputItem[] = [];
  if (acc.text !== "" || acc.toolCalls.length === 0) {
    items.push({
      id: messageItemId(jobId),
      type: "message",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: acc.text, annotations: [], logprobs: [] }],
    });
  }
  acc.toolCalls.forEach((c, i) =>
    items.push({ id: callItemId(jobId, i), type: "function_call", status: "completed", call_id: c.id, name: c.function.name, arguments: c.function.arguments }),
  );
  return items;
}

function statusOf(finish: FinishReason): Pick<ResponseObject, "status" | "incomplete_details"> {
  if (finish === "length") return { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } };
  if (finish === "content_filter") return { status: "incomplete", incomplete_details: { reason: "content_filter" } };
  return { status: "completed", incomplete_details: null };
}

function shell(meta: ResponseMeta): ResponseObject {
  return {
    id: responseId(meta.jobId),
    object: "response",
    created_at: meta.created,
    status: "in_progress",
    error: null,
    incomplete_details: null,
    model: meta.model,
    output: [],
    reasoning: { effort: null, summary: null },
    truncation: "disabled",
    usage: null,
    user: null,
    ...meta.echo,
  };
}

/** The response object of a finished job, from its output (a generator's chunk outputs, or one output). */
export function responseFromOutput(output: unknown, chat: Pick<ChatCompletionRequest, "messages">, meta: ResponseMeta): ResponseObject {
  const acc = new CompletionAccumulator(chat, toolCallIdPrefix(responseId(meta.jobId)));
  for (const chunk of Array.isArray(output) ? output : output === null || output === undefined ? [] : [output]) acc.add(chunk);
  const output_ = itemsOf(acc, meta.jobId);
  return { ...shell(meta), ...statusOf(acc.finishReason), output: output_, output_text: acc.text, usage: usageOf(acc) };
}

/** The assistant turn of a response, as chat messages (for previous_response_id and item references). Pure. */
export function responseMessages(response: Pick<ResponseObject, "output">): ChatRequestMessage[] {
  const out: ChatRequestMessage[] = [];
  for (const item of response.output) {
    if (item.type === "message") out.push({ role: "assistant", content: item.content.map((c) => c.text).join("") });
    else {
      const call: ToolCall = { id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } };
      const last = out[out.length - 1];
      if (last?.role === "assistant" && last.tool_calls) last.tool_calls.push(call);
      else if (last?.role === "assistant" && last.content === "") Object.assign(last, { content: null, tool_calls: [call] });
      else out.push({ role: "assistant", content: null, tool_calls: [call] });
    }
  }
  return out;
}

/** One server-sent event of a streamed response: `event: <type>` and its data (which repeats the type). */
function event(type: string, seq: number, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq, ...data })}\n\n`;
}

/**
 * The typed events of a streamed response, as the job's chunk outputs arrive: response.created and
 * .in_progress; per output item .output_item.added, its text deltas (or function-call argument deltas), their
 * .done events and .output_item.done; then response.completed (or .incomplete). A failed job, or output that is
 * not a chat reply, ends with an `error` event (which the official clients raise) and response.failed.
 */
export async function* responseEvents(
  outputs: AsyncIterable<unknown>,
  chat: Pick<ChatCompletionRequest, "messages">,
  meta: ResponseMeta,
): AsyncGenerator<string, void, undefined> {
  let seq = 0;
  const acc = new CompletionAccumulator(chat, toolCallIdPrefix(responseId(meta.jobId)));
  const base = shell(meta);
  yield event("response.created", seq++, { response: base });
  yield event("response.in_progress", seq++, { response: base });
  const done: OutputItem[] = [];
  let message: { index: number; text: string } | undefined;
  const calls = new Map<number, { outputIndex: number; id: string; callId: string; name: string; arguments: string }>();
  const messageId = messageItemId(meta.jobId);
  const closeMessage = function* () {
    if (!message) return;
    const part = { type: "output_text" as const, text: message.text, annotations: [], logprobs: [] };
    yield event("response.output_text.done", seq++, { item_id: messageId, output_index: message.index, content_index: 0, text: message.text, logprobs: [] });
    yield event("response.content_part.done", seq++, { item_id: messageId, output_index: message.index, content_index: 0, part });
    const item: OutputItem = { id: messageId, type: "message", status: "completed", role: "assistant", content: [part] };
    done[message.index] = item;
    yield event("response.output_item.done", seq++, { output_index: message.index, item });
    message = undefined;
  };
  const fail = function* (code: string, text: string) {
    yield event("error", seq++, { code, message: text, param: null, error: { type: code, code, message: text, param: null } });
    yield event("response.failed", seq++, { response: { ...base, status: "failed", error: { code, message: text } } });
  };
  try {
    for await (const output of outputs) {
      const notChat = notChatOutput(output);
      if (notChat) {
        yield* fail("invalid_response_error", `The endpoint's output is not a chat reply: ${notChat}`);
        return;
      }
      const { text, toolCalls } = acc.add(output);
      if (text) {
        if (!message) {
          message = { index: done.length + calls.size, text: "" };
          yield event("response.output_item.added", seq++, {
            output_index: message.index,
            item: { id: messageId, type: "message", status: "in_progress", role: "assistant", content: [] },
          });
          yield event("response.content_part.added", seq++, {
            item_id: messageId,
            output_index: message.index,
            content_index: 0,
            part: { type: "output_text", text: "", annotations: [], logprobs: [] },
          });
        }
        message.text += text;
        yield event("response.output_text.delta", seq++, { item_id: messageId, output_index: message.index, content_index: 0, delta: text, logprobs: [] });
      }
      for (const d of toolCalls) {
        let call = calls.get(d.index);
        if (!call) {
          yield* closeMessage();
          call = {
            outputIndex: done.filter(Boolean).length + calls.size,
            id: callItemId(meta.jobId, d.index),
            callId: d.id ?? "",
            name: d.function.name ?? "",
            arguments: "",
          };
          calls.set(d.index, call);
          yield event("response.output_item.added", seq++, {
            output_index: call.outputIndex,
            item: { id: call.id, type: "function_call", status: "in_progress", call_id: call.callId, name: call.name, arguments: "" },
          });
        }
        if (d.function.arguments) {
          call.arguments += d.function.arguments;
          yield event("response.function_call_arguments.delta", seq++, { item_id: call.id, output_index: call.outputIndex, delta: d.function.arguments });
        }
      }
    }
  } catch (err) {
    yield* fail("server_error", `The generation failed: ${err instanceof Error ? err.message : String(err)}`);
    return;
  }
  yield* closeMessage();
  for (const call of calls.values()) {
    const item: OutputItem = { id: call.id, type: "function_call", status: "completed", call_id: call.callId, name: call.name, arguments: call.arguments };
    done[call.outputIndex] = item;
    yield event("response.function_call_arguments.done", seq++, {
      item_id: call.id,
      output_index: call.outputIndex,
      name: call.name,
      arguments: call.arguments,
    });
    yield event("response.output_item.done", seq++, { output_index: call.outputIndex, item });
  }
  const final = { ...base, ...statusOf(acc.finishReason), output: done.filter(Boolean), usage: usageOf(acc) };
  yield event(final.status === "completed" ? "response.completed" : "response.incomplete", seq++, { response: final });
}
