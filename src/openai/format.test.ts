import { describe, expect, it } from "vitest";
import { chatCompletionFromOutput, chatJobInput, isOpenAiJobInput, modelList, notChatOutput, openAiProblem, readChunkOutput } from "./format.js";
import { checkChatRequest } from "svc/internal";

const request = { model: "textgen", messages: [{ role: "user" as const, content: "Hello there" }] };

describe("chat job input", () => {
  it("wraps the validated request for the workers", () => {
    const verdict = checkChatRequest({ ...request, max_tokens: 5 });
    if (!verdict.ok) throw new Error("invalid");
    const input = chatJobInput(verdict.request);
    expect(input).toEqual({ openai: { route: "/v1/chat/completions", input: { ...request, stream: false, max_tokens: 5 } } });
    expect(isOpenAiJobInput(input)).toBe(true);
    expect(isOpenAiJobInput({ prompt: "x" })).toBe(false);
    expect(isOpenAiJobInput({ openai: { route: "/v1/embeddings", input: {} } })).toBe(false);
  });
});

describe("readChunkOutput", () => {
  it("reads the text-generation shape, strings and {text}", () => {
    expect(readChunkOutput({ text: ["a", "b"], input_tokens: 3, output_tokens: 2, finish_reason: "length" })).toEqual({
      text: "ab",
      input_tokens: 3,
      output_tokens: 2,
      finish_reason: "length",
    });
    expect(readChunkOutput(" word")).toEqual({ text: " word" });
    expect(readChunkOutput({ text: "x" })).toEqual({ text: "x" });
    expect(readChunkOutput(null)).toEqual({ text: "" });
    expect(readChunkOutput({ text: [1, "ok"], output_tokens: -1 })).toEqual({ text: "ok" });
  });
});

describe("chatCompletionFromOutput", () => {
  it("builds the reply from chunk outputs, with the worker's counts", () => {
    const outputs = [
      { text: ["Hi"], input_tokens: 9, output_tokens: 1 },
      { text: [" you"], input_tokens: 9, output_tokens: 2 },
      { text: [], input_tokens: 9, output_tokens: 2, finish_reason: "length" },
    ];
    expect(chatCompletionFromOutput(outputs, request, { id: "chatcmpl-job1", created: 1700000000 })).toEqual({
      id: "chatcmpl-job1",
      object: "chat.completion",
      created: 1700000000,
      model: "textgen",
      choices: [{ index: 0, message: { role: "assistant", content: "Hi you", refusal: null }, finish_reason: "length", logprobs: null }],
      usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 },
    });
  });

  it("counts tokens itself for a worker yielding plain strings, and defaults to stop", () => {
    const reply = chatCompletionFromOutput(["Fine", ",", " thanks"], request);
    expect(reply.id).toMatch(/^chatcmpl-[0-9a-f]{24}$/);
    expect(Math.abs(reply.created - Date.now() / 1000)).toBeLessThan(5);
    expect(reply.choices[0]).toEqual({
      index: 0,
      message: { role: "assistant", content: "Fine, thanks", refusal: null },
      finish_reason: "stop",
      logprobs: null,
    });
    // "<", "|", "user", "|", ">", "\nHello", " there", "\n<", "|", "assistant", "|", ">", "\n"
    expect(reply.usage).toEqual({ prompt_tokens: 13, completion_tokens: 3, total_tokens: 16 });
  });

  it("takes a plain function's single output as one chunk", () => {
    expect(chatCompletionFromOutput({ text: "whole answer" }, request).choices[0]!.message.content).toBe("whole answer");
  });
});

describe("modelList", () => {
  it("has the OpenAI list shape", () => {
    expect(
      modelList([
        { id: "textgen", created: 1700000000 },
        { id: "other", owned_by: "me" },
      ]),
    ).toEqual({
      object: "list",
      data: [
        { id: "textgen", object: "model", created: 1700000000, owned_by: "svc" },
        { id: "other", object: "model", created: 0, owned_by: "me" },
      ],
    });
  });
});

