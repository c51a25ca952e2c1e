import { describe, expect, it } from "vitest";
import { chatCompletionFrames, SSE_DONE } from "./sse.js";

const request = { model: "textgen", messages: [{ role: "user" as const, content: "Hi" }] };
const identity = { id: "chatcmpl-1", created: 1700000000 };

async function* from(values: unknown[], failAfter?: number) {
  let i = 0;
  for (const value of values) {
    if (failAfter !== undefined && i++ === failAfter) throw new Error("worker crashed");
    yield value;
  }
  if (failAfter !== undefined && failAfter >= values.length) throw new Error("worker crashed");
}

async function frames(iterable: AsyncIterable<string>): Promise<string[]> {
  const all: string[] = [];
  for await (const frame of iterable) all.push(frame);
  return all;
}

const chunk = (delta: object, finish_reason: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1700000000, model: "textgen", choices: [{ index: 0, delta, finish_reason, logprobs: null }] })}\n\n`;

describe("chatCompletionFrames", () => {
  it("sends the role first, then content deltas, then finish_reason, then [DONE]", async () => {
    const outputs = [
      { text: ["Hello"], input_tokens: 4, output_tokens: 1 },
      { text: [], input_tokens: 4, output_tokens: 1 },
      { text: [" world"], input_tokens: 4, output_tokens: 2 },
      { text: [], input_tokens: 4, output_tokens: 2, finish_reason: "length" },
    ];
    expect(await frames(chatCompletionFrames(from(outputs), request, identity))).toEqual([
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hello" }),
      chunk({ content: " world" }),
      chunk({}, "length"),
      "data: [DONE]\n\n",
    ]);
  });

  it("adds a usage chunk before [DONE] when stream_options.include_usage is set", async () => {
    const all = await frames(chatCompletionFrames(from(["a", " b"]), { ...request, stream_options: { include_usage: true } }, identity));
    expect(all.at(-1)).toBe(SSE_DONE);
    expect(all.at(-3)).toBe(chunk({}, "stop"));
    expect(JSON.parse(all.at(-2)!.slice("data: ".length))).toEqual({
      id: "chatcmpl-1",
      object: "chat.completion.chunk",
      created: 1700000000,
      model: "textgen",
      choices: [],
      usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 },
    });
  });

  it("ends with an error frame and no [DONE] when the job fails mid-stream", async () => {
    const all = await frames(chatCompletionFrames(from(["partial", "more"], 1), request, identity));
    expect(all).toEqual([
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "partial" }),
      `data: ${JSON.stringify({ error: { type: "server_error", param: null, code: null, message: "The generation failed: worker crashed" } })}\n\n`,
    ]);
  });

  it("produces frames as the outputs arrive", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    async function* slow() {
      yield "first";
      await gate;
      yield "second";
    }
    const iterator = chatCompletionFrames(slow(), request, identity);
    expect((await iterator.next()).value).toBe(chunk({ role: "assistant", content: "" }));
    expect((await iterator.next()).value).toBe(chunk({ content: "first" }));
    release();
    expect((await iterator.next()).value).toBe(chunk({ content: "second" }));
  });
});

describe("streamed tool calls and non-chat outputs", () => {
  async function frames(outputs: unknown[]): Promise<unknown[]> {
    const out: unknown[] = [];
    async function* source() {
      yield* outputs;
    }
    for await (const f of chatCompletionFrames(source(), { model: "m", messages: [{ role: "user", content: "x" }] }, { id: "chatcmpl-j1", created: 1 })) {
      out.push(f === "data: [DONE]\n\n" ? "[DONE]" : JSON.parse(f.slice(6)));
    }
    return out;
  }

  it("streams tool calls as OpenAI does: id, type and name first, then argument fragments, then finish_reason tool_calls", async () => {
    const got = (await frames([
      { tool_calls: [{ index: 0, id: "call_x", name: "weather", arguments: '{"city":' }] },
      { tool_calls: [{ index: 0, arguments: '"Paris"}' }] },
    ])) as any[];
    expect(got[1].choices[0].delta).toEqual({
      tool_calls: [{ index: 0, id: "call_x", type: "function", function: { name: "weather", arguments: '{"city":' } }],
    });
    expect(got[2].choices[0].delta).toEqual({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] });
    expect(got[3].choices[0].finish_reason).toBe("tool_calls");
    expect(got[4]).toBe("[DONE]");
  });

  it("ends with an error frame, not an empty success, when the output is not a chat reply", async () => {
    const got = (await frames([{ greeting: "hello" }])) as any[];
    expect(got).toHaveLength(2);
    expect(got[1].error).toMatchObject({ type: "invalid_response_error", message: expect.stringContaining("The endpoint's output is not a chat reply") });
  });
});
