// The OpenAI wire format of the chat route, as pure functions: the job a chat request becomes, the reply
// built from the worker's stream chunk outputs, the `chat.completion.chunk` objects of a streamed reply, the
// model list, and error bodies that are problem+json AND readable by OpenAI clients. docs/llm.md has the shapes.

import { randomBytes } from "node:crypto";
import {
  chatJobInput as sdkChatJobInput,
  countTokens,
  FINISH_REASONS,
  isOpenAiJobInput as isSdkOpenAiJobInput,
  renderChatPrompt,
  textMessages,
  type ChatCompletionRequest,
  type ChatRequestVerdict,
  type FinishReason,
  type OpenAiJobInput as SdkOpenAiJobInput,
  type Problem,
  type ToolCall,
} from "svc/internal";
import { TITLES } from "../http-titles.js";

export { CHAT_COMPLETIONS_ROUTE, type FinishReason } from "svc/internal";

/** The job input a chat request becomes, with what a Responses API request echoes back. */
export type OpenAiJobInput = SdkOpenAiJobInput<import("./responses.js").ResponsesEcho>;

export function chatJobInput(request: ChatCompletionRequest, responses?: OpenAiJobInput["openai"]["responses"]): OpenAiJobInput {
  return sdkChatJobInput(request, responses);
}

/** The echo of a job input passing this check was written by the service itself (chatJobInput above). */
export function isOpenAiJobInput(value: unknown): value is OpenAiJobInput {
  return isSdkOpenAiJobInput(value);
}

/**
 * A piece of a tool call as a worker yields it: a whole call (`{id?, name, arguments}`, arguments as JSON text or
 * an object), or a fragment of one (`{index, arguments: "..."}`) as a streaming model produces them. OpenAI's own
 * shape (`{index, id, type, function: {name, arguments}}`) is read too.
 */
export interface ToolCallDelta {
  /** Absent: a piece with a name starts a new call, one without continues the last call. */
  index?: number;
  id?: string;
  name?: string;
  arguments?: string;
}

