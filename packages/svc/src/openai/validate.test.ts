import { describe, expect, it } from "vitest";
import { checkChatRequest, parseChatRequest, textMessages } from "./validate.js";

const valid = { model: "llm", messages: [{ role: "user", content: "Hi" }] };
const errorsOf = (body: unknown) => {
  const verdict = checkChatRequest(body);
  if (verdict.ok) throw new Error("expected a fault");
  expect(verdict.status).toBe(422);
  return verdict.errors;
};

describe("checkChatRequest", () => {
  it("accepts a minimal request and normalises it", () => {
    expect(checkChatRequest(valid)).toEqual({ ok: true, request: { model: "llm", messages: [{ role: "user", content: "Hi" }], stream: false } });
  });

  it("accepts every option and unknown keys, and drops null options", () => {
    const verdict = checkChatRequest({
      ...valid,
      max_tokens: 16,
      temperature: 0,
      top_p: 1,
      stream: true,
      n: 1,
      stop: "\n",
      seed: -3,
      stream_options: { include_usage: true },
      user: "someone",
      presence_penalty: 0.5,
      logprobs: null,
      frequency_penalty: null,
    });
    expect(verdict).toEqual({
      ok: true,
      request: {
        model: "llm",
        messages: [{ role: "user", content: "Hi" }],
        stream: true,
        max_tokens: 16,
        temperature: 0,
        top_p: 1,
        stop: ["\n"],
        seed: -3,
        stream_options: { include_usage: true },
      },
    });
  });

  it("takes max_completion_tokens, the smaller bound winning", () => {
    const verdict = checkChatRequest({ ...valid, max_completion_tokens: 8, max_tokens: 20 });
    expect(verdict.ok && verdict.request.max_tokens).toBe(8);
  });

  it("answers 400 for a body that is not an object", () => {
    for (const body of [null, [], "text", 3]) {
      expect(checkChatRequest(body)).toMatchObject({ ok: false, status: 400, detail: "The request body must be a JSON object" });
    }
  });

  it("answers 400 for malformed JSON", () => {
    expect(parseChatRequest("{ nope")).toMatchObject({ ok: false, status: 400 });
    expect(parseChatRequest(JSON.stringify(valid)).ok).toBe(true);
  });

  it("names each fault with its JSON path", () => {
    expect(errorsOf({ messages: valid.messages })).toEqual(["$.model: is required"]);
    expect(errorsOf({ ...valid, model: 3 })).toEqual(["$.model: must be a non-empty string"]);
    expect(errorsOf({ ...valid, model: "" })).toEqual(["$.model: must be a non-empty string"]);
    expect(errorsOf({ model: "llm" })).toEqual(["$.messages: is required"]);
    expect(errorsOf({ model: "llm", messages: {} })).toEqual(["$.messages: must be an array"]);
    expect(errorsOf({ model: "llm", messages: [] })).toEqual(["$.messages: must hold at least one message"]);
    expect(errorsOf({ model: "llm", messages: ["hi"] })).toEqual(["$.messages[0]: must be an object with role and content"]);
    expect(
      errorsOf({
        model: "llm",
        messages: [
          { role: "user", content: "a" },
          { role: "user", content: 5 },
        ],
      }),
    ).toEqual(["$.messages[1].content: must be a string or an array of content parts"]);
    expect(errorsOf({ model: "llm", messages: [{ content: "a" }] })).toEqual(["$.messages[0].role: is required"]);
    expect(errorsOf({ model: "llm", messages: [{ role: "robot", content: "a" }] })).toEqual([
      "$.messages[0].role: must be one of system, user, assistant, tool, developer, function",
    ]);
    expect(errorsOf({ model: "llm", messages: [{ role: "user" }] })).toEqual(["$.messages[0].content: is required"]);
    expect(errorsOf({ ...valid, max_tokens: 0 })).toEqual(["$.max_tokens: must be an integer >= 1"]);
    expect(errorsOf({ ...valid, max_tokens: 2.5 })).toEqual(["$.max_tokens: must be an integer >= 1"]);
    expect(errorsOf({ ...valid, max_completion_tokens: "9" })).toEqual(["$.max_completion_tokens: must be an integer >= 1"]);
    expect(errorsOf({ ...valid, temperature: 2.5 })).toEqual(["$.temperature: must be a number from 0 to 2"]);
    expect(errorsOf({ ...valid, temperature: -0.1 })).toEqual(["$.temperature: must be a number from 0 to 2"]);
    expect(errorsOf({ ...valid, temperature: "hot" })).toEqual(["$.temperature: must be a number from 0 to 2"]);
    expect(errorsOf({ ...valid, top_p: 0 })).toEqual(["$.top_p: must be a number greater than 0 and at most 1"]);
    expect(errorsOf({ ...valid, top_p: 1.5 })).toEqual(["$.top_p: must be a number greater than 0 and at most 1"]);
    expect(errorsOf({ ...valid, stream: "yes" })).toEqual(["$.stream: must be a boolean"]);
    expect(errorsOf({ ...valid, n: 2 })).toEqual(["$.n: only 1 is supported"]);
    expect(errorsOf({ ...valid, stop: 7 })).toEqual(["$.stop: must be a string or an array of strings"]);
    expect(errorsOf({ ...valid, stop: ["a", 1] })).toEqual(["$.stop[1]: must be a string"]);
    expect(errorsOf({ ...valid, stop: ["a", "b", "c", "d", "e"] })).toEqual(["$.stop: must hold at most 4 strings"]);
    expect(errorsOf({ ...valid, seed: 1.5 })).toEqual(["$.seed: must be an integer"]);
    expect(errorsOf({ ...valid, stream_options: true })).toEqual(["$.stream_options: must be an object"]);
    expect(errorsOf({ ...valid, stream_options: { include_usage: 1 } })).toEqual(["$.stream_options.include_usage: must be a boolean"]);
  });

  it("lists every fault at once", () => {
    const verdict = checkChatRequest({ model: 1, messages: [{ role: "user", content: null }], temperature: 9 });
    expect(verdict).toEqual({
      ok: false,
      status: 422,
      detail: "The chat completion request is invalid (3 problems)",
      errors: ["$.model: must be a non-empty string", "$.messages[0].content: is required", "$.temperature: must be a number from 0 to 2"],
    });
  });
});

