// The OpenAI chat route over node:http, independent of how jobs are stored and run: the service passes its
// job operations (ChatJobs) and the endpoint's functions, and this answers the request. Everything it writes is
// built by the pure functions beside it.

import type { ServerResponse } from "node:http";
import {
  chatCompletionFromOutput,
  notChatOutput,
  chatFunctionFor,
  chatJobInput,
  completionId,
  endpointModels,
  openAiProblem,
  problemOfVerdict,
  type OpenAiJobInput,
  type OpenAiProblem,
} from "./format.js";
import { chatCompletionFrames, SSE_HEADERS } from "./sse.js";
import { checkChatRequest, parseChatRequest, type ChatRequestVerdict } from "svc/internal";
import {
  checkResponsesRequest,
  parseResponseRef,
  responseEvents,
  responseFromOutput,
  responseMessages,
  toChatRequest,
  UnknownReferenceError,
  type ResolveEarlier,
  type ResponseObject,
} from "./responses.js";
import { isOpenAiJobInput } from "./format.js";
import { errorMessage } from "../errors.js";
import {
  checkCompletionRequest,
  completionJobInput,
  textCompletionFrames,
  textCompletionFromOutput,
  textCompletionId,
  type CompletionJobInput,
} from "./completions.js";
import { embeddingsFromOutput, notEmbeddingsOutput } from "./embeddings.js";
import { checkEmbeddingsRequest, countTokens, embeddingsJobInput, type EmbeddingsJobInput } from "svc/internal";

/** A job as the Responses API reads it back (GET .../responses/{id}, previous_response_id, item references). */
export interface ChatJobRecord {
  input: unknown;
  status: string;
  output: unknown;
  /** Epoch milliseconds. */
  createdAt: number;
}

/** What the route needs from the service's job machinery. */
export interface ChatJobs {
  /** Queue the job for `functionName` of the endpoint; resolves to the job id once it is accepted. `keep`: the
   * result must stay readable for the normal retention (a stored response), not only the short one of a sync job. */
  submit(
    functionName: string,
    input: OpenAiJobInput | CompletionJobInput | EmbeddingsJobInput,
    options?: { keep?: boolean; stream?: boolean },
  ): Promise<string>;
  /** A job of this endpoint, or undefined when unknown or expired. */
  record?(jobId: string): Promise<ChatJobRecord | undefined>;
  /** The job's chunk outputs as they arrive, ending when it completes; throws when it fails, is cancelled or times out. */
  outputs(jobId: string): AsyncIterable<unknown>;
  /** The job's final output once it completes; throws when it fails, is cancelled or times out. */
  result(jobId: string): Promise<unknown>;
  /** The client went away before the reply was complete. */
  cancel?(jobId: string): Promise<void> | void;
}

export interface ChatEndpoint {
  name: string;
  functions: readonly string[];
}

/** An error from a job submission may carry an HTTP status (e.g. 429, 503 for no worker); others answer 500. */
export function statusOf(err: unknown): number {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" && status >= 400 && status <= 599 ? status : 500;
}

/** The headers an error asks its answer to carry (a refusal's Retry-After), when it has any. */
export function headersOf(err: unknown): Record<string, string> | undefined {
  const headers = (err as { headers?: unknown } | null)?.headers;
  return headers && typeof headers === "object" ? (headers as Record<string, string>) : undefined;
}

