// The OpenAI-compatible chat route of a queue-based endpoint, on the job engine:
//   POST /v2/{endpoint_id}/openai/v1/chat/completions    a chat request becomes a job; the reply is built from
//                                                        its stream chunks (streaming) or its output
//   POST /v2/{endpoint_id}/openai/v1/responses             the Responses API on the same workers (plain and typed events)
//   GET  /v2/{endpoint_id}/openai/v1/responses/{id}        a stored response, while its job's result is kept
//   POST /v2/{endpoint_id}/openai/v1/completions           a prompt becomes a job for a text endpoint (textGeneration)
//   POST /v2/{endpoint_id}/openai/v1/embeddings            texts become a job for an embeddings endpoint (embeddings())
//   GET  /v2/{endpoint_id}/openai/v1/models
//   any method and path under /v2/{endpoint_id}/openai/v1/ of an endpoint that passes OpenAI's routes through
//                                                        (an image's, or one declaring openaiPassthrough): a job
//                                                        {openai_route, openai_input} whose handler answers it
// The wire format lives in src/openai (pure functions, serveParsedChatCompletion and servePassthrough); this file is
// the ChatJobs and PassthroughJobs adapter.

import type { IncomingMessage, ServerResponse } from "node:http";
import {
  serveCompletion,
  serveEmbeddings,
  serveModels,
  serveParsedChatCompletion,
  serveResponse,
  serveStoredResponse,
  type ChatJobs,
} from "../../openai/route.js";
import { isOpenAiJobInput } from "../../openai/format.js";
import { isFinal, type JobEngine } from "../engine/index.js";
import { parseJson, readBody } from "../http/wire.js";
import { HttpProblem, problemOf } from "../http/problems.js";
import { OPENAI_BODY_LIMIT } from "../http/body-limits.js";
import type { EndpointRow } from "../store/types.js";
import { passesOpenAiThrough } from "../endpoints/rows.js";
import { PASSTHROUGH_METHODS, passthroughRoute, queryInput, type PassthroughJobInput } from "../../openai/passthrough.js";
import { servePassthrough, type PassthroughJobs } from "../../openai/passthrough-route.js";

/** A non-streaming reply waits this long for its job; then 504. */
export const OPENAI_WAIT_MS = 300_000;

export function isOpenAiPath(rawUrl: string | undefined): boolean {
  return /^\/v2\/[^/]+\/openai(\/|$)/.test((rawUrl ?? "").split("?")[0]!);
}

class JobProblem extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

async function failure(engine: JobEngine, endpointId: string, jobId: string, status: string): Promise<JobProblem> {
  const row = await engine.record(endpointId, jobId);
  if (status === "CANCELLED") return new JobProblem("the job was cancelled", 499);
  if (status === "TIMED_OUT") return new JobProblem(row?.error ?? "the job timed out", 504);
  return new JobProblem(row?.error ?? `the job ended ${status}`, 500);
}