/** What one stream chunk's `output` says, whatever the worker yielded. */
export interface ChunkText {
  text: string;
  tool_calls?: ToolCallDelta[];
  input_tokens?: number;
  output_tokens?: number;
  finish_reason?: FinishReason;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The tool-call pieces of a chunk output's `tool_calls`. Pure. */
export function readToolCalls(value: unknown): ToolCallDelta[] | undefined {
  if (!Array.isArray(value)) return undefined;
  const out: ToolCallDelta[] = [];
  for (const raw of value) {
    if (!isRecord(raw)) continue;
    const fn = isRecord(raw.function) ? raw.function : raw;
    const delta: ToolCallDelta = {};
    if (typeof raw.index === "number" && Number.isInteger(raw.index) && raw.index >= 0 && raw.index < 1024) delta.index = raw.index;
    if (typeof raw.id === "string") delta.id = raw.id;
    if (typeof fn.name === "string") delta.name = fn.name;
    if (typeof fn.arguments === "string") delta.arguments = fn.arguments;
    else if (fn.arguments !== undefined) delta.arguments = JSON.stringify(fn.arguments);
    out.push(delta);
  }
  return out;
}

const count = (value: unknown): number | undefined => (typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined);

/**
 * Read a chunk output: the text-generation shape `{text: string[], input_tokens, output_tokens,
 * finish_reason?}`, a plain string (any generator endpoint yielding text), or `{text: string}`. Anything
 * else carries no text.
 */
export function readChunkOutput(output: unknown): ChunkText {
  if (typeof output === "string") return { text: output };
  if (typeof output !== "object" || output === null || Array.isArray(output)) return { text: "" };
  const o = output as Record<string, unknown>;
  const text = Array.isArray(o.text) ? o.text.filter((t): t is string => typeof t === "string").join("") : typeof o.text === "string" ? o.text : "";
  const result: ChunkText = { text };
  const toolCalls = readToolCalls(o.tool_calls);
  if (toolCalls && toolCalls.length > 0) result.tool_calls = toolCalls;
  const input = count(o.input_tokens);
  const outputTokens = count(o.output_tokens);
  if (input !== undefined) result.input_tokens = input;
  if (outputTokens !== undefined) result.output_tokens = outputTokens;
  if (typeof o.finish_reason === "string" && (FINISH_REASONS as readonly string[]).includes(o.finish_reason))
    result.finish_reason = o.finish_reason as FinishReason;
  return result;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** A tool call delta as OpenAI streams it: the first piece of a call names it, later ones add arguments. */
export interface StreamedToolCall {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

/** Gathers a reply from chunk outputs, in order. Counts the worker did not report are counted here. */
export class CompletionAccumulator {
  text = "";
  private readonly calls: Array<{ id: string; name: string; arguments: string }> = [];
  private inputTokens?: number;
  private outputTokens?: number;
  private finish?: FinishReason;

  /** `callIdPrefix`: tool calls the worker gave no id get `<prefix>_<index>`. */
  constructor(
    private readonly request: Pick<ChatCompletionRequest, "messages">,
    private readonly callIdPrefix = `call_${randomBytes(6).toString("hex")}`,
  ) {}

  /** Add one chunk output; returns its text and its tool-call deltas, as a stream sends them. */
  add(output: unknown): { text: string; toolCalls: StreamedToolCall[] } {
    const chunk = readChunkOutput(output);
    this.text += chunk.text;
    const toolCalls: StreamedToolCall[] = [];
    for (const d of chunk.tool_calls ?? []) {
      const index = d.index ?? (d.name !== undefined || this.calls.length === 0 ? this.calls.length : this.calls.length - 1);
      const known = this.calls[index];
      if (!known) {
        const call = { id: d.id ?? `${this.callIdPrefix}_${index}`, name: d.name ?? "", arguments: d.arguments ?? "" };
        this.calls[index] = call;
        toolCalls.push({ index, id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } });
      } else {
        if (d.name && !known.name) known.name = d.name;
        known.arguments += d.arguments ?? "";
        toolCalls.push({ index, function: { ...(d.name ? { name: d.name } : {}), arguments: d.arguments ?? "" } });
      }
    }
    if (chunk.input_tokens !== undefined) this.inputTokens = chunk.input_tokens;
    // Cumulative in the text-generation shape: the last one reported is the total.
    if (chunk.output_tokens !== undefined) this.outputTokens = chunk.output_tokens;
    if (chunk.finish_reason) this.finish = chunk.finish_reason;
    return { text: chunk.text, toolCalls };
  }

  /** The whole tool calls, in index order. */
  get toolCalls(): ToolCall[] {
    return this.calls.filter(Boolean).map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
  }

  get finishReason(): FinishReason {
    // A worker that called tools and said nothing else ended its turn to let the caller run them.
    return this.finish ?? (this.calls.length > 0 ? "tool_calls" : "stop");
  }

  get usage(): Usage {
    const prompt = this.inputTokens ?? countTokens(renderChatPrompt(textMessages(this.request.messages)));
    const completion = this.outputTokens ?? countTokens(this.text + this.calls.map((c) => c.name + c.arguments).join(""));
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  }
}

export interface ReplyIdentity {
  /** "chatcmpl-..."; defaults to a random one. The service may derive it from the job id. */
  id?: string;
  /** Unix seconds; defaults to now. */
  created?: number;
}

export function completionId(jobId?: string): string {
  return `chatcmpl-${jobId ?? randomBytes(12).toString("hex")}`;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: { role: "assistant"; content: string | null; refusal: null; tool_calls?: ToolCall[] };
    finish_reason: FinishReason;
    logprobs: null;
  }>;
  usage: Usage;
}

/**
 * Why a job's output cannot be read as a chat reply, or undefined when it can: every chunk output must be a
 * string or carry `text` (a string or strings), as `readChunkOutput` reads them. An endpoint that is not a
 * language model (its output an object of its own) must not be answered with an empty reply. Pure.
 */
export function notChatOutput(output: unknown): string | undefined {
  const chunks = Array.isArray(output) ? output : output === null || output === undefined ? [] : [output];
  for (const chunk of chunks) {
    if (typeof chunk === "string") continue;
    if (typeof chunk === "object" && chunk !== null && !Array.isArray(chunk)) {
      const o = chunk as Record<string, unknown>;
      if (typeof o.text === "string" || Array.isArray(o.text) || Array.isArray(o.tool_calls)) continue;
      const keys = Object.keys(chunk).slice(0, 5);
      return `expected text (a string, or an object with \`text\` or \`tool_calls\`), got an object with ${keys.length ? `keys ${keys.join(", ")}` : "no keys"}`;
    }
    return `expected text (a string, or an object with \`text\` or \`tool_calls\`), got ${Array.isArray(chunk) ? "an array" : chunk === null ? "null" : typeof chunk}`;
  }
  return undefined;
}

/**
 * The non-streaming reply from a job's output: a streaming job's output is the array of its chunk outputs;
 * a plain function's output is taken as one chunk.
 */
export function chatCompletionFromOutput(
  output: unknown,
  request: Pick<ChatCompletionRequest, "model" | "messages">,
  identity: ReplyIdentity = {},
): ChatCompletion {
  const id = identity.id ?? completionId();
  const accumulator = new CompletionAccumulator(request, toolCallIdPrefix(id));
  for (const chunk of Array.isArray(output) ? output : [output]) accumulator.add(chunk);
  const toolCalls = accumulator.toolCalls;
  const message: ChatCompletion["choices"][number]["message"] = {
    role: "assistant",
    content: toolCalls.length > 0 && accumulator.text === "" ? null : accumulator.text,
    refusal: null,
  };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return {
    id,
    object: "chat.completion",
    created: identity.created ?? nowSeconds(),
    model: request.model,
    choices: [{ index: 0, message, finish_reason: accumulator.finishReason, logprobs: null }],
    usage: accumulator.usage,
  };
}

/** Ids of tool calls a worker gave none: derived from the reply's id, so a stored reply reads the same again. */
export function toolCallIdPrefix(replyId: string): string {
  return `call_${replyId.replace(/^[a-z]+-/, "").slice(-24)}`;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: Array<{ index: number; delta: ChunkDelta; finish_reason: FinishReason | null; logprobs: null }>;
  usage?: Usage | null;
}

export interface ChunkDelta {
  role?: "assistant";
  content?: string | null;
  tool_calls?: StreamedToolCall[];
}

export function chatCompletionChunk(
  base: { id: string; created: number; model: string },
  delta: ChunkDelta,
  finishReason: FinishReason | null = null,
): ChatCompletionChunk {
  return {
    id: base.id,
    object: "chat.completion.chunk",
    created: base.created,
    model: base.model,
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
  };
}

export interface ModelInfo {
  id: string;
  /** Unix seconds. */
  created?: number;
  owned_by?: string;
}

/** GET .../openai/v1/models */
export function modelList(models: readonly ModelInfo[]): { object: "list"; data: Array<{ id: string; object: "model"; created: number; owned_by: string }> } {
  return {
    object: "list",
    data: models.map((m) => ({ id: m.id, object: "model", created: m.created ?? 0, owned_by: m.owned_by ?? "svc" })),
  };
}

/** The OpenAI error object: what OpenAI clients read (`error.message`, `.type`, `.param`, `.code`). */
export interface OpenAiErrorObject {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
}

export type OpenAiProblem = Problem & { error: OpenAiErrorObject };

const ERROR_TYPES: Record<number, string> = {
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  429: "rate_limit_error",
};

/**
 * A problem+json body with an extra `error` member in OpenAI's shape. Without it, the `openai` client finds no
 * `error` in the body and its APIError says only "422 status code (no body)"; with it, `err.message` is
 * "422 <detail>: <faults>", and `err.param` names the first faulty field.
 */
export function openAiProblem(status: number, detail: string, errors: readonly string[] = []): OpenAiProblem {
  const problem: OpenAiProblem = {
    title: TITLES[status] ?? "Error",
    status,
    detail,
    error: {
      message: errors.length > 0 ? `${detail}: ${errors.join("; ")}` : detail,
      type: ERROR_TYPES[status] ?? (status >= 500 ? "server_error" : "invalid_request_error"),
      param: errors.length > 0 ? (/^\$\.([^:]+):/.exec(errors[0]!)?.[1] ?? null) : null,
      code: status === 422 ? "invalid_request" : null,
    },
  };
  if (errors.length > 0) problem.errors = [...errors];
  return problem;
}

export function problemOfVerdict(verdict: Extract<ChatRequestVerdict, { ok: false }>): OpenAiProblem {
  return openAiProblem(verdict.status, verdict.detail, verdict.errors);
}

/**
 * Which function of an endpoint serves a chat request. An endpoint with one function serves every `model`
 * (the reply echoes the name asked for); with several, `model` names the function.
 */
export function chatFunctionFor(functions: readonly string[], model: string): { function: string } | { status: 404 | 422; detail: string; errors: string[] } {
  if (functions.length === 1) return { function: functions[0]! };
  if (functions.includes(model)) return { function: model };
  if (functions.length === 0) return { status: 404, detail: "This endpoint serves no functions", errors: [] };
  return {
    status: 422,
    detail: "The chat completion request names no function of this endpoint",
    errors: [`$.model: must be one of ${functions.join(", ")}`],
  };
}

/** GET .../openai/v1/models for an endpoint: its name when it has one function, else its function names. */
export function endpointModels(endpointName: string, functions: readonly string[], created?: number): ReturnType<typeof modelList> {
  const ids = functions.length > 1 ? functions : [endpointName];
  return modelList(ids.map((id) => ({ id, created, owned_by: endpointName })));
}
