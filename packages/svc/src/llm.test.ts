import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { chatJobInput } from "./openai/job-input.js";
import { Endpoint, getMeta } from "./endpoint.js";
import {
  chunkMetrics,
  DEFAULT_MAX_TOKENS,
  MarkovTextBackend,
  parseTextGenerationInput,
  renderChatPrompt,
  countTokens,
  textGeneration,
  toolCall,
  TextGenerationInputError,
  type TextGenerationOutput,
  type TextGenerationRequest,
} from "./llm.js";

async function collect(iterable: AsyncIterable<TextGenerationOutput>): Promise<TextGenerationOutput[]> {
  const all: TextGenerationOutput[] = [];
  for await (const chunk of iterable) all.push(chunk);
  return all;
}
const textOf = (chunks: TextGenerationOutput[]) => chunks.flatMap((c) => c.text).join("");
const words = (list: string[]) =>
  async function* (_req: TextGenerationRequest) {
    yield* list;
  };

describe("textGeneration", () => {
  it("yields one chunk per piece, then a last one with the finish_reason", async () => {
    const chunks = await collect(textGeneration({ prompt: "Say hi" }, words(["Hello", ",", " world"])));
    const inputTokens = countTokens("Say hi");
    expect(JSON.parse(JSON.stringify(chunks))).toEqual([
      { text: ["Hello"], input_tokens: inputTokens, output_tokens: 1 },
      { text: [","], input_tokens: inputTokens, output_tokens: 2 },
      { text: [" world"], input_tokens: inputTokens, output_tokens: 3 },
      { text: [], input_tokens: inputTokens, output_tokens: 3, finish_reason: "stop" },
    ]);
  });

  it("attaches the spec's metrics to every chunk, out of the JSON", async () => {
    const chunks = await collect(textGeneration({ messages: [{ role: "user", content: "Hi" }] }, words(["a", " b"])));
    const metrics = chunks.map((c) => chunkMetrics(c)!);
    expect(Object.keys(metrics[0]!).sort()).toEqual([
      "avg_gen_throughput",
      "avg_prompt_throughput",
      "cpu_kv_cache_usage",
      "gpu_kv_cache_usage",
      "input_tokens",
      "output_tokens",
      "pending",
      "running",
      "scenario",
      "stream_index",
      "swapped",
    ]);
    expect(metrics.map((m) => m.stream_index)).toEqual([0, 1, 2]);
    expect(metrics.map((m) => m.output_tokens)).toEqual([1, 2, 2]);
    expect(metrics[0]).toMatchObject({
      scenario: "messages",
      input_tokens: countTokens(renderChatPrompt([{ role: "user", content: "Hi" }])),
      running: 1,
      pending: 0,
      swapped: 0,
      gpu_kv_cache_usage: 0,
    });
    expect(metrics[0]!.avg_prompt_throughput).toBeGreaterThan(0);
    expect(JSON.stringify(chunks[0])).not.toContain("stream_index");
  });

  it("reports backend stats and load from concurrent requests", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const slowStart = async function* () {
      await gate;
      yield "late";
    };
    const first = textGeneration({ prompt: "one" }, { generate: words(["x", " y", " z"]), stats: () => ({ gpu_kv_cache_usage: 0.25, swapped: 2 }) } as never);
    const firstChunk = await first.next();
    const second = textGeneration({ prompt: "two" }, slowStart);
    const secondNext = second.next(); // now waiting for its first piece
    const nextOfFirst = await first.next();
    expect(chunkMetrics(firstChunk.value)).toMatchObject({ running: 1, gpu_kv_cache_usage: 0.25, swapped: 2 });
    expect(chunkMetrics(nextOfFirst.value)).toMatchObject({ running: 1, pending: 1 });
    open();
    expect(chunkMetrics((await secondNext).value)).toMatchObject({ running: 2, pending: 0 });
    await collect(first);
    await collect(second);
  });

  it("stops at max_tokens, cutting the piece that passes it, and stops the generator", async () => {
    let finished = false;
    const endless = async function* () {
      try {
        for (;;) yield " one two";
      } finally {
        finished = true;
      }
    };
    const chunks = await collect(textGeneration({ prompt: "count", max_tokens: 5 }, endless));
    expect(textOf(chunks)).toBe(" one two one two one");
    expect(chunks.at(-1)).toMatchObject({ text: [], output_tokens: 5, finish_reason: "length" });
    expect(finished).toBe(true);
  });

  it("stops at a stop string split across pieces, leaving it out", async () => {
    const chunks = await collect(textGeneration({ prompt: "q", stop: ["\nUser:"] }, words(["Answer", ".", "\n", "User", ":", " more"])));
    expect(textOf(chunks)).toBe("Answer.");
    expect(chunks.at(-1)).toMatchObject({ finish_reason: "stop", output_tokens: 2 });
  });

  it("releases text held for a possible stop string when the generator ends", async () => {
    const chunks = await collect(textGeneration({ prompt: "q", stop: "ENDING" }, words(["fine", " END"])));
    expect(textOf(chunks)).toBe("fine END");
    expect(chunks.at(-1)!.finish_reason).toBe("stop");
  });

  it("reads a chat request job from the OpenAI route", async () => {
    let seen: TextGenerationRequest | undefined;
    const messages = [
      { role: "system" as const, content: "Be brief." },
      { role: "user" as const, content: "Hi" },
    ];
    const input = chatJobInput({ model: "textgen", messages, stream: true, max_tokens: 7, temperature: 0.5, top_p: 0.9, seed: 3, stop: ["."] });
    const chunks = await collect(
      textGeneration(input, async function* (req) {
        seen = req;
        yield "ok";
      }),
    );
    expect(seen).toMatchObject({
      messages,
      prompt: renderChatPrompt(messages),
      max_tokens: 7,
      temperature: 0.5,
      top_p: 0.9,
      seed: 3,
      stop: ["."],
      model: "textgen",
      scenario: "openai-chat",
    });
    expect(chunks[0]!.input_tokens).toBe(countTokens(renderChatPrompt(messages)));
    expect(chunkMetrics(chunks[0])!.scenario).toBe("openai-chat");
  });

  it("uses a TextBackend, passing the sampling parameters (same seed, same text)", async () => {
    const corpus = readFileSync(new URL("../../../templates/textgen/src/corpus.txt", import.meta.url), "utf8");
    const model = MarkovTextBackend.fromText(corpus);
    const input = { messages: [{ role: "user", content: "Tell me about the harbour" }], seed: 77, max_tokens: 40 };
    const a = textOf(await collect(textGeneration(input, model)));
    const b = textOf(await collect(textGeneration(input, model)));
    expect(a).toBe(b);
    expect(countTokens(a)).toBeLessThanOrEqual(40);
    expect(a.length).toBeGreaterThan(10);
  });

  it("stops generating when the job's signal aborts", async () => {
    const controller = new AbortController();
    const seen: string[] = [];
    for await (const chunk of textGeneration({ prompt: "p" }, words(["a", " b", " c", " d"]), { signal: controller.signal })) {
      seen.push(...chunk.text);
      controller.abort();
    }
    expect(seen).toEqual(["a"]);
  });

  it("refuses a generator that yields something other than strings", async () => {
    await expect(
      collect(
        textGeneration({ prompt: "p" }, async function* () {
          yield 5;
        } as never),
      ),
    ).rejects.toThrow(/must yield strings or toolCall\(...\) pieces, not number/);
  });
});

