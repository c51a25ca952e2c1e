// Writing a language-model endpoint. The endpoint stays a plain async generator (the build discovers it
// statically) and hands its input to textGeneration(), which does the protocol work:
//
//   const model = MarkovTextBackend.fromText(corpus);            // or any TextBackend, or an async function*
//   export const chat = Endpoint({ name: "llm", gpu: "ANY" })(async function* chat(input: TextGenerationInput, ctx) {
//     yield* textGeneration(input, model, ctx);
//   });
//
// textGeneration() accepts the job the OpenAI route makes of a chat request ({openai: {route, input}}) and
// plain {prompt} / {messages} inputs; it counts tokens, stops at max_tokens and stop strings, and yields
// stream chunk outputs {text: [...], input_tokens, output_tokens[, finish_reason]} carrying the chunk's
// metrics (see withChunkMetrics). docs/llm.md documents every field.

import { UserError } from "./errors.js";
import type { BackendStats, ChatMessage, GenerationParams, TextBackend } from "./llm/backend.js";
import { StopScanner } from "./llm/stop.js";
import { countTokens, renderChatPrompt, TokenLimiter } from "./llm/tokens.js";
import { isOpenAiJobInput, type FinishReason, type OpenAiJobInput } from "./openai/job-input.js";
import {
  checkChatRequest,
  messagesErrors,
  normaliseSampling,
  samplingErrors,
  textMessages,
  type ChatCompletionRequest,
  type ChatRequestMessage,
  type ToolChoice,
  type ToolDefinition,
} from "./openai/validate.js";

export type { BackendStats, ChatMessage, ChatRole, GenerationParams, TextBackend } from "./llm/backend.js";
export { MarkovTextBackend, type MarkovOptions } from "./llm/markov.js";
export { countTokens, tokenize, renderChatPrompt } from "./llm/tokens.js";
export type { OpenAiJobInput } from "./openai/job-input.js";
export type { ChatCompletionRequest, ChatRequestMessage, ContentPart, ToolCall, ToolChoice, ToolDefinition } from "./openai/validate.js";

/** Replies are cut here when the request sets no max_tokens. */
export const DEFAULT_MAX_TOKENS = 256;

interface SamplingFields {
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop?: string | string[];
  seed?: number;
}
/** What a language-model endpoint accepts as job input. */
export type TextGenerationInput = OpenAiJobInput | (SamplingFields & { prompt: string }) | (SamplingFields & { messages: ChatMessage[] });

/** How the request came in (the metrics' `scenario`). */
export type TextScenario = "openai-chat" | "messages" | "prompt";

/** What a generator function gets: the request, normalised. */
export interface TextGenerationRequest {
  messages: ChatMessage[];
  /** The raw prompt of a {prompt} input; for chats, the messages rendered by renderChatPrompt(). */
  prompt: string;
  max_tokens: number;
  temperature?: number;
  top_p?: number;
  stop: string[];
  seed?: number;
  /** The model a chat request named. */
  model?: string;
  scenario: TextScenario;
  signal?: AbortSignal;
  /** A chat request's messages as sent: content parts (images, audio) and tool calls and results included. */
  chat?: ChatRequestMessage[];
  /** The tools a chat request offers; a generator may answer with toolCall(...) pieces. */
  tools?: ToolDefinition[];
  tool_choice?: ToolChoice;
  parallel_tool_calls?: boolean;
  response_format?: ChatCompletionRequest["response_format"];
}

/** A tool call a generator yields instead of text (see toolCall()). */
export interface ToolCallPiece {
  toolCall: { id?: string; name: string; arguments: string };
}

/** A piece that asks the caller to run a tool: `yield toolCall("get_weather", { city: "Paris" })`. */
export function toolCall(name: string, args: unknown = {}, id?: string): ToolCallPiece {
  return { toolCall: { ...(id ? { id } : {}), name, arguments: typeof args === "string" ? args : JSON.stringify(args) } };
}

function isToolCallPiece(piece: unknown): piece is ToolCallPiece {
  const call = (piece as ToolCallPiece | null)?.toolCall;
  return typeof call === "object" && call !== null && typeof call.name === "string" && typeof call.arguments === "string";
}

/** A generator function: yields the reply as text pieces, or tool calls. */
export type TextGenerator = (request: TextGenerationRequest) => AsyncIterable<string | ToolCallPiece> | Iterable<string | ToolCallPiece>;

/** One stream chunk's output. `output_tokens` is cumulative; `finish_reason` is on the last chunk only. */
export interface TextGenerationOutput {
  text: string[];
  /** A tool call the generator made (one per chunk). */
  tool_calls?: Array<{ index: number; id?: string; name: string; arguments: string }>;
  input_tokens: number;
  output_tokens: number;
  finish_reason?: FinishReason;
}

