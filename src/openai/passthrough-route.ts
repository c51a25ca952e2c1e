// The OpenAI pass-through over node:http (passthrough.ts): one request becomes one job whose handler answers the
// OpenAI route itself; its output is the answer, or its streamed chunks are the answer's server-sent events as
// they come. The job is cancelled when the client leaves before the answer is complete.

import type { ServerResponse } from "node:http";
import { openAiProblem } from "./format.js";
import { handlerError, PASSTHROUGH_DONE, passthroughReply, sseOfChunk, wantsStream, type PassthroughJobInput } from "./passthrough.js";
import { headersOf, sendOpenAiProblem, statusOf } from "./route.js";
import { SSE_HEADERS, sseErrorFrame } from "./sse.js";
import { errorMessage } from "../errors.js";

/** What the pass-through needs from the service's job machinery. */
export interface PassthroughJobs {
  /** Queue the job; resolves to its id once accepted. `stream`: its chunks go out as they come (no retry). */
  submit(input: PassthroughJobInput, options: { stream: boolean }): Promise<string>;
  /** The job's chunk outputs as they arrive (its whole output when it streamed none); throws when it fails. */
  outputs(jobId: string): AsyncIterable<unknown>;
  /** Once the job completes: its chunk outputs, or its output alone when it streamed none; throws when it fails. */
  values(jobId: string): Promise<unknown[]>;
  /** The client went away before the answer was complete. */
  cancel?(jobId: string): Promise<void> | void;
}

/**
 * Answer one passed-through request: `route` the path after `/openai`, `input` the body (POST) or query (GET).
 * A streamed answer's headers wait for the handler's first chunk, so that an error it answers at once (vLLM's
 * error response for a bad request) keeps its status; later errors end the stream with an error event.
 */
export async function servePassthrough(route: string, input: unknown, jobs: PassthroughJobs, res: ServerResponse): Promise<void> {
  const stream = wantsStream(input);
  let jobId: string;
  try {
    jobId = await jobs.submit({ openai_route: route, openai_input: input }, { stream });
  } catch (err) {
    return sendOpenAiProblem(res, openAiProblem(statusOf(err), `The job could not be queued: ${errorMessage(err)}`), headersOf(err));
  }
  let finished = false;
  res.on("close", () => {
    if (!finished) void Promise.resolve(jobs.cancel?.(jobId)).catch(() => undefined /* the caller left: a job that cannot be cancelled runs out its timeout */);
  });

  if (!stream) {
    try {
      const reply = passthroughReply(await jobs.values(jobId));
      finished = true;
      const problem = handlerError(reply);
      if (problem) return sendOpenAiProblem(res, problem, { "x-svc-job-id": jobId });
      const text = JSON.stringify(reply);
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "x-svc-job-id": jobId });
      res.end(text);
    } catch (err) {
      finished = true;
      sendOpenAiProblem(res, openAiProblem(statusOf(err), `The job failed: ${errorMessage(err)}`), { "x-svc-job-id": jobId });
    }
    return;
  }

  let done = false;
  const open = () => {
    if (res.headersSent) return;
    res.writeHead(200, { ...SSE_HEADERS, "x-svc-job-id": jobId });
    res.flushHeaders();
  };
  try {
    for await (const output of jobs.outputs(jobId)) {
      if (res.destroyed) break; // leaving the loop closes the job's output stream
      const problem = handlerError(output);
      if (problem) {
        finished = true;
        if (!res.headersSent) return sendOpenAiProblem(res, problem, { "x-svc-job-id": jobId });
        res.end(sseErrorFrame(problem.error));
        return;
      }
      const chunk = sseOfChunk(output);
      open();
      if (chunk.text) res.write(chunk.text);
      done ||= chunk.done;
    }
  } catch (err) {
    finished = true;
    if (!res.headersSent) return sendOpenAiProblem(res, openAiProblem(statusOf(err), `The job failed: ${errorMessage(err)}`), { "x-svc-job-id": jobId });
    // OpenAI clients raise an error event; no [DONE] follows, so a broken stream never passes for a whole one.
    res.end(sseErrorFrame({ message: `The job failed: ${errorMessage(err)}` }));
    return;
  }
  finished = true;
  if (res.destroyed) return;
  open();
  res.end(done ? undefined : PASSTHROUGH_DONE);
}
