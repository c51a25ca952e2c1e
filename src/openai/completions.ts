// OpenAI's legacy completions (`POST .../openai/v1/completions`) on svc's own language-model endpoints: the
// request is checked here, becomes the plain `{prompt, ...}` input textGeneration() reads (so every text
// endpoint answers it), and its chunk outputs become `text_completion` objects. Pure functions.

import { normaliseSampling, samplingErrors } from "svc/internal";
import { CompletionAccumulator, notChatOutput, type ReplyIdentity, type Usage } from "./format.js";
import { SSE_DONE, sseErrorFrame, sseFrame } from "./sse.js";
import { randomBytes } from "node:crypto";

export const COMPLETIONS_ROUTE = "/v1/completions";

export interface CompletionRequest {
  model: string;
  prompt: string;
  stream: boolean;
  /** The answer's text starts with the prompt. */
  echo: boolean;
  stream_options?: { include_usage: boolean };
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop?: string[];
  seed?: number;
}

export type CompletionVerdict = { ok: true; request: CompletionRequest } | { ok: false; status: 400 | 422; detail: string; errors: string[] };

/** The job input a completion request becomes: textGeneration()'s `prompt` input. */
export interface CompletionJobInput {
  prompt: string;
  model: string;
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop?: string[];
  seed?: number;
}

export interface TextCompletion {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: Array<{ index: 0; text: string; finish_reason: string | null; logprobs: null }>;
  usage?: Usage;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);
const present = (body: Record<string, unknown>, key: string) => body[key] !== undefined && body[key] !== null;

/** Check a parsed body: 400 when it is not a JSON object, 422 listing every fault, else the request. */
export function checkCompletionRequest(body: unknown): CompletionVerdict {
  if (!isObject(body)) return { ok: false, status: 400, detail: "The request body must be a JSON object", errors: [] };
  const errors: string[] = [];
  if (typeof body.model !== "string" || body.model === "") errors.push("$.model: must be a non-empty string");
  let prompt: string | undefined;
  if (typeof body.prompt === "string") prompt = body.prompt;
  else if (Array.isArray(body.prompt) && body.prompt.length === 1 && typeof body.prompt[0] === "string") prompt = body.prompt[0];
  else if (Array.isArray(body.prompt) && body.prompt.every((p) => typeof p === "string") && body.prompt.length > 1)
    errors.push("$.prompt: one prompt per request (send one request per prompt)");
  else if (Array.isArray(body.prompt)) errors.push("$.prompt: token arrays are not accepted; send the text");
  else errors.push("$.prompt: must be a string");
  errors.push(...samplingErrors(body));
  if (present(body, "stream") && typeof body.stream !== "boolean") errors.push("$.stream: must be a boolean");
  if (present(body, "echo") && typeof body.echo !== "boolean") errors.push("$.echo: must be a boolean");
  // One reply without per-token probabilities, as the chat route: say so rather than answer something else.
  for (const key of ["n", "best_of"]) if (present(body, key) && body[key] !== 1) errors.push(`$.${key}: only 1 is supported`);
  if (present(body, "logprobs") && body.logprobs !== 0) errors.push("$.logprobs: per-token probabilities are not supported");
  if (present(body, "suffix") && body.suffix !== "") errors.push("$.suffix: insertion after a suffix is not supported");
  if (errors.length > 0)
    return { ok: false, status: 422, detail: `The completion request is invalid (${errors.length} problem${errors.length > 1 ? "s" : ""})`, errors };
  const request: CompletionRequest = {
    model: body.model as string,
    prompt: prompt!,
    stream: body.stream === true,
    echo: body.echo === true,
    ...normaliseSampling(body),
  };
  if (isObject(body.stream_options) && typeof body.stream_options.include_usage === "boolean")
    request.stream_options = { include_usage: body.stream_options.include_usage };
  return { ok: true, request };
}

export function completionJobInput(request: CompletionRequest): CompletionJobInput {
  const { stream: _stream, echo: _echo, stream_options: _options, ...input } = request;
  return input;
}

export function textCompletionId(jobId?: string): string {
  return `cmpl-${jobId ?? randomBytes(12).toString("hex")}`;
}

const accumulatorFor = (request: CompletionRequest) => new CompletionAccumulator({ messages: [{ role: "user", content: request.prompt }] });

/** The non-streamed answer from a job's output (the array of its chunk outputs, or one value). */
export function textCompletionFromOutput(output: unknown, request: CompletionRequest, identity: ReplyIdentity = {}): TextCompletion {
  const accumulator = accumulatorFor(request);
  for (const chunk of Array.isArray(output) ? output : [output]) accumulator.add(chunk);
  return {
    id: identity.id ?? textCompletionId(),
    object: "text_completion",
    created: identity.created ?? Math.floor(Date.now() / 1000),
    model: request.model,
    choices: [{ index: 0, text: (request.echo ? request.prompt : "") + accumulator.text, finish_reason: accumulator.finishReason, logprobs: null }],
    usage: accumulator.usage,
  };
}

/**
 * The server-sent events of a streamed answer, as the chunk outputs arrive: one `text_completion` per piece of
 * text (the prompt first when `echo`), one with the finish_reason, a usage one when asked, then [DONE]. A failed
 * job or an output that is not text ends it with an error event and no [DONE].
 */
export async function* textCompletionFrames(
  outputs: AsyncIterable<unknown>,
  request: CompletionRequest,
  identity: ReplyIdentity = {},
): AsyncGenerator<string, void, undefined> {
  const base = {
    id: identity.id ?? textCompletionId(),
    object: "text_completion" as const,
    created: identity.created ?? Math.floor(Date.now() / 1000),
    model: request.model,
  };
  const frame = (text: string, finish: string | null = null) => sseFrame({ ...base, choices: [{ index: 0, text, finish_reason: finish, logprobs: null }] });
  const accumulator = accumulatorFor(request);
  if (request.echo) yield frame(request.prompt);
  try {
    for await (const output of outputs) {
      const wrong = notChatOutput(output);
      if (wrong) {
        yield sseErrorFrame({ message: `The endpoint's output is not text: ${wrong}`, type: "invalid_response_error" });
        return;
      }
      const { text } = accumulator.add(output);
      if (text) yield frame(text);
    }
  } catch (err) {
    yield sseErrorFrame({ message: `The generation failed: ${err instanceof Error ? err.message : String(err)}` });
    return;
  }
  yield frame("", accumulator.finishReason);
  if (request.stream_options?.include_usage) yield sseFrame({ ...base, choices: [], usage: accumulator.usage });
  yield SSE_DONE;
}
