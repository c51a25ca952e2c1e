// The official `openai` client against a real HTTP server (127.0.0.1) that answers with this project's
// src/openai functions, fed by textGeneration() over the shipped Markov model: the same pieces the service's
// route and a worker put together, minus the queue.

import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countTokens, MarkovTextBackend, type TextBackend, textGeneration } from "svc/internal";
import { openAiProblem, sendOpenAiProblem, serveChatCompletion, serveModels, type ChatJobs } from "../../src/openai/index.js";
import { errorMessage } from "../../src/errors.js";

const corpus = readFileSync(new URL("../../templates/textgen/src/corpus.txt", import.meta.url), "utf8");
const markov = MarkovTextBackend.fromText(corpus);
// A model that breaks after its first words, to see a failure in the middle of a stream.
const failing: TextBackend = {
  async *generate() {
    yield "Once";
    throw new Error("the GPU fell over");
  },
};
const backends: Record<string, TextBackend> = {
  textgen: markov,
  broken: failing,
  slow: MarkovTextBackend.fromText(corpus, { tokenDelayMs: 25, sentences: 50 }),
};

// Jobs run in memory, straight through textGeneration(); outputs go through JSON as a worker posts them.
const submitted = new Map<string, { model: string; input: unknown }>();
const cancelled: string[] = [];
let jobCount = 0;

async function* workerOutputs(jobId: string): AsyncGenerator<unknown> {
  const job = submitted.get(jobId)!;
  for await (const chunk of textGeneration(job.input, backends[job.model]!)) yield JSON.parse(JSON.stringify(chunk));
}

const jobs: ChatJobs = {
  async submit(functionName, input) {
    const id = `job-${++jobCount}`;
    submitted.set(id, { model: functionName, input });
    return id;
  },
  outputs: workerOutputs,
  async result(jobId) {
    const outputs: unknown[] = [];
    for await (const output of workerOutputs(jobId)) outputs.push(output);
    return outputs;
  },
  cancel(jobId) {
    cancelled.push(jobId);
  },
};
// One endpoint serving two functions: `model` picks one.
const endpoint = { name: "llm", functions: Object.keys(backends) };

async function readText(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString("utf8");
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method === "GET" && req.url === "/v1/models") return serveModels(endpoint, res, 1700000000);
  if (req.method === "POST" && req.url === "/v1/chat/completions") return serveChatCompletion(await readText(req), endpoint, jobs, res);
  sendOpenAiProblem(res, openAiProblem(404, `No route ${req.method} ${req.url}`));
}

let server: Server;
let baseURL: string;
let client: OpenAI;