/** The spec's text-generation metrics (docs/llm.md says what each means here). */
export interface TextGenerationMetrics {
  /** Output tokens per second after the first one (0 until there are two). */
  avg_gen_throughput: number;
  /** Prompt tokens per second of the time to the first piece (the "prefill"). */
  avg_prompt_throughput: number;
  cpu_kv_cache_usage: number;
  gpu_kv_cache_usage: number;
  input_tokens: number;
  output_tokens: number;
  /** Requests in this worker process waiting for their first piece. */
  pending: number;
  /** Requests in this worker process generating. */
  running: number;
  scenario: TextScenario;
  /** 0-based position of this chunk in the job's stream. */
  stream_index: number;
  swapped: number;
}

/**
 * Marks the metrics of a yielded chunk. Symbol-keyed and not enumerable: JSON and callers iterating in-process
 * see only the output; a runtime that knows the mark sends `{output, metrics}` (see chunkMetrics).
 */
export const CHUNK_METRICS = Symbol.for("svc.chunk.metrics");

export function withChunkMetrics<T extends object>(output: T, metrics: Record<string, unknown>): T {
  Object.defineProperty(output, CHUNK_METRICS, { value: metrics, enumerable: false });
  return output;
}

/** The metrics a yielded value carries, if any. */
export function chunkMetrics(value: unknown): Record<string, unknown> | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const metrics = (value as { [CHUNK_METRICS]?: unknown })[CHUNK_METRICS];
  return typeof metrics === "object" && metrics !== null ? (metrics as Record<string, unknown>) : undefined;
}