/** ChatJobs over the engine, for one endpoint. */
export function engineChatJobs(engine: JobEngine, endpointId: string): ChatJobs {
  return {
    async submit(functionName, input, options = {}) {
      // sync: the reply is read at once, so the job needs only the short /runsync retention; a stored response
      // (the Responses API's store) is kept as long as any job's result. A streamed reply cannot use a retry
      // (the first attempt's text went out already): no automatic retries for it.
      const stream = options.stream ?? (isOpenAiJobInput(input) && input.openai.input.stream);
      const maxRetries = stream ? 0 : undefined;
      try {
        const row = await engine.submit(endpointId, { input, function: functionName, sync: !options.keep, maxRetries });
        return row.id;
      } catch (err) {
        // A refusal of the engine (a queue quota: 429 with Retry-After; a full disk: 503) keeps its status here.
        throw problemOf(err) ?? err;
      }
    },
    async record(jobId) {
      const row = await engine.record(endpointId, jobId);
      if (!row) return undefined;
      return {
        input: JSON.parse(row.input) as unknown,
        status: row.status,
        output: row.output === null ? null : (JSON.parse(row.output) as unknown),
        createdAt: row.createdAt,
      };
    },
    async *outputs(jobId) {
      let streamed = 0;
      for (;;) {
        const read = await engine.readStream(endpointId, jobId);
        if (!read) throw new JobProblem(`job ${jobId} is gone`, 500);
        for (const text of read.chunks) {
          streamed++;
          yield (JSON.parse(text) as { output: unknown }).output;
        }
        if (!isFinal(read.status)) continue;
        // Chunks are all acknowledged before a job completes, but one read may not have returned them all.
        if (read.chunks.length > 0) continue;
        if (read.status !== "COMPLETED") throw await failure(engine, endpointId, jobId, read.status);
        if (streamed === 0) {
          // A plain function streams nothing: its whole output is the reply (or shows it is not one).
          const row = await engine.record(endpointId, jobId);
          const output = row?.output ? (JSON.parse(row.output) as unknown) : null;
          if (output !== null) yield* Array.isArray(output) ? output : [output];
        }
        return;
      }
    },
    async result(jobId) {
      const row = await engine.waitFinal(endpointId, jobId, OPENAI_WAIT_MS);
      if (!row) throw new JobProblem(`job ${jobId} is gone`, 500);
      if (!isFinal(row.status)) throw new JobProblem(`no reply within ${OPENAI_WAIT_MS} ms`, 504);
      if (row.status !== "COMPLETED") throw await failure(engine, endpointId, jobId, row.status);
      return row.output === null ? null : JSON.parse(row.output);
    },
    async cancel(jobId) {
      // Already final (or gone) is fine: there is nothing left to stop.
      await engine.cancel(endpointId, jobId).catch(() => undefined);
    },
  };
}

/** PassthroughJobs over the engine, for one endpoint. */
export function enginePassthroughJobs(engine: JobEngine, endpoint: EndpointRow): PassthroughJobs {
  const chat = engineChatJobs(engine, endpoint.id);
  const functions = endpoint.resource.functions.map((f) => f.name);
  return {
    async submit(input: PassthroughJobInput, { stream }) {
      // An endpoint of several functions: `model` may name one; otherwise its default function answers.
      const model = (input.openai_input as { model?: unknown } | null)?.model;
      const fn = functions.length > 1 && typeof model === "string" && functions.includes(model) ? model : undefined;
      try {
        // A streamed answer cannot use a retry: its first attempt's chunks went out already.
        const row = await engine.submit(endpoint.id, { input, function: fn, sync: true, maxRetries: stream ? 0 : undefined });
        return row.id;
      } catch (err) {
        throw problemOf(err) ?? err;
      }
    },
    outputs: (jobId) => chat.outputs(jobId),
    async values(jobId) {
      const row = await engine.waitFinal(endpoint.id, jobId, OPENAI_WAIT_MS);
      if (!row) throw new JobProblem(`job ${jobId} is gone`, 500);
      if (!isFinal(row.status)) throw new JobProblem(`no answer within ${OPENAI_WAIT_MS} ms`, 504);
      if (row.status !== "COMPLETED") throw await failure(engine, endpoint.id, jobId, row.status);
      // A generator's values are its stream chunks (its output may be their aggregate, or []); a plain
      // function's, its output.
      const values: unknown[] = [];
      for (;;) {
        const read = await engine.readStream(endpoint.id, jobId);
        if (!read || read.chunks.length === 0) break;
        for (const text of read.chunks) values.push((JSON.parse(text) as { output: unknown }).output);
      }
      if (values.length > 0) return values;
      return row.output === null ? [] : [JSON.parse(row.output) as unknown];
    },
    cancel: (jobId) => chat.cancel?.(jobId),
  };
}