describe("the current Chat Completions message shapes", () => {
  const toolLoop = {
    model: "llm",
    messages: [
      { role: "developer", content: "Be brief." },
      {
        role: "user",
        name: "ada",
        content: [
          { type: "text", text: "Weather in Paris?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
        ],
      },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: [{ type: "text", text: "18C" }] },
    ],
    tools: [{ type: "function", function: { name: "weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
    tool_choice: "auto",
    parallel_tool_calls: false,
    response_format: { type: "json_object" },
    logprobs: false,
  };

  it("accepts parts, null content with tool calls, tool results, and passes tools and options on", () => {
    const verdict = checkChatRequest(toolLoop);
    expect(verdict.ok).toBe(true);
    const r = (verdict as Extract<typeof verdict, { ok: true }>).request;
    expect(r.messages[1]).toEqual({ role: "user", name: "ada", content: toolLoop.messages[1]!.content });
    expect(r.messages[2]).toEqual({ role: "assistant", content: null, tool_calls: toolLoop.messages[2]!.tool_calls });
    expect(r.messages[3]).toEqual({ role: "tool", tool_call_id: "call_1", content: [{ type: "text", text: "18C" }] });
    expect(r).toMatchObject({ tools: toolLoop.tools, tool_choice: "auto", parallel_tool_calls: false, response_format: { type: "json_object" } });
    expect(textMessages(r.messages).map((m) => m.content)).toEqual(["Be brief.", "Weather in Paris?", 'weather({"city":"Paris"})', "18C"]);
  });

  it("names what is wrong in tool calls, tool messages, parts and tools", () => {
    expect(errorsOf({ model: "m", messages: [{ role: "tool", content: "x" }] })).toEqual([
      "$.messages[0].tool_call_id: is required on a tool message (a string)",
    ]);
    expect(errorsOf({ model: "m", messages: [{ role: "assistant", content: null }] })).toEqual(["$.messages[0].content: is required (or tool_calls)"]);
    expect(errorsOf({ model: "m", messages: [{ role: "user", content: "x", tool_calls: [] }] })).toEqual([
      "$.messages[0].tool_calls: only assistant messages call tools",
    ]);
    expect(errorsOf({ model: "m", messages: [{ role: "assistant", tool_calls: [{ id: "c", function: { name: "f", arguments: {} } }] }] })).toEqual([
      "$.messages[0].tool_calls[0].function.arguments: must be a string (JSON text)",
    ]);
    expect(errorsOf({ model: "m", messages: [{ role: "user", content: [{ type: "text" }, { type: "image_url" }, 3] }] })).toEqual([
      "$.messages[0].content[0].text: must be a string",
      "$.messages[0].content[1].image_url.url: must be a string",
      "$.messages[0].content[2]: must be an object with a type",
    ]);
    expect(errorsOf({ ...valid, tools: [{ type: "function", function: {} }] })).toEqual(["$.tools[0].function.name: must be a non-empty string"]);
    expect(errorsOf({ ...valid, tool_choice: "sometimes" })).toEqual([
      '$.tool_choice: must be "none", "auto", "required" or {type: "function", function: {name}}',
    ]);
    expect(errorsOf({ ...valid, logprobs: true })).toEqual(["$.logprobs: not supported by this endpoint (send false or leave it out)"]);
    expect(errorsOf({ ...valid, response_format: { type: "yaml" } })).toEqual(['$.response_format.type: must be "text", "json_object" or "json_schema"']);
  });
});