/** A text-generation input that is not valid. The job fails with this message. */
export class TextGenerationInputError extends UserError {
  constructor(problems: string[]) {
    super(`Invalid text-generation input: ${problems.join("; ")}`, {
      problems,
      hint: "Send {prompt}, {messages} or an OpenAI chat request through the /openai/v1 route.",
    });
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** Normalise any accepted input into a request (throws TextGenerationInputError). */
export function parseTextGenerationInput(input: unknown, defaultMaxTokens = DEFAULT_MAX_TOKENS): Omit<TextGenerationRequest, "signal"> {
  if (isOpenAiJobInput(input)) {
    const verdict = checkChatRequest(input.openai.input);
    if (!verdict.ok) throw new TextGenerationInputError(verdict.errors.length > 0 ? verdict.errors : [verdict.detail]);
    const r = verdict.request;
    const messages = textMessages(r.messages);
    return {
      messages,
      prompt: renderChatPrompt(messages),
      max_tokens: r.max_tokens ?? defaultMaxTokens,
      stop: r.stop ?? [],
      model: r.model,
      scenario: "openai-chat",
      chat: r.messages,
      ...(r.tools ? { tools: r.tools } : {}),
      ...(r.tool_choice !== undefined ? { tool_choice: r.tool_choice } : {}),
      ...(r.parallel_tool_calls !== undefined ? { parallel_tool_calls: r.parallel_tool_calls } : {}),
      ...(r.response_format ? { response_format: r.response_format } : {}),
      ...optional(r),
    };
  }
  if (!isObject(input)) throw new TextGenerationInputError(["$: must be an object with prompt or messages"]);
  const errors = samplingErrors(input);
  let messages: ChatMessage[];
  let prompt: string;
  let scenario: TextScenario;
  if (input.prompt !== undefined) {
    if (typeof input.prompt !== "string") errors.unshift("$.prompt: must be a string");
    prompt = String(input.prompt);
    messages = [{ role: "user", content: prompt }];
    scenario = "prompt";
  } else if (input.messages !== undefined) {
    errors.unshift(...messagesErrors(input.messages));
    messages = errors.length === 0 ? textMessages(input.messages as ChatRequestMessage[]) : [];
    prompt = renderChatPrompt(messages);
    scenario = "messages";
  } else {
    throw new TextGenerationInputError(["$: needs prompt (a string) or messages (an array of {role, content})"]);
  }
  if (errors.length > 0) throw new TextGenerationInputError(errors);
  const sampling = normaliseSampling(input);
  return {
    messages,
    prompt,
    max_tokens: sampling.max_tokens ?? defaultMaxTokens,
    stop: sampling.stop ?? [],
    model: typeof input.model === "string" ? input.model : undefined,
    scenario,
    ...optional(sampling),
  };
}

function optional(s: { temperature?: number; top_p?: number; seed?: number }): Pick<TextGenerationRequest, "temperature" | "top_p" | "seed"> {
  const out: Pick<TextGenerationRequest, "temperature" | "top_p" | "seed"> = {};
  if (s.temperature !== undefined) out.temperature = s.temperature;
  if (s.top_p !== undefined) out.top_p = s.top_p;
  if (s.seed !== undefined) out.seed = s.seed;
  return out;
}

// Requests of this process, for the pending / running metrics.
const load = { pending: 0, running: 0 };

export interface TextGenerationOptions {
  /** The job's signal (the second argument of an endpoint function): stop generating when it aborts. */
  signal?: AbortSignal;
  /** max_tokens when the request sets none. Default DEFAULT_MAX_TOKENS. */
  defaultMaxTokens?: number;
  /** Cache and swap figures for the metrics, when `generate` is a function (a TextBackend has stats()). */
  stats?: () => BackendStats;
}

const round = (n: number) => Math.round(n * 100) / 100;

async function* asAsync<T>(source: AsyncIterable<T> | Iterable<T>): AsyncGenerator<T> {
  yield* source;
}

/**
 * Run a text generator for a job and yield its stream chunk outputs (each carrying its metrics): one per
 * piece of text, then a last one with no text and the finish_reason ("length" when max_tokens cut the reply,
 * else "stop").
 */
export async function* textGeneration(
  input: unknown,
  generate: TextGenerator | TextBackend,
  options: TextGenerationOptions = {},
): AsyncGenerator<TextGenerationOutput, void, undefined> {
  const request: TextGenerationRequest = { ...parseTextGenerationInput(input, options.defaultMaxTokens), signal: options.signal };
  const inputTokens = countTokens(request.prompt);
  const backend = typeof generate === "function" ? undefined : generate;
  const stats = () => (backend?.stats ? backend.stats() : options.stats?.()) ?? {};
  const stopScanner = new StopScanner(request.stop);
  const limiter = new TokenLimiter(request.max_tokens);
  const started = performance.now();
  let firstAt: number | undefined;
  let outputTokensAtFirst: number | undefined;
  let streamIndex = 0;
  let phase: "pending" | "running" | "done" = "pending";
  load.pending++;

  const chunk = (text: string, finishReason?: FinishReason): TextGenerationOutput => {
    const now = performance.now();
    const output: TextGenerationOutput = { text: text ? [text] : [], input_tokens: inputTokens, output_tokens: limiter.count };
    if (finishReason) output.finish_reason = finishReason;
    const prefillSeconds = Math.max((firstAt ?? now) - started, 0.001) / 1000;
    const generated = limiter.count - (outputTokensAtFirst ?? limiter.count);
    const genSeconds = firstAt === undefined ? 0 : (now - firstAt) / 1000;
    const backendStats = stats();
    const metrics: TextGenerationMetrics = {
      avg_gen_throughput: generated > 0 && genSeconds > 0 ? round(generated / genSeconds) : 0,
      avg_prompt_throughput: firstAt === undefined ? 0 : round(inputTokens / prefillSeconds),
      cpu_kv_cache_usage: backendStats.cpu_kv_cache_usage ?? 0,
      gpu_kv_cache_usage: backendStats.gpu_kv_cache_usage ?? 0,
      input_tokens: inputTokens,
      output_tokens: limiter.count,
      pending: load.pending,
      running: load.running,
      scenario: request.scenario,
      stream_index: streamIndex++,
      swapped: backendStats.swapped ?? 0,
    };
    return withChunkMetrics(output, metrics as unknown as Record<string, unknown>);
  };

  const leave = () => {
    if (phase === "pending") load.pending--;
    else if (phase === "running") load.running--;
    phase = "done";
  };

  try {
    const params: GenerationParams = { max_tokens: request.max_tokens, signal: options.signal, ...optional(request) };
    const source = backend ? backend.generate(request.messages, params) : (generate as TextGenerator)(request);
    let finishReason: FinishReason = "stop";
    let ended = false;
    let calls = 0;
    for await (const piece of asAsync<string | ToolCallPiece>(source)) {
      if (options.signal?.aborted) return;
      if (isToolCallPiece(piece)) {
        const call = { index: calls++, ...piece.toolCall };
        limiter.push(call.name + call.arguments);
        const out = chunk("");
        out.tool_calls = [call];
        yield out;
        continue;
      }
      if (typeof piece !== "string")
        throw new TypeError(`a text generator must yield strings or toolCall(...) pieces, not ${piece === null ? "null" : typeof piece}`);
      if (phase === "pending") {
        load.pending--;
        load.running++;
        phase = "running";
        firstAt = performance.now();
      }
      const { text, stopped } = stopScanner.push(piece);
      const allowed = limiter.push(text);
      // The first piece's tokens came with the prefill; generation throughput counts the ones after it.
      outputTokensAtFirst ??= limiter.count;
      if (allowed) yield chunk(allowed);
      if (stopped || limiter.reached) {
        finishReason = stopped ? "stop" : "length";
        ended = true;
        break;
      }
    }
    if (!ended) {
      const held = stopScanner.flush();
      const rest = limiter.push(held);
      if (rest !== held) finishReason = "length";
      if (rest) yield chunk(rest);
    }
    if (calls > 0 && finishReason === "stop") finishReason = "tool_calls";
    yield chunk("", finishReason);
  } finally {
    leave();
  }
}
