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
import { checkChatRequest, parseChatRequest, type ChatRequestVerdict } from "./validate.js";

/** What the route needs from the service's job machinery. */
export interface ChatJobs {
  /** Queue the job for `functionName` of the endpoint; resolves to the job id once it is accepted. */
  submit(functionName: string, input: OpenAiJobInput): Promise<string>;
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

/** An error from ChatJobs may carry an HTTP status (e.g. 429, 503 for no worker); others answer 500. */
function statusOf(err: unknown): number {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" && status >= 400 && status <= 599 ? status : 500;
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

  let jobId: string;
  try {
    jobId = await jobs.submit(target.function, chatJobInput(request));
  } catch (err) {
    return sendOpenAiProblem(res, openAiProblem(statusOf(err), `The job could not be queued: ${(err as Error).message}`));
  }
  const identity = { id: completionId(jobId), created: Math.floor(Date.now() / 1000) };
  let finished = false;
  res.on("close", () => {
    if (!finished) void Promise.resolve(jobs.cancel?.(jobId)).catch(() => undefined);
  });

  if (!request.stream) {
    try {
      const output = await jobs.result(jobId);
      finished = true;
      const notChat = notChatOutput(output);
      if (notChat) return sendOpenAiProblem(res, openAiProblem(502, `The endpoint's output is not a chat reply: ${notChat}`));
      sendJson(res, chatCompletionFromOutput(output, request, identity));
    } catch (err) {
      finished = true;
      sendOpenAiProblem(res, openAiProblem(statusOf(err), `The generation failed: ${(err as Error).message}`));
    }
    return;
  }

  res.writeHead(200, { ...SSE_HEADERS, "x-svc-job-id": jobId });
  res.flushHeaders();
  for await (const frame of chatCompletionFrames(jobs.outputs(jobId), request, identity)) {
    if (res.destroyed) break; // leaving the loop closes the job's output stream
    res.write(frame);
  }
  finished = true;
  res.end();
}

/** GET .../openai/v1/models */
export function serveModels(endpoint: ChatEndpoint, res: ServerResponse, created?: number): void {
  sendJson(res, endpointModels(endpoint.name, endpoint.functions, created));
}
