// The official `openai` client against the REAL service route: fixtures/llm-echo built for real, deployed to a
// real service whose scaler runs it in real worker processes. A chat becomes a job; its stream chunks (with
// their metrics) come back as the reply.

import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type LiveApp } from "../lb/harness.js";
import { errorMessage } from "../../src/errors.js";

let app: LiveApp;
let client: OpenAI;
let baseURL: string;
let endpointId: string;

beforeAll(async () => {
  app = await startApp("fixtures/llm-echo", {
    resources: { "llm-echo": { workersMin: 0, workersMax: 1, retries: 0 }, "llm-tools": { workersMin: 0, workersMax: 1, retries: 0 } },
  });
  endpointId = app.endpoints.find((e) => e.name === "llm-echo")!.id;
  baseURL = `${app.service.url}/v2/${endpointId}/openai/v1`;
  client = new OpenAI({ baseURL, apiKey: app.key, maxRetries: 0, timeout: 30_000 });
});

afterAll(async () => {
  await app?.close();
});

const messages = [
  { role: "system" as const, content: "Repeat after me." },
  { role: "user" as const, content: "the lighthouse keeps its light" },
];

describe("the OpenAI route of the service", () => {
  it("completes a chat without streaming", async () => {
    const completion = await client.chat.completions.create({ model: "llm-echo", messages, max_tokens: 50 });
    expect(completion.object).toBe("chat.completion");
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.model).toBe("llm-echo");
    expect(completion.choices[0]!.message).toMatchObject({ role: "assistant", content: "You said: the lighthouse keeps its light" });
    expect(completion.choices[0]!.finish_reason).toBe("stop");
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
    expect(completion.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it("completes the same chat with streaming, as chat.completion.chunk events ending the stream", async () => {
    const stream = await client.chat.completions.create({ model: "llm-echo", messages, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("You said: the lighthouse keeps its light");
    expect(chunks.filter((c) => c.choices[0]?.delta.content).length).toBeGreaterThan(3);
    expect(chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0]!.finish_reason)).toEqual(["stop"]);
    expect(chunks.at(-1)!.usage!.completion_tokens).toBeGreaterThan(0);
    for (const chunk of chunks) expect(chunk.object).toBe("chat.completion.chunk");
  });

  it("surfaces a 422 for an invalid request through the client's error", async () => {
    const err = await client.chat.completions
      .create({ model: "llm-echo", messages: [{ role: "user", content: 42 as unknown as string }], temperature: 5 })
      .then(
        () => undefined,
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
    expect(err).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    expect(err!.status).toBe(422);
    expect(err!.message).toContain("$.messages[0].content: must be a string or an array of content parts");
    expect(err!.message).toContain("$.temperature");
    expect(err!.param).toBe("messages[0].content");
  });

  it("answers a bad key with a 401 the client reads, and lists the models", async () => {
    const stranger = new OpenAI({ baseURL, apiKey: "not-a-key", maxRetries: 0 });
    const err = await stranger.models.list().then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err!.message).toMatch(/^401 The API key is not valid/);
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(["llm-echo"]);
  });

  it("keeps the chunks' metrics in the job's stream", async () => {
    // The same request as a job: /stream returns each chunk's output and the metrics textGeneration reported.
    const headers = { authorization: `Bearer ${app.key}`, "content-type": "application/json" };
    const input = { openai: { route: "/v1/chat/completions", input: { model: "llm-echo", messages, stream: true } } };
    const run = (await (await fetch(`${app.service.url}/v2/${endpointId}/runsync`, { method: "POST", headers, body: JSON.stringify({ input }) })).json()) as {
      id: string;
      status: string;
    };
    expect(run.status).toBe("COMPLETED");
    const stream = (await (await fetch(`${app.service.url}/v2/${endpointId}/stream/${run.id}`, { headers })).json()) as {
      stream: Array<{ output: { text: string[]; output_tokens: number }; metrics?: Record<string, unknown> }>;
    };
    expect(stream.stream.length).toBeGreaterThan(3);
    stream.stream.forEach((chunk, i) => {
      expect(Array.isArray(chunk.output.text)).toBe(true);
      expect(chunk.metrics).toMatchObject({ scenario: "openai-chat", stream_index: i, output_tokens: chunk.output.output_tokens });
      expect(chunk.metrics).toHaveProperty("avg_gen_throughput");
    });
  });
});

describe("a generation that fails midway, on an endpoint with retries", () => {
  let retrying: LiveApp;
  beforeAll(async () => {
    retrying = await startApp("fixtures/llm-echo", { resources: { "llm-echo": { workersMin: 0, workersMax: 1, retries: 2 } } });
  });
  afterAll(async () => {
    await retrying?.close();
  });

  it("ends a stream with an error the client raises, and does not retry it (its text went out already)", async () => {
    const id = retrying.endpoints[0]!.id;
    const failing = new OpenAI({ baseURL: `${retrying.service.url}/v2/${id}/openai/v1`, apiKey: retrying.key, maxRetries: 0 });
    const stream = await failing.chat.completions.create({ model: "llm-echo", messages: [{ role: "user", content: "please fail now" }], stream: true });
    const received: string[] = [];
    const failure = await (async () => {
      for await (const chunk of stream) received.push(chunk.choices[0]?.delta.content ?? "");
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect(errorMessage(failure)).toMatch(/asked to fail/);
    expect(received.join("")).toBe("You said:");
    // The job failed once, with no retry.
    const health = (await (await fetch(`${retrying.service.url}/v2/${id}/health`, { headers: { authorization: `Bearer ${retrying.key}` } })).json()) as {
      jobs: { failed: number; retried: number };
    };
    expect(health.jobs).toMatchObject({ failed: 1, retried: 0 });

    const plain = await failing.chat.completions.create({ model: "llm-echo", messages: [{ role: "user", content: "please fail again" }] }).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(plain?.status).toBe(500);
    expect(plain?.message).toMatch(/asked to fail/);
    // A plain reply may use the endpoint's retries: 2 more attempts.
    const after = (await (await fetch(`${retrying.service.url}/v2/${id}/health`, { headers: { authorization: `Bearer ${retrying.key}` } })).json()) as {
      jobs: { failed: number; retried: number };
    };
    expect(after.jobs).toMatchObject({ failed: 2, retried: 2 });
  });
});

describe("tool calls and the current message shapes through the service", () => {
  const weather = {
    type: "function" as const,
    function: { name: "weather", description: "The weather in a city", parameters: { type: "object", properties: { query: { type: "string" } } } },
  };
  const toolsClient = () =>
    new OpenAI({
      baseURL: `${app.service.url}/v2/${app.endpoints.find((e) => e.name === "llm-tools")!.id}/openai/v1`,
      apiKey: app.key,
      maxRetries: 0,
      timeout: 30_000,
    });

  it("runs a two-step tool loop: the reply calls the tool, the tool's result is sent back, the reply uses it", async () => {
    const client2 = toolsClient();
    const first = await client2.chat.completions.create({
      model: "llm-tools",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Paris" },
            { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          ],
        },
      ],
      tools: [weather],
      tool_choice: "auto",
    });
    expect(first.choices[0]!.finish_reason).toBe("tool_calls");
    const message = first.choices[0]!.message;
    expect(message.content).toBeNull();
    expect(message.tool_calls).toEqual([
      { id: expect.stringMatching(/^call_/), type: "function", function: { name: "weather", arguments: '{"query":"Paris"}' } },
    ]);
    const call = message.tool_calls![0]!;
    const second = await client2.chat.completions.create({
      model: "llm-tools",
      tools: [weather],
      messages: [
        { role: "developer", content: "Use tools." },
        { role: "user", content: "Paris" },
        message,
        { role: "tool", tool_call_id: call.id, content: "sunny, 21C" },
      ],
    });
    expect(second.choices[0]!.finish_reason).toBe("stop");
    expect(second.choices[0]!.message.content).toBe("Tool said: sunny, 21C");
  }, 60_000);

  it("streams tool calls as deltas the client assembles, parallel calls included", async () => {
    const stream = await toolsClient().chat.completions.create({
      model: "llm-tools",
      messages: [{ role: "user", content: "both cities" }],
      tools: [weather],
      stream: true,
    });
    const calls: Array<{ id?: string; name: string; arguments: string }> = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta.tool_calls ?? []) {
        calls[d.index] ??= { name: "", arguments: "" };
        if (d.id) calls[d.index]!.id = d.id;
        calls[d.index]!.name += d.function?.name ?? "";
        calls[d.index]!.arguments += d.function?.arguments ?? "";
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe("tool_calls");
    expect(calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ["weather", { query: "both cities" }],
      ["weather", { query: "both cities (again)" }],
    ]);
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);
  }, 60_000);
});

