// OpenAI's routes passed through to a worker that answers them itself, as the provider's vLLM worker does: the
// standard-library provider worker (fixtures/provider-worker, its OpenAI mode) run as a child process against the
// real service, for an endpoint that declares `openaiPassthrough`. The official clients, JS and Python, talk to it.

import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, manifest, resource, startTestService, type TestService } from "../service/helpers.js";
import { startProviderWorker, type ProviderWorkerProcess } from "../service/provider-worker-process.js";
import { pythonWithOpenAi } from "./python-openai.js";
import type { DeployedEndpoint } from "../../src/service/index.js";

let t: TestService;
let endpoint: DeployedEndpoint;
let worker: ProviderWorkerProcess;
let baseURL: string;
let client: OpenAI;

beforeAll(async () => {
  t = await startTestService({ leaseMs: 2500, heartbeatMs: 1000 });
  [endpoint] = (await t.service.deploy({
    app: "vllm-like",
    env: "test",
    artifactPath: t.artifact,
    manifest: manifest({ llm: resource({ retries: 0, maxConcurrency: 3, openaiPassthrough: true }) }),
  })) as [DeployedEndpoint];
  worker = await startProviderWorker(t, endpoint.id, { concurrency: 3 });
  baseURL = `${endpoint.url}/openai/v1`;
  client = new OpenAI({ baseURL, apiKey: t.key, maxRetries: 0, timeout: 30_000 });
});

afterAll(async () => {
  worker?.kill();
  await t?.close();
});

const messages = [{ role: "user" as const, content: "hello there" }];

async function status(id: string) {
  return (await call(`${endpoint.url}/status/${id}`, { key: t.key })).body;
}

describe("the OpenAI pass-through, with the official JS client", () => {
  it("answers a chat with the handler's own reply (the job's output, with its id in x-svc-job-id)", async () => {
    const { data: completion, response } = await client.chat.completions.create({ model: "echo-model", messages, max_tokens: 10 }).withResponse();
    expect(completion).toMatchObject({ object: "chat.completion", model: "echo-model" });
    expect(completion.choices[0]!.message.content).toBe("echo: hello there echo: hello there echo: hello there echo:");
    expect(completion.choices[0]!.finish_reason).toBe("length");
    expect(completion.usage).toMatchObject({ completion_tokens: 10 });
    const jobId = response.headers.get("x-svc-job-id")!;
    const record = await status(jobId);
    // The handler is a generator with its aggregate as output, as vLLM's worker: the one dict it yielded.
    expect(record).toMatchObject({ status: "COMPLETED", output: [{ id: completion.id, object: "chat.completion" }] });
  });

  it("streams a chat: the handler's SSE lines reach the client, then [DONE]", async () => {
    const stream = await client.chat.completions.create({ model: "echo-model", messages, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("echo: hello there");
    expect(chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0]!.finish_reason)).toEqual(["stop"]);
    expect(chunks.at(-1)!.usage).toMatchObject({ completion_tokens: 3 });
  });

  it("answers /completions, plain and streamed", async () => {
    const completion = await client.completions.create({ model: "echo-model", prompt: "once upon a time", max_tokens: 3 });
    expect(completion).toMatchObject({ object: "text_completion", choices: [{ text: "echo: once upon", finish_reason: "length" }] });
    const stream = await client.completions.create({ model: "echo-model", prompt: "once upon a time", stream: true });
    const texts: string[] = [];
    for await (const chunk of stream) texts.push(chunk.choices[0]!.text);
    expect(texts.join("")).toBe("echo: once upon a time");
  });

  it("answers /embeddings (the client asks for base64 and decodes it; float when asked)", async () => {
    const embeddings = await client.embeddings.create({ model: "echo-model", input: ["one two", "three"] });
    expect(embeddings.data.map((d) => d.embedding)).toEqual([
      [7, 3, 2, 0],
      [5, 2, 1, 1],
    ]);
    expect(embeddings.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
    const floats = await client.embeddings.create({ model: "echo-model", input: "aeiou", encoding_format: "float" });
    expect(floats.data[0]!.embedding).toEqual([5, 5, 1, 0]);
  });

  it("lists the handler's models (GET: the query is the input)", async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(["echo-model"]);
  });

  it("an error the handler answers keeps its status and message in OpenAI's shape", async () => {
    const err = await client.chat.completions.create({ model: "echo-model", messages: [] }).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err!.message).toBe("400 messages: field required");
    expect(err!.type).toBe("BadRequestError");
    expect(err!.param).toBe("messages");
    // Any other route under /v1/ goes to the handler too: vLLM's worker says it has no such route.
    const other = await fetch(`${baseURL}/audio/speech`, { method: "POST", headers: { authorization: `Bearer ${t.key}` }, body: "{}" });
    expect(other.status).toBe(400);
    expect(other.headers.get("content-type")).toBe("application/problem+json");
    expect(await other.json()).toMatchObject({ status: 400, error: { message: "Invalid route" } });
    // A method the pass-through does not take, a path outside v1/, and no key.
    const put = await fetch(`${baseURL}/chat/completions`, { method: "PUT", headers: { authorization: `Bearer ${t.key}` }, body: "{}" });
    expect(put.status).toBe(405);
    expect((await fetch(`${endpoint.url}/openai/v2/models`, { headers: { authorization: `Bearer ${t.key}` } })).status).toBe(404);
    expect((await fetch(`${baseURL}/models`)).status).toBe(401);
  });

  it("a client that leaves mid-stream cancels the job, and the worker is told to stop", async () => {
    const abort = new AbortController();
    const { data: stream, response } = await client.chat.completions
      .create({ model: "echo-model", messages, max_tokens: 500, stream: true, pause: 0.1 } as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming, {
        signal: abort.signal,
      })
      .withResponse();
    const jobId = response.headers.get("x-svc-job-id")!;
    let seen = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) seen++;
      if (seen === 3) break; // leaving the loop aborts the request
    }
    expect(seen).toBe(3);
    await worker.line(`stopping ${jobId}`, 10_000);
    await worker.line(`stopped ${jobId}`, 10_000);
    expect((await status(jobId)).status).toBe("CANCELLED");
  });
});

