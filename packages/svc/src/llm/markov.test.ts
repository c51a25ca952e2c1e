import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { MarkovTextBackend } from "./markov.js";
import { countTokens } from "./tokens.js";

const corpus = readFileSync(new URL("../../../../templates/textgen/src/corpus.txt", import.meta.url), "utf8");
const model = MarkovTextBackend.fromText(corpus);
const ask = (content: string) => [{ role: "user" as const, content }];

async function collect(iterable: AsyncIterable<string>): Promise<string> {
  let text = "";
  for await (const piece of iterable) text += piece;
  return text;
}

describe("MarkovTextBackend", () => {
  it("learns a vocabulary from the shipped corpus", () => {
    expect(corpus.length).toBeGreaterThan(15_000);
    expect(model.vocabularySize).toBeGreaterThan(800);
  });

  it("writes the same reply for the same seed", async () => {
    const params = { seed: 1234, temperature: 1, max_tokens: 80 };
    const first = await collect(model.generate(ask("Tell me about the lighthouse"), params));
    const second = await collect(model.generate(ask("Tell me about the lighthouse"), params));
    expect(first.length).toBeGreaterThan(20);
    expect(second).toBe(first);
  });

  it("writes different replies without a seed", async () => {
    const replies = new Set<string>();
    for (let i = 0; i < 5; i++) replies.add(await collect(model.generate(ask("Tell me about the sea"), { max_tokens: 60 })));
    expect(replies.size).toBeGreaterThan(1);
  });

  it("differs between seeds, and is deterministic at temperature 0 without one", async () => {
    const a = await collect(model.generate(ask("bread"), { seed: 1, max_tokens: 60 }));
    const b = await collect(model.generate(ask("bread"), { seed: 2, max_tokens: 60 }));
    expect(a).not.toBe(b);
    const greedy1 = await collect(model.generate(ask("bread"), { temperature: 0, max_tokens: 40 }));
    const greedy2 = await collect(model.generate(ask("bread"), { temperature: 0, max_tokens: 40 }));
    expect(greedy1).toBe(greedy2);
  });

  it("starts from a sentence about a word of the last user message", async () => {
    const reply = await collect(model.generate(ask("Tell me about bridges"), { seed: 5, temperature: 0.2, max_tokens: 30 }));
    expect(reply.toLowerCase()).toContain("bridge");
    expect(reply).toMatch(/^\S/);
  });

  it("stays within max_tokens and ends after a few sentences otherwise", async () => {
    const short = await collect(model.generate(ask("the river"), { seed: 9, max_tokens: 7 }));
    expect(countTokens(short)).toBeLessThanOrEqual(7);
    const natural = await collect(MarkovTextBackend.fromText(corpus, { sentences: 2 }).generate(ask("the river"), { seed: 9 }));
    expect(natural.match(/[.!?]/g)?.length).toBe(2);
    expect(natural).toMatch(/[.!?]$/);
  });

  it("stops when its signal aborts", async () => {
    const controller = new AbortController();
    let pieces = 0;
    for await (const _ of model.generate(ask("stars"), { max_tokens: 500, signal: controller.signal })) {
      if (++pieces === 3) controller.abort();
    }
    expect(pieces).toBe(3);
  });

  it("refuses a corpus too short to learn from", () => {
    expect(() => MarkovTextBackend.fromText("Hi.")).toThrow(/too short/);
  });
});
