// LangChain's ChatOpenAI against the real service's OpenAI route, unchanged but for its base URL: bindTools and a
// ToolMessage (a two-step tool loop), content blocks, streaming. fixtures/llm-echo on real process workers.

import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { afterAll, beforeAll, expect, it } from "vitest";
import { z } from "zod";
import { startApp, type LiveApp } from "../lb/harness.js";

let app: LiveApp;
const chat = (name: string) =>
  new ChatOpenAI({
    model: name,
    apiKey: app.key,
    maxRetries: 0,
    configuration: { baseURL: `${app.service.url}/v2/${app.endpoints.find((e) => e.name === name)!.id}/openai/v1` },
  });

beforeAll(async () => {
  app = await startApp("fixtures/llm-echo", { resources: { "llm-echo": { retries: 0 }, "llm-tools": { retries: 0 } } });
}, 120_000);
afterAll(async () => {
  await app?.close();
});

it("binds tools, gets a tool call, and answers from a ToolMessage", async () => {
  const weather = tool(async ({ query }: { query: string }) => `rain in ${query}`, {
    name: "weather",
    description: "The weather in a city",
    schema: z.object({ query: z.string() }),
  });
  const model = chat("llm-tools").bindTools([weather]);
  const history = [new SystemMessage("Use tools."), new HumanMessage({ content: [{ type: "text", text: "Turku" }] })];
  const first = (await model.invoke(history)) as AIMessage;
  expect(first.tool_calls).toEqual([expect.objectContaining({ name: "weather", args: { query: "Turku" }, id: expect.stringMatching(/^call_/) })]);
  const call = first.tool_calls![0]!;
  const result = await weather.invoke(call.args as { query: string });
  const second = await model.invoke([...history, first, new ToolMessage({ content: result, tool_call_id: call.id! })]);
  expect(second.content).toBe("Tool said: rain in Turku");
}, 60_000);

it("streams a reply", async () => {
  let text = "";
  for await (const chunk of await chat("llm-echo").stream([new HumanMessage("lakes and pines")])) text += chunk.content as string;
  expect(text).toBe("You said: lakes and pines");
}, 60_000);