describe("the Responses API on the same workers", () => {
  const weather = {
    type: "function" as const,
    name: "weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { query: { type: "string" } } },
    strict: false,
  };

  it("answers a plain response with instructions and input as a string, and stores it for GET", async () => {
    const response = await client.responses.create({ model: "llm-echo", instructions: "Repeat after me.", input: "the tide comes in", max_output_tokens: 50 });
    expect(response.object).toBe("response");
    expect(response.id).toMatch(/^resp_/);
    expect(response.status).toBe("completed");
    expect(response.output_text).toBe("You said: the tide comes in");
    expect(response.output[0]).toMatchObject({
      type: "message",
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: "You said: the tide comes in" }],
    });
    expect(response.usage).toMatchObject({ input_tokens: expect.any(Number), output_tokens: expect.any(Number) });
    expect(response.instructions).toBe("Repeat after me.");
    const again = await client.responses.retrieve(response.id);
    expect(again.output_text ?? again.output.map((o) => ("content" in o ? o.content.map((c) => ("text" in c ? c.text : "")).join("") : "")).join("")).toBe(
      "You said: the tide comes in",
    );
    const notStored = await client.responses.create({ model: "llm-echo", input: "forget me", store: false });
    const missing = await client.responses.retrieve(notStored.id).catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect((missing as InstanceType<typeof OpenAI.APIError>).status).toBe(404);
  }, 60_000);

  it("streams typed events the client reads, ending with response.completed", async () => {
    const stream = await client.responses.create({
      model: "llm-echo",
      input: [{ role: "user", content: [{ type: "input_text", text: "waves on stones" }] }],
      stream: true,
    });
    const types: string[] = [];
    let text = "";
    let completed: { status: string; output_text?: string } | undefined;
    for await (const e of stream) {
      types.push(e.type);
      if (e.type === "response.output_text.delta") text += e.delta;
      if (e.type === "response.completed") completed = e.response;
    }
    expect(text).toBe("You said: waves on stones");
    expect(types.slice(0, 4)).toEqual(["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
    expect(types.slice(-4)).toEqual(["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]);
    expect(completed?.status).toBe("completed");
  }, 60_000);

  it("runs a tool loop: a function_call item, then its function_call_output, by items and by previous_response_id", async () => {
    const toolsId = app.endpoints.find((e) => e.name === "llm-tools")!.id;
    const c = new OpenAI({ baseURL: `${app.service.url}/v2/${toolsId}/openai/v1`, apiKey: app.key, maxRetries: 0, timeout: 30_000 });
    const first = await c.responses.create({ model: "llm-tools", input: "Lyon", tools: [weather] });
    const call = first.output.find((o) => o.type === "function_call");
    expect(call).toMatchObject({ type: "function_call", name: "weather", arguments: '{"query":"Lyon"}', call_id: expect.stringMatching(/^call_/) });
    const callId = (call as { call_id: string }).call_id;
    // Items sent back whole, as a stateless client does.
    const byItems = await c.responses.create({
      model: "llm-tools",
      tools: [weather],
      input: [{ role: "user", content: "Lyon" }, call as never, { type: "function_call_output", call_id: callId, output: "rain, 12C" }],
    });
    expect(byItems.output_text).toBe("Tool said: rain, 12C");
    // Or by reference to the stored first response.
    const byPrevious = await c.responses.create({
      model: "llm-tools",
      tools: [weather],
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: callId, output: "fog" }],
    });
    expect(byPrevious.output_text).toBe("Tool said: fog");
    const unknown = await c.responses
      .create({ model: "llm-tools", previous_response_id: "resp_nope", input: "x" })
      .catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect((unknown as InstanceType<typeof OpenAI.APIError>).status).toBe(404);
  }, 60_000);

  it("streams a function call's arguments as deltas", async () => {
    const toolsId = app.endpoints.find((e) => e.name === "llm-tools")!.id;
    const c = new OpenAI({ baseURL: `${app.service.url}/v2/${toolsId}/openai/v1`, apiKey: app.key, maxRetries: 0, timeout: 30_000 });
    const stream = await c.responses.create({ model: "llm-tools", input: "Nice", tools: [weather], stream: true });
    let args = "";
    let done: { arguments: string; name?: string } | undefined;
    for await (const e of stream) {
      if (e.type === "response.function_call_arguments.delta") args += e.delta;
      if (e.type === "response.function_call_arguments.done") done = e as unknown as { arguments: string; name?: string };
    }
    expect(JSON.parse(args)).toEqual({ query: "Nice" });
    expect(done?.arguments).toBe(args);
  }, 60_000);
});