/** seg: ["v2", endpointId, "openai", ...]. Errors thrown here are answered in OpenAI's shape by the caller. */
export async function openAiRoute(
  ctx: { engine: JobEngine },
  req: IncomingMessage,
  res: ServerResponse,
  seg: string[],
  endpoint: EndpointRow,
  query: URLSearchParams = new URLSearchParams(),
): Promise<void> {
  const rest = seg.slice(3).join("/");
  if (endpoint.type !== "queue") {
    req.resume();
    throw new HttpProblem(400, `Endpoint ${endpoint.id} is load-balanced; it has no OpenAI route`);
  }
  if (passesOpenAiThrough(endpoint)) return passthrough(ctx, req, res, seg.slice(3), endpoint, query);
  const chat = { name: endpoint.name, functions: endpoint.resource.functions.map((f) => f.name) };
  if (rest === "v1/chat/completions") {
    if (req.method !== "POST") throw new HttpProblem(405, `${req.method} is not allowed here; use POST`, { headers: { allow: "POST" } });
    // The shared parser refuses what every JSON route refuses (not UTF-8, nested too deeply): 400 problems.
    const body = parseJson(await readBody(req, OPENAI_BODY_LIMIT));
    return serveParsedChatCompletion(body, chat, engineChatJobs(ctx.engine, endpoint.id), res);
  }
  if (rest === "v1/completions" || rest === "v1/embeddings") {
    if (req.method !== "POST") throw new HttpProblem(405, `${req.method} is not allowed here; use POST`, { headers: { allow: "POST" } });
    const body = parseJson(await readBody(req, OPENAI_BODY_LIMIT));
    const serve = rest === "v1/completions" ? serveCompletion : serveEmbeddings;
    return serve(body, chat, engineChatJobs(ctx.engine, endpoint.id), res);
  }
  if (rest === "v1/responses") {
    if (req.method !== "POST") throw new HttpProblem(405, `${req.method} is not allowed here; use POST`, { headers: { allow: "POST" } });
    const body = parseJson(await readBody(req, OPENAI_BODY_LIMIT));
    return serveResponse(body, chat, engineChatJobs(ctx.engine, endpoint.id), res);
  }
  if (seg.length === 6 && seg[3] === "v1" && seg[4] === "responses") {
    if (req.method !== "GET") throw new HttpProblem(405, `${req.method} is not allowed here; use GET`, { headers: { allow: "GET" } });
    req.resume();
    return serveStoredResponse(seg[5]!, engineChatJobs(ctx.engine, endpoint.id), res);
  }
  if (rest === "v1/models") {
    if (req.method !== "GET") throw new HttpProblem(405, `${req.method} is not allowed here; use GET`, { headers: { allow: "GET" } });
    req.resume();
    return serveModels(chat, res, Math.floor(endpoint.createdAt / 1000));
  }
  req.resume();
  throw new HttpProblem(404, `No route /openai/${rest}; the OpenAI base is /v2/${endpoint.id}/openai/v1`);
}

/** Any route under /openai/v1/, answered by the endpoint's handler (docs/llm.md, "Pass-through"). */
async function passthrough(
  ctx: { engine: JobEngine },
  req: IncomingMessage,
  res: ServerResponse,
  rest: string[],
  endpoint: EndpointRow,
  query: URLSearchParams,
): Promise<void> {
  const route = passthroughRoute(rest);
  if (!route) {
    req.resume();
    throw new HttpProblem(404, `No route /openai/${rest.join("/")}; the OpenAI base is /v2/${endpoint.id}/openai/v1`);
  }
  if (!(PASSTHROUGH_METHODS as readonly string[]).includes(req.method ?? "")) {
    req.resume();
    throw new HttpProblem(405, `${req.method} is not allowed here; use ${PASSTHROUGH_METHODS.join(" or ")}`, {
      headers: { allow: PASSTHROUGH_METHODS.join(", ") },
    });
  }
  let input: unknown;
  if (req.method === "GET") {
    req.resume();
    input = queryInput(query);
  } else {
    // The shared parser refuses what every JSON route refuses (not UTF-8, nested too deeply): 400 problems.
    input = parseJson(await readBody(req, OPENAI_BODY_LIMIT));
    if (input === undefined) input = {};
  }
  return servePassthrough(route, input, enginePassthroughJobs(ctx.engine, endpoint), res);
}