describe("parseTextGenerationInput", () => {
  it("defaults max_tokens and stop", () => {
    expect(parseTextGenerationInput({ prompt: "hi" })).toEqual({
      messages: [{ role: "user", content: "hi" }],
      prompt: "hi",
      max_tokens: DEFAULT_MAX_TOKENS,
      stop: [],
      model: undefined,
      scenario: "prompt",
    });
  });

  it("names every fault of a bad input", () => {
    const fault = (input: unknown) => {
      try {
        parseTextGenerationInput(input);
      } catch (err) {
        expect(err).toBeInstanceOf(TextGenerationInputError);
        return (err as TextGenerationInputError).problems;
      }
      throw new Error("expected a fault");
    };
    expect(fault("text")).toEqual(["$: must be an object with prompt or messages"]);
    expect(fault({})).toEqual(["$: needs prompt (a string) or messages (an array of {role, content})"]);
    expect(fault({ prompt: 3, temperature: 5 })).toEqual(["$.prompt: must be a string", "$.temperature: must be a number from 0 to 2"]);
    expect(fault({ messages: [{ role: "user", content: 1 }] })).toEqual(["$.messages[0].content: must be a string or an array of content parts"]);
    expect(fault({ openai: { route: "/v1/chat/completions", input: { model: "m", messages: [] } } })).toEqual(["$.messages: must hold at least one message"]);
  });
});

describe("a language-model endpoint", () => {
  it("is a plain async generator function the build and the runtime see as streaming", async () => {
    const chat = Endpoint({ name: "llm", gpu: "ANY" })(async function* chat(input: unknown, ctx?: { signal?: AbortSignal }) {
      yield* textGeneration(input, words(["Hi", " there"]), ctx);
    });
    const meta = getMeta(chat);
    expect(meta?.kind).toBe("generator");
    const chunks: TextGenerationOutput[] = [];
    for await (const c of (meta as { fn: (i: unknown) => AsyncIterable<TextGenerationOutput> }).fn({ prompt: "x" })) chunks.push(c);
    expect(textOf(chunks)).toBe("Hi there");
  });
});

describe("tool calls from a text generator", () => {
  it("passes tools to the generator and turns toolCall() pieces into tool_calls chunks ending with finish_reason tool_calls", async () => {
    const input = {
      openai: {
        route: "/v1/chat/completions",
        input: {
          model: "m",
          stream: false,
          messages: [{ role: "user", content: [{ type: "text", text: "Weather in Paris?" }] }],
          tools: [{ type: "function", function: { name: "weather" } }],
        },
      },
    };
    let seen: unknown;
    const chunks = await collect(
      textGeneration(input, async function* (request) {
        seen = { tools: request.tools, text: request.messages[0]!.content, chat: request.chat };
        yield toolCall("weather", { city: "Paris" }, "call_1");
      }),
    );
    expect(seen).toEqual({ tools: [{ type: "function", function: { name: "weather" } }], text: "Weather in Paris?", chat: input.openai.input.messages });
    expect(chunks[0]).toMatchObject({ text: [], tool_calls: [{ index: 0, id: "call_1", name: "weather", arguments: '{"city":"Paris"}' }] });
    expect(chunks.at(-1)).toMatchObject({ text: [], finish_reason: "tool_calls" });
  });
});