export function sendOpenAiProblem(res: ServerResponse, problem: OpenAiProblem, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(problem);
  res.writeHead(problem.status, { "content-type": "application/problem+json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendJson(res: ServerResponse, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** POST .../openai/v1/chat/completions with the request body already read. */
export async function serveChatCompletion(bodyText: string, endpoint: ChatEndpoint, jobs: ChatJobs, res: ServerResponse): Promise<void> {
  return serveChatVerdict(parseChatRequest(bodyText), endpoint, jobs, res);
}

/** The same with the body already parsed (the service parses every JSON body with its shared checks). */
export async function serveParsedChatCompletion(body: unknown, endpoint: ChatEndpoint, jobs: ChatJobs, res: ServerResponse): Promise<void> {
  return serveChatVerdict(checkChatRequest(body), endpoint, jobs, res);
}

async function serveChatVerdict(verdict: ChatRequestVerdict, endpoint: ChatEndpoint, jobs: ChatJobs, res: ServerResponse): Promise<void> {
  if (!verdict.ok) return sendOpenAiProblem(res, problemOfVerdict(verdict));
  const request = verdict.request;
  const target = chatFunctionFor(endpoint.functions, request.model);
  if (!("function" in target)) return sendOpenAiProblem(res, openAiProblem(target.status, target.detail, target.errors));

  await answerWithJob(
    jobs,
    res,
    () => jobs.submit(target.function, chatJobInput(request)),
    request.stream,
    (jobId) => {
      const identity = { id: completionId(jobId), created: Math.floor(Date.now() / 1000) };
      return {
        reply: (output) => chatCompletionFromOutput(output, request, identity),
        frames: (outputs) => chatCompletionFrames(outputs, request, identity),
      };
    },
  );
}

/**
 * Queue the job, then answer with its reply: the whole reply (a 502 when the output is not a chat reply), or its
 * server-sent events as the chunks arrive. The job is cancelled when the client leaves before the end. Shared by
 * the Chat Completions and the Responses route; `shape` builds each one's own objects.
 */
async function answerWithJob(
  jobs: ChatJobs,
  res: ServerResponse,
  submit: () => Promise<string>,
  stream: boolean,
  shape: (jobId: string) => {
    reply(output: unknown): unknown;
    frames(outputs: AsyncIterable<unknown>): AsyncIterable<string>;
    /** Why an output is not a reply of this route (default: not a chat reply), and what it should have been. */
    wrong?(output: unknown): { what: string; why: string } | undefined;
  },
): Promise<void> {
  let jobId: string;
  try {
    jobId = await submit();
  } catch (err) {
    return sendOpenAiProblem(res, openAiProblem(statusOf(err), `The job could not be queued: ${errorMessage(err)}`), headersOf(err));
  }
  const { reply, frames, wrong = (output: unknown) => whyNot("a chat reply", notChatOutput(output)) } = shape(jobId);
  let finished = false;
  res.on("close", () => {
    if (!finished) void Promise.resolve(jobs.cancel?.(jobId)).catch(() => undefined /* the caller left: a job that cannot be cancelled runs out its timeout */);
  });

  if (!stream) {
    try {
      const output = await jobs.result(jobId);
      finished = true;
      const notReply = wrong(output);
      if (notReply) return sendOpenAiProblem(res, openAiProblem(502, `The endpoint's output is not ${notReply.what}: ${notReply.why}`));
      sendJson(res, reply(output));
    } catch (err) {
      finished = true;
      sendOpenAiProblem(res, openAiProblem(statusOf(err), `The generation failed: ${errorMessage(err)}`));
    }
    return;
  }

  res.writeHead(200, { ...SSE_HEADERS, "x-svc-job-id": jobId });
  res.flushHeaders();
  for await (const frame of frames(jobs.outputs(jobId))) {
    if (res.destroyed) break; // leaving the loop closes the job's output stream
    res.write(frame);
  }
  finished = true;
  res.end();
}

const whyNot = (what: string, why: string | undefined) => (why === undefined ? undefined : { what, why });

/** POST .../openai/v1/completions with the body parsed: textGeneration()'s `prompt` input, answered as `text_completion`. */
export async function serveCompletion(body: unknown, endpoint: ChatEndpoint, jobs: ChatJobs, res: ServerResponse): Promise<void> {
  const verdict = checkCompletionRequest(body);
  if (!verdict.ok) return sendOpenAiProblem(res, openAiProblem(verdict.status, verdict.detail, verdict.errors));
  const request = verdict.request;
  const target = chatFunctionFor(endpoint.functions, request.model);
  if (!("function" in target)) return sendOpenAiProblem(res, openAiProblem(target.status, target.detail, target.errors));
  await answerWithJob(
    jobs,
    res,
    () => jobs.submit(target.function, completionJobInput(request), { stream: request.stream }),
    request.stream,
    (jobId) => {
      const identity = { id: textCompletionId(jobId), created: Math.floor(Date.now() / 1000) };
      return {
        reply: (output) => textCompletionFromOutput(output, request, identity),
        frames: (outputs) => textCompletionFrames(outputs, request, identity),
        wrong: (output) => whyNot("text", notChatOutput(output)),
      };
    },
  );
}

/** POST .../openai/v1/embeddings with the body parsed: a job for the function embeddings() serves. */
export async function serveEmbeddings(body: unknown, endpoint: ChatEndpoint, jobs: ChatJobs, res: ServerResponse): Promise<void> {
  const verdict = checkEmbeddingsRequest(body);
  if (!verdict.ok) return sendOpenAiProblem(res, openAiProblem(verdict.status, verdict.detail, verdict.errors));
  const request = verdict.request;
  const target = chatFunctionFor(endpoint.functions, request.model);
  if (!("function" in target)) return sendOpenAiProblem(res, openAiProblem(target.status, target.detail, target.errors));
  await answerWithJob(
    jobs,
    res,
    () => jobs.submit(target.function, embeddingsJobInput(request)),
    false,
    () => ({
      reply: (output) => embeddingsFromOutput(output as { embeddings: number[][] }, request, countTokens),
      frames: () => {
        throw new Error("an embeddings answer is never streamed");
      },
      wrong: (output) => whyNot("an embeddings reply", notEmbeddingsOutput(output, request.input.length)),
    }),
  );
}

/** GET .../openai/v1/models */
export function serveModels(endpoint: ChatEndpoint, res: ServerResponse, created?: number): void {
  sendJson(res, endpointModels(endpoint.name, endpoint.functions, created));
}

/** A stored response (its job's record) as the response object, or undefined when it is not one of ours. */
async function storedResponse(jobs: ChatJobs, id: string): Promise<ResponseObject | undefined> {
  const ref = parseResponseRef(id);
  if (!ref || !jobs.record) return undefined;
  const row = await jobs.record(ref.jobId);
  if (!row || !isOpenAiJobInput(row.input) || !row.input.openai.responses?.echo.store) return undefined;
  const { responses, input } = row.input.openai;
  const meta = { jobId: ref.jobId, created: Math.floor(row.createdAt / 1000), model: responses.model, echo: responses.echo };
  if (row.status !== "COMPLETED") {
    const inProgress = row.status === "IN_QUEUE" || row.status === "IN_PROGRESS";
    const response = responseFromOutput(null, input, meta);
    return {
      ...response,
      status: inProgress ? "in_progress" : "failed",
      output: [],
      output_text: "",
      usage: null,
      error: inProgress ? null : { code: "server_error", message: `the job ended ${row.status}` },
    };
  }
  return responseFromOutput(row.output, input, meta);
}

/** Earlier turns for previous_response_id and item_reference, from stored responses. */
function resolverFor(jobs: ChatJobs): ResolveEarlier {
  return async (ref) => {
    const id = "response" in ref ? ref.response : ref.item;
    const parsed = parseResponseRef(id);
    if (!parsed) return undefined;
    const response = await storedResponse(jobs, `resp_${parsed.jobId}`);
    if (!response || response.status === "in_progress" || response.status === "failed") return undefined;
    if ("response" in ref) {
      const row = await jobs.record!(parsed.jobId);
      const earlier = isOpenAiJobInput(row?.input) ? row.input.openai.input.messages : [];
      return [...earlier, ...responseMessages(response)];
    }
    const item = response.output.find((o) => o.id === id);
    return item ? responseMessages({ output: [item] }) : undefined;
  };
}

/** POST .../openai/v1/responses with the body already parsed. */
export async function serveResponse(body: unknown, endpoint: ChatEndpoint, jobs: ChatJobs, res: ServerResponse): Promise<void> {
  const verdict = checkResponsesRequest(body);
  if (!verdict.ok) return sendOpenAiProblem(res, openAiProblem(verdict.status, verdict.detail, verdict.errors));
  const request = verdict.request;
  const target = chatFunctionFor(endpoint.functions, request.model);
  if (!("function" in target)) return sendOpenAiProblem(res, openAiProblem(target.status, target.detail, target.errors));
  let chat;
  try {
    chat = await toChatRequest(request, resolverFor(jobs));
  } catch (err) {
    if (err instanceof UnknownReferenceError) return sendOpenAiProblem(res, openAiProblem(404, err.message));
    throw err;
  }
  await answerWithJob(
    jobs,
    res,
    () => jobs.submit(target.function, chatJobInput(chat, { model: request.model, echo: request.echo }), { keep: request.echo.store }),
    request.stream,
    (jobId) => {
      const meta = { jobId, created: Math.floor(Date.now() / 1000), model: request.model, echo: request.echo };
      return { reply: (output) => responseFromOutput(output, chat, meta), frames: (outputs) => responseEvents(outputs, chat, meta) };
    },
  );
}

/** GET .../openai/v1/responses/{id}: a stored response, while its job's result is kept. */
export async function serveStoredResponse(id: string, jobs: ChatJobs, res: ServerResponse): Promise<void> {
  const response = await storedResponse(jobs, id);
  if (!response) return sendOpenAiProblem(res, openAiProblem(404, `No stored response ${id} (unknown, created with store: false, or expired)`));
  sendJson(res, response);
}