describe("openAiProblem", () => {
  it("is a problem+json body that also carries an OpenAI error object", () => {
    expect(openAiProblem(422, "The chat completion request is invalid (1 problem)", ["$.messages[1].content: must be a string"])).toEqual({
      title: "Unprocessable Entity",
      status: 422,
      detail: "The chat completion request is invalid (1 problem)",
      errors: ["$.messages[1].content: must be a string"],
      error: {
        message: "The chat completion request is invalid (1 problem): $.messages[1].content: must be a string",
        type: "invalid_request_error",
        param: "messages[1].content",
        code: "invalid_request",
      },
    });
    expect(openAiProblem(401, "Missing key")).toEqual({
      title: "Unauthorized",
      status: 401,
      detail: "Missing key",
      error: { message: "Missing key", type: "authentication_error", param: null, code: null },
    });
    expect(openAiProblem(503, "No worker").error.type).toBe("server_error");
  });
});

describe("chatFunctionFor / endpointModels", () => {
  it("routes every model to a single-function endpoint, and by name otherwise", async () => {
    const { chatFunctionFor, endpointModels } = await import("./format.js");
    expect(chatFunctionFor(["chat"], "gpt-4o")).toEqual({ function: "chat" });
    expect(chatFunctionFor(["chat", "summarise"], "summarise")).toEqual({ function: "summarise" });
    expect(chatFunctionFor(["chat", "summarise"], "gpt-4o")).toEqual({
      status: 422,
      detail: "The chat completion request names no function of this endpoint",
      errors: ["$.model: must be one of chat, summarise"],
    });
    expect(chatFunctionFor([], "x")).toMatchObject({ status: 404 });
    expect(endpointModels("textgen", ["chat"], 1700000000)).toEqual({
      object: "list",
      data: [{ id: "textgen", object: "model", created: 1700000000, owned_by: "textgen" }],
    });
    expect(endpointModels("llm", ["chat", "summarise"]).data.map((m) => m.id)).toEqual(["chat", "summarise"]);
  });
});

describe("notChatOutput", () => {
  it("accepts text in every form readChunkOutput reads, and names anything else", () => {
    for (const ok of ["hi", { text: "hi" }, { text: ["a", "b"], input_tokens: 1 }, ["a", { text: "b" }], [], null]) expect(notChatOutput(ok)).toBeUndefined();
    expect(notChatOutput({ greeting: "Hello" })).toBe("expected text (a string, or an object with `text` or `tool_calls`), got an object with keys greeting");
    expect(notChatOutput(["a", 42])).toBe("expected text (a string, or an object with `text` or `tool_calls`), got number");
  });
});

describe("tool calls in a reply", () => {
  it("gathers whole calls and fragments by index, with ids, arguments as JSON text and finish_reason tool_calls", () => {
    const reply = chatCompletionFromOutput(
      [
        { text: [], tool_calls: [{ index: 0, id: "call_a", name: "weather", arguments: '{"ci' }] },
        { tool_calls: [{ index: 0, arguments: 'ty":"Paris"}' }] },
        { tool_calls: [{ name: "time", arguments: { zone: "CET" } }] },
      ],
      { model: "m", messages: [{ role: "user", content: "hi" }] },
      { id: "chatcmpl-job9" },
    );
    expect(reply.choices[0]).toEqual({
      index: 0,
      message: {
        role: "assistant",
        content: null,
        refusal: null,
        tool_calls: [
          { id: "call_a", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: "call_job9_1", type: "function", function: { name: "time", arguments: '{"zone":"CET"}' } },
        ],
      },
      finish_reason: "tool_calls",
      logprobs: null,
    });
    expect(notChatOutput([{ tool_calls: [] }])).toBeUndefined();
  });
});
