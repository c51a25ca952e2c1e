// `/completions` and `/embeddings` on svc's own endpoints, with the official `openai` client: fixtures/llm-echo
// built for real (a textGeneration() endpoint and an embeddings() one), deployed to a real service whose scaler
// runs it in real worker processes.

import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type LiveApp } from "../lb/harness.js";

let app: LiveApp;
let text: OpenAI;
let embedder: OpenAI;

beforeAll(async () => {
  app = await startApp("fixtures/llm-echo", {
    resources: { "llm-echo": { workersMin: 0, workersMax: 1, retries: 0 }, "llm-embed": { workersMin: 0, workersMax: 1, retries: 0 } },
  });
  const client = (name: string) =>
    new OpenAI({
      baseURL: `${app.service.url}/v2/${app.endpoints.find((e) => e.name === name)!.id}/openai/v1`,
      apiKey: app.key,
      maxRetries: 0,
      timeout: 30_000,
    });
  text = client("llm-echo");
  embedder = client("llm-embed");
});

afterAll(async () => {
  await app?.close();
});

describe("/completions on a textGeneration() endpoint", () => {
  it("completes a prompt without streaming", async () => {
    const completion = await text.completions.create({ model: "llm-echo", prompt: "the lighthouse keeps its light" });
    expect(completion).toMatchObject({ object: "text_completion", model: "llm-echo" });
    expect(completion.id).toMatch(/^cmpl-/);
    expect(completion.choices).toEqual([{ index: 0, text: "You said: the lighthouse keeps its light", finish_reason: "stop", logprobs: null }]);
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
    // max_tokens and echo.
    const cut = await text.completions.create({ model: "llm-echo", prompt: "one two three four", max_tokens: 3, echo: true });
    expect(cut.choices[0]).toMatchObject({ text: "one two three fourYou said:", finish_reason: "length" });
  });

  it("streams a completion as text_completion events, then usage when asked", async () => {
    const stream = await text.completions.create({ model: "llm-echo", prompt: "a b c", stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Completions.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.text ?? "").join("")).toBe("You said: a b c");
    expect(chunks.filter((c) => c.choices[0]?.text).length).toBeGreaterThan(2);
    expect(chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0]!.finish_reason)).toEqual(["stop"]);
    expect(chunks.at(-1)!.usage!.completion_tokens).toBeGreaterThan(0);
    for (const chunk of chunks) expect(chunk.object).toBe("text_completion");
  });

  it("refuses what it cannot answer with a 422 the client reads", async () => {
    const err = await text.completions.create({ model: "llm-echo", prompt: ["one", "two"], n: 2 }).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(err).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    expect(err!.message).toContain("$.prompt: one prompt per request");
    expect(err!.message).toContain("$.n: only 1 is supported");
  });
});

describe("/embeddings on an embeddings() endpoint", () => {
  it("embeds texts: base64 (the client's default, decoded by it) and floats", async () => {
    const answer = await embedder.embeddings.create({ model: "llm-embed", input: ["one two", "aeiou"] });
    expect(answer.object).toBe("list");
    expect(answer.model).toBe("llm-embed");
    expect(answer.data.map((d) => [d.index, d.embedding])).toEqual([
      [0, [7, 3, 2]],
      [1, [5, 5, 1]],
    ]);
    expect(answer.usage.prompt_tokens).toBeGreaterThan(0);
    const floats = await embedder.embeddings.create({ model: "llm-embed", input: "three", encoding_format: "float", dimensions: 2 });
    // Cut to 2 numbers and scaled back to length 1.
    expect(floats.data[0]!.embedding.map((x) => Math.round(x * 1000) / 1000)).toEqual([0.928, 0.371]);
  });

  it("a text endpoint fails an embeddings job (500 with its error); a bad request is a 422", async () => {
    const wrong = await text.embeddings.create({ model: "llm-echo", input: "hello" }).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(wrong).toBeInstanceOf(OpenAI.APIError);
    expect(wrong!.status).toBe(500);
    expect(wrong!.message).toContain("Invalid text-generation input");
    const bad = await embedder.embeddings.create({ model: "llm-embed", input: [] }).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(bad!.status).toBe(422);
    expect(bad!.message).toContain("$.input: must hold at least one string");
  });
});
