// The OpenAI pass-through: OpenAI's routes relayed to a worker that answers them itself, as the provider's vLLM,
// SGLang and Infinity workers do. A request to `/openai/v1/<route>` becomes the job input
// `{openai_route: "/v1/<route>", openai_input: <body>}`; the handler's output is the HTTP answer (a non-streamed
// request) or its chunks are the server-sent events (a streamed one: each chunk is already `data: {...}\n\n` text).
// Pure functions; src/openai/passthrough-route.ts serves them over node:http.

import { openAiProblem, type OpenAiProblem } from "./format.js";
import { SSE_DONE, sseFrame } from "./sse.js";

/** The job input of a passed-through request, as the provider's workers read it (`job["input"]`). */
export interface PassthroughJobInput {
  /** The path after `/openai`, e.g. `/v1/chat/completions`. */
  openai_route: string;
  /** The request's JSON body (POST), or its query parameters as an object of strings (GET). */
  openai_input: unknown;
}

/** The methods a passed-through route takes: POST sends its body, GET its query. */
export const PASSTHROUGH_METHODS = ["GET", "POST"] as const;

/**
 * The `openai_route` of a path under `/openai/`, given its segments after `openai` (["v1", "chat",
 * "completions"] → "/v1/chat/completions"); undefined for what is not under `v1/` or has an empty segment.
 */
export function passthroughRoute(rest: readonly string[]): string | undefined {
  if (rest.length < 2 || rest[0] !== "v1" || rest.some((s) => s === "" || s === "." || s === "..")) return undefined;
  return `/${rest.join("/")}`;
}

export function passthroughJobInput(route: string, input: unknown): PassthroughJobInput {
  return { openai_route: route, openai_input: input };
}

/** A GET's input: its query parameters, each name's last value. */
export function queryInput(query: URLSearchParams): Record<string, string> {
  const input: Record<string, string> = {};
  for (const [name, value] of query) input[name] = value;
  return input;
}

/** Whether the request asks for a streamed answer (`"stream": true` in its body). */
export function wantsStream(input: unknown): boolean {
  return typeof input === "object" && input !== null && !Array.isArray(input) && (input as { stream?: unknown }).stream === true;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The error a handler answered with, as an HTTP problem, or undefined when the output is an answer. The provider's
 * vLLM worker yields vLLM's error response: `{object: "error", message, type, param, code: <HTTP status>}`, or
 * nested as `{error: {...}}` (newer vLLM, and its worker's own failures). The status is `code` when it is one
 * (400-599), else 400 for `object: "error"` and 500 for an `error` member. The body is problem+json carrying the
 * handler's message, type, param and code in OpenAI's `error` member, which OpenAI clients raise.
 */
export function handlerError(output: unknown): OpenAiProblem | undefined {
  if (!isObject(output)) return undefined;
  let error: Record<string, unknown>;
  let fallback: number;
  if (output.object === "error") {
    error = output;
    fallback = 400;
  } else if (isObject(output.error) && Object.keys(output).every((k) => k === "error" || k === "object")) {
    error = output.error;
    fallback = 500;
  } else if (typeof output.error === "string" && Object.keys(output).length === 1) {
    error = { message: output.error };
    fallback = 500;
  } else return undefined;
  const code = error.code;
  const status = typeof code === "number" && Number.isInteger(code) && code >= 400 && code <= 599 ? code : fallback;
  const message = typeof error.message === "string" ? error.message : JSON.stringify(error.message ?? error);
  const problem = openAiProblem(status, message);
  if (typeof error.type === "string") problem.error.type = error.type;
  if (typeof error.param === "string") problem.error.param = error.param;
  if (typeof code === "string") problem.error.code = code;
  return problem;
}

/** Text that is already server-sent events (`data: ...`, `event: ...`, a comment). */
const SSE_TEXT = /^(data|event|id|retry):|^:/;

/**
 * One streamed chunk of a handler as server-sent event text: a string that is SSE text as it is (ending with a
 * blank line), other text as `data:` lines, an array chunk by chunk (vLLM's worker batches its chunks in a list
 * when RAW_OPENAI_OUTPUT is off), any other value as `data: <JSON>`. `done`: the text holds `data: [DONE]`.
 */
export function sseOfChunk(output: unknown): { text: string; done: boolean } {
  if (Array.isArray(output)) {
    let text = "";
    let done = false;
    for (const item of output) {
      const one = sseOfChunk(item);
      text += one.text;
      done ||= one.done;
    }
    return { text, done };
  }
  if (typeof output === "string") {
    if (output === "") return { text: "", done: false };
    let text = SSE_TEXT.test(output)
      ? output
      : output
          .split(/\r?\n/)
          .map((line) => `data: ${line}\n`)
          .join("");
    if (!text.endsWith("\n\n")) text += text.endsWith("\n") ? "\n" : "\n\n";
    return { text, done: /^data: ?\[DONE\]\s*$/m.test(text) };
  }
  return { text: sseFrame(output ?? null), done: false };
}

/** The last event of a stream the handler ended without one. */
export const PASSTHROUGH_DONE = SSE_DONE;

/**
 * A non-streamed answer from what the handler produced: its one value (a dict, as vLLM's worker yields once), or
 * the list of them when it produced several. `null` when it produced nothing.
 */
export function passthroughReply(values: readonly unknown[]): unknown {
  if (values.length === 0) return null;
  return values.length === 1 ? values[0] : [...values];
}