beforeAll(async () => {
  server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      sendOpenAiProblem(res, openAiProblem(500, String(err)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 10_000 });
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const messages = [
  { role: "system" as const, content: "You are a lighthouse keeper." },
  { role: "user" as const, content: "Tell me about the sea and the ships." },
];

describe("the openai client", () => {
  it("completes a chat without streaming", async () => {
    const completion = await client.chat.completions.create({ model: "textgen", messages, seed: 11, max_tokens: 60 });
    expect(completion.object).toBe("chat.completion");
    expect(completion.id).toMatch(/^chatcmpl-job-\d+$/);
    expect(completion.model).toBe("textgen");
    const choice = completion.choices[0]!;
    expect(choice.message.role).toBe("assistant");
    expect(choice.message.content!.length).toBeGreaterThan(20);
    expect(["stop", "length"]).toContain(choice.finish_reason);
    expect(completion.usage!.completion_tokens).toBe(countTokens(choice.message.content!));
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);

    const again = await client.chat.completions.create({ model: "textgen", messages, seed: 11, max_tokens: 60 });
    expect(again.choices[0]!.message.content).toBe(choice.message.content);
  });

  it("completes the same chat with streaming, deltas adding up to the same reply", async () => {
    const whole = await client.chat.completions.create({ model: "textgen", messages, seed: 23, max_tokens: 50 });
    const stream = await client.chat.completions.create({
      model: "textgen",
      messages,
      seed: 23,
      max_tokens: 50,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text).toBe(whole.choices[0]!.message.content);
    const contentChunks = chunks.filter((c) => c.choices[0]?.delta.content);
    expect(contentChunks.length).toBeGreaterThan(5);
    const finishing = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishing).toHaveLength(1);
    expect(finishing[0]!.choices[0]!.finish_reason).toBe(whole.choices[0]!.finish_reason);
    expect(chunks.at(-1)!.usage).toEqual(whole.usage);
    for (const chunk of chunks) {
      expect(chunk.object).toBe("chat.completion.chunk");
      expect(chunk.id).toBe(chunks[0]!.id);
    }
    expect(chunks[0]!.id).not.toBe(whole.id);
  });

  it("reports finish_reason length when max_tokens cuts the reply", async () => {
    const completion = await client.chat.completions.create({ model: "textgen", messages, max_tokens: 3 });
    expect(completion.choices[0]!.finish_reason).toBe("length");
    expect(completion.usage!.completion_tokens).toBe(3);
  });

  it("surfaces a 422 for an invalid request, with a useful message", async () => {
    const bad = client.chat.completions.create({
      model: "textgen",
      messages: [
        { role: "user", content: "Hi" },
        { role: "user", content: 42 as unknown as string },
      ],
      temperature: 3,
    });
    const err = await bad.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    const apiError = err as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(422);
    expect(apiError.message).toBe(
      "422 The chat completion request is invalid (2 problems): $.messages[1].content: must be a string or an array of content parts; $.temperature: must be a number from 0 to 2",
    );
    expect(apiError.param).toBe("messages[1].content");
    expect(apiError.type).toBe("invalid_request_error");
  });

  it("raises an error from a stream that fails midway", async () => {
    const stream = await client.chat.completions.create({ model: "broken", messages, stream: true });
    const received: string[] = [];
    const failure = await (async () => {
      for await (const chunk of stream) received.push(chunk.choices[0]?.delta.content ?? "");
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(received.join("")).toBe("Once");
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect(errorMessage(failure)).toContain("the GPU fell over");
  });

  it("lists the models", async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(["textgen", "broken", "slow"]);
    expect(page.data[0]).toEqual({ id: "textgen", object: "model", created: 1700000000, owned_by: "llm" });
  });

  it("gets a 422 naming the models when it asks for one the endpoint does not serve", async () => {
    const err = await client.chat.completions.create({ model: "gpt-4o", messages }).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(err?.status).toBe(422);
    expect(err?.message).toBe("422 The chat completion request names no function of this endpoint: $.model: must be one of textgen, broken, slow");
  });

  it("cancels the job when the client stops reading a stream", async () => {
    const controller = new AbortController();
    const stream = await client.chat.completions.create({ model: "slow", messages, stream: true }, { signal: controller.signal });
    let pieces = 0;
    await (async () => {
      for await (const _ of stream) if (++pieces === 3) controller.abort();
    })().catch(() => undefined);
    const jobId = [...submitted.keys()].at(-1)!;
    await expect.poll(() => cancelled.includes(jobId), { timeout: 5000 }).toBe(true);
  });
});

describe("the route's error bodies", () => {
  it("are problem+json: 422 with errors, 400 for malformed JSON or a non-object", async () => {
    const post = (body: string) => fetch(`${baseURL}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
    const invalid = await post(JSON.stringify({ model: "textgen", messages: [] }));
    expect(invalid.status).toBe(422);
    expect(invalid.headers.get("content-type")).toBe("application/problem+json");
    expect(await invalid.json()).toMatchObject({ title: "Unprocessable Entity", status: 422, errors: ["$.messages: must hold at least one message"] });

    const malformed = await post("{");
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ title: "Bad Request", status: 400, detail: expect.stringContaining("not valid JSON") });

    const notObject = await post("[1]");
    expect(notObject.status).toBe(400);
    expect(await notObject.json()).toMatchObject({ title: "Bad Request", status: 400, detail: "The request body must be a JSON object" });
  });
});