describe("the OpenAI route of an endpoint that is not a language model", () => {
  let hello: LiveApp;
  beforeAll(async () => {
    hello = await startApp("examples/hello");
  });
  afterAll(async () => {
    await hello?.close();
  });

  it("answers 502 naming the output's shape instead of an empty reply", async () => {
    const id = hello.endpoints.find((e) => e.name === "hello")!.id;
    const helloClient = new OpenAI({ baseURL: `${hello.service.url}/v2/${id}/openai/v1`, apiKey: hello.key, maxRetries: 0, timeout: 30_000 });
    const err = await helloClient.chat.completions.create({ model: "hello", messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    expect(errorMessage(err)).toContain(
      "The endpoint's output is not a chat reply: expected text (a string, or an object with `text` or `tool_calls`), got an object with keys greeting",
    );
  }, 60_000);

  it("fails a streamed request visibly (the client raises), never with an empty successful stream", async () => {
    const id = hello.endpoints.find((e) => e.name === "hello")!.id;
    const helloClient = new OpenAI({ baseURL: `${hello.service.url}/v2/${id}/openai/v1`, apiKey: hello.key, maxRetries: 0, timeout: 30_000 });
    const stream = await helloClient.chat.completions.create({ model: "hello", messages, stream: true });
    const deltas: string[] = [];
    const err = await (async () => {
      for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta.content ?? "");
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(errorMessage(err)).toContain("The endpoint's output is not a chat reply");
    expect(deltas.join("")).toBe("");
  }, 60_000);

  it("fails a streamed Responses request visibly too", async () => {
    const id = hello.endpoints.find((e) => e.name === "hello")!.id;
    const helloClient = new OpenAI({ baseURL: `${hello.service.url}/v2/${id}/openai/v1`, apiKey: hello.key, maxRetries: 0, timeout: 30_000 });
    const stream = await helloClient.responses.create({ model: "hello", input: "hi", stream: true });
    const err = await (async () => {
      for await (const _ of stream) void _;
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(errorMessage(err)).toContain("The endpoint's output is not a chat reply");
  }, 60_000);

  it("names the status of its errors in their title, as the job API does", async () => {
    const id = hello.endpoints.find((e) => e.name === "hello")!.id;
    const res = await fetch(`${hello.service.url}/v2/${id}/openai/v1/chat/completions`, { headers: { authorization: `Bearer ${hello.key}` } });
    expect(res.status).toBe(405);
    expect(res.headers.get("content-type")).toContain("application/problem+json");
    expect(await res.json()).toMatchObject({ title: "Method Not Allowed", status: 405 });
  });
});
