// The Vercel AI SDK against the real service's OpenAI route, unchanged but for its base URL: `generateText` with
// tools and `stopWhen` (a two-step tool loop) through @ai-sdk/openai-compatible (chat completions) and through
// @ai-sdk/openai's default model (the Responses API), and `streamText`. fixtures/llm-echo is built and run by real
// process workers; its `llm-tools` endpoint calls the first tool it is offered, then answers with the result.

import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startApp, type LiveApp } from "../lb/harness.js";

let app: LiveApp;
const base = (name: string) => `${app.service.url}/v2/${app.endpoints.find((e) => e.name === name)!.id}/openai/v1`;

beforeAll(async () => {
  app = await startApp("fixtures/llm-echo", { resources: { "llm-echo": { retries: 0 }, "llm-tools": { retries: 0 } } });
}, 120_000);
afterAll(async () => {
  await app?.close();
});

const calls: string[] = [];
const weather = tool({
  description: "The weather in a city",
  inputSchema: z.object({ query: z.string() }),
  execute: async ({ query }) => {
    calls.push(query);
    return `sunny in ${query}`;
  },
});

describe("@ai-sdk/openai-compatible (chat completions)", () => {
  it("runs a two-step tool loop with generateText, tools and stopWhen", async () => {
    calls.length = 0;
    const provider = createOpenAICompatible({ name: "svc", baseURL: base("llm-tools"), apiKey: app.key });
    const result = await generateText({ model: provider("llm-tools"), tools: { weather }, stopWhen: stepCountIs(3), prompt: "Oslo" });
    expect(calls).toEqual(["Oslo"]);
    expect(result.steps).toHaveLength(2);
    expect(result.steps[0]!.finishReason).toBe("tool-calls");
    expect(result.text).toContain("sunny in Oslo");
    expect(result.finishReason).toBe("stop");
  }, 60_000);

  it("streams text with streamText, and sends multi-part user content", async () => {
    const provider = createOpenAICompatible({ name: "svc", baseURL: base("llm-echo"), apiKey: app.key });
    const result = streamText({ model: provider("llm-echo"), messages: [{ role: "user", content: [{ type: "text", text: "ships in harbour" }] }] });
    let text = "";
    for await (const delta of result.textStream) text += delta;
    expect(text).toBe("You said: ships in harbour");
  }, 60_000);
});

describe("@ai-sdk/openai (its default model uses the Responses API)", () => {
  it("runs the same tool loop through /responses", async () => {
    calls.length = 0;
    const openai = createOpenAI({ baseURL: base("llm-tools"), apiKey: app.key });
    const result = await generateText({ model: openai("llm-tools"), tools: { weather }, stopWhen: stepCountIs(3), prompt: "Bergen" });
    expect(calls).toEqual(["Bergen"]);
    expect(result.text).toContain("sunny in Bergen");
  }, 60_000);

  it("streams a plain reply through /responses, and through .chat()", async () => {
    const openai = createOpenAI({ baseURL: base("llm-echo"), apiKey: app.key });
    let text = "";
    for await (const delta of streamText({ model: openai("llm-echo"), prompt: "quiet fjords" }).textStream) text += delta;
    expect(text).toBe("You said: quiet fjords");
    const chat = await generateText({ model: openai.chat("llm-echo"), prompt: "steep hills" });
    expect(chat.text).toBe("You said: steep hills");
  }, 60_000);
});