describe("the OpenAI pass-through of an endpoint made from a worker image", () => {
  it("passes through without declaring it: the image's worker answers", async () => {
    const template = await call(`${t.service.url}/v1/templates`, { key: t.key, body: { name: "vllm", imageName: "example/vllm-worker:1" } });
    expect(template.status).toBe(201);
    const created = await call(`${t.service.url}/v1/endpoints`, { key: t.key, body: { name: "vllm", templateId: template.body.id } });
    expect(created.status).toBe(201);
    // This service runs no images: the worker a driver would start from the image is started here by hand.
    const imageWorker = await startProviderWorker(t, created.body.id, { env: { OPENAI_MODEL: "from-image" } });
    try {
      const images = new OpenAI({ baseURL: `${t.service.url}/v2/${created.body.id}/openai/v1`, apiKey: t.key, maxRetries: 0, timeout: 30_000 });
      expect((await images.models.list()).data.map((m) => m.id)).toEqual(["from-image"]);
      const stream = await images.chat.completions.create({ model: "from-image", messages, stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      expect(text).toBe("echo: hello there");
    } finally {
      imageWorker.kill();
    }
  });
});

describe("the OpenAI pass-through, with the official Python client", () => {
  const python = pythonWithOpenAi();
  it.skipIf("missing" in python)(
    `chat, stream, completions, embeddings, models${"missing" in python ? ` (skipped: ${python.missing})` : ""}`,
    async () => {
      const { stdout } = await promisify(execFile)((python as { python: string }).python, [join(import.meta.dirname, "openai-client.py")], {
        env: { ...process.env, OPENAI_BASE_URL: baseURL, OPENAI_API_KEY: t.key },
        timeout: 60_000,
      });
      const out = JSON.parse(stdout);
      expect(out).toEqual({
        chat: { content: "echo: hello from python", finish_reason: "stop", usage: 8 },
        chat_stream: "echo: hello from python",
        completion: { text: "echo: say it", finish_reason: "length" },
        completion_stream: "echo: say it again",
        embeddings: [
          [7, 3, 2, 0],
          [5, 2, 1, 1],
        ],
        models: ["echo-model"],
      });
    },
    60_000,
  );
});
