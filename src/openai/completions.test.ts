import { describe, expect, it } from "vitest";
import { embeddings } from "svc";
import { checkEmbeddingsRequest, countTokens } from "svc/internal";
import { checkCompletionRequest, completionJobInput, textCompletionFrames, textCompletionFromOutput } from "./completions.js";
import { base64Vector, embeddingsFromOutput, notEmbeddingsOutput } from "./embeddings.js";

describe("completions", () => {
  it("checks a request and maps it onto textGeneration()'s prompt input", () => {
    const verdict = checkCompletionRequest({ model: "m", prompt: ["hi"], max_tokens: 5, stop: "x", stream: true, n: 1, logprobs: null, user: "u" });
    expect(verdict).toEqual({ ok: true, request: { model: "m", prompt: "hi", stream: true, echo: false, max_tokens: 5, stop: ["x"] } });
    if (!verdict.ok) return;
    expect(completionJobInput(verdict.request)).toEqual({ model: "m", prompt: "hi", max_tokens: 5, stop: ["x"] });
    expect(checkCompletionRequest([])).toMatchObject({ ok: false, status: 400 });
    expect(checkCompletionRequest({ model: "", prompt: [1, 2], temperature: 3, best_of: 2, suffix: "end", logprobs: 2 })).toMatchObject({
      ok: false,
      status: 422,
      errors: [
        "$.model: must be a non-empty string",
        "$.prompt: token arrays are not accepted; send the text",
        "$.temperature: must be a number from 0 to 2",
        "$.best_of: only 1 is supported",
        "$.logprobs: per-token probabilities are not supported",
        "$.suffix: insertion after a suffix is not supported",
      ],
    });
  });

  it("builds text_completion answers and events from chunk outputs", async () => {
    const request = { model: "m", prompt: "say", stream: true, echo: true, stream_options: { include_usage: true } };
    const outputs = [
      { text: ["a"], input_tokens: 2, output_tokens: 1 },
      { text: [" b"], input_tokens: 2, output_tokens: 2 },
      { text: [], input_tokens: 2, output_tokens: 2, finish_reason: "length" },
    ];
    expect(textCompletionFromOutput(outputs, request, { id: "cmpl-1", created: 7 })).toEqual({
      id: "cmpl-1",
      object: "text_completion",
      created: 7,
      model: "m",
      choices: [{ index: 0, text: "saya b", finish_reason: "length", logprobs: null }],
      usage: { prompt_tokens: 2, completion_tokens: 2, total_tokens: 4 },
    });
    async function* from(values: unknown[], fail?: string) {
      yield* values;
      if (fail) throw new Error(fail);
    }
    const frames: string[] = [];
    for await (const f of textCompletionFrames(from(outputs), request, { id: "cmpl-1", created: 7 })) frames.push(f);
    const data = frames.map((f) => f.replace(/^data: /, "").trim());
    expect(data.at(-1)).toBe("[DONE]");
    const parsed = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(parsed.map((p) => p.choices[0]?.text ?? null)).toEqual(["say", "a", " b", "", null]);
    expect(parsed[3].choices[0].finish_reason).toBe("length");
    expect(parsed[4].usage).toEqual({ prompt_tokens: 2, completion_tokens: 2, total_tokens: 4 });
    const failed: string[] = [];
    for await (const f of textCompletionFrames(from([outputs[0]], "boom"), { ...request, echo: false })) failed.push(f);
    expect(failed.at(-1)).toContain('"message":"The generation failed: boom"');
    expect(failed.join("")).not.toContain("[DONE]");
  });
});

describe("embeddings", () => {
  it("checks a request", () => {
    expect(checkEmbeddingsRequest({ model: "e", input: "x" })).toEqual({ ok: true, request: { model: "e", input: ["x"], encoding_format: "float" } });
    expect(checkEmbeddingsRequest({ model: "e", input: [[1, 2]], encoding_format: "hex", dimensions: 0 })).toMatchObject({
      ok: false,
      status: 422,
      errors: [
        "$.input: token arrays are not accepted; send the texts (this service's models tokenize themselves)",
        '$.encoding_format: must be "float" or "base64"',
        "$.dimensions: must be an integer >= 1",
      ],
    });
  });

  it("the SDK's embeddings() runs the model on the texts, shortens on request, and refuses a wrong count", async () => {
    const job = { openai: { route: "/v1/embeddings", input: { model: "e", input: ["ab", "c"], encoding_format: "float", dimensions: 2 } } };
    const out = await embeddings(job, (texts) => texts.map((t) => [t.length, 0, 9]));
    expect(out).toEqual({
      embeddings: [
        [1, 0],
        [1, 0],
      ],
      input_tokens: 2,
    });
    expect(await embeddings({ input: "plain" }, () => [[1, 2]])).toEqual({ embeddings: [[1, 2]], input_tokens: 1 });
    await expect(embeddings({ input: ["a", "b"] }, () => [[1]])).rejects.toThrow("returned 1 vectors for 2 texts");
    await expect(embeddings({ prompt: "a" }, () => [[1]])).rejects.toThrow("Invalid embeddings input: $.input");
  });

  it("answers in floats or base64 of float32, and names an output that is not embeddings", () => {
    const request = { model: "e", input: ["a b"], encoding_format: "base64" as const };
    const answer = embeddingsFromOutput({ embeddings: [[1.5, -2]], input_tokens: 3 }, request, countTokens);
    expect(answer).toEqual({
      object: "list",
      data: [{ object: "embedding", index: 0, embedding: base64Vector([1.5, -2]) }],
      model: "e",
      usage: { prompt_tokens: 3, total_tokens: 3 },
    });
    const bytes = Buffer.from(answer.data[0]!.embedding as string, "base64");
    expect([bytes.readFloatLE(0), bytes.readFloatLE(4)]).toEqual([1.5, -2]);
    expect(notEmbeddingsOutput({ text: ["x"] }, 1)).toBe(
      "expected {embeddings: number[][], input_tokens} (the SDK's embeddings()), got an object with keys text",
    );
    expect(notEmbeddingsOutput({ embeddings: [[1]] }, 2)).toBe("1 vectors for 2 texts");
    expect(notEmbeddingsOutput({ embeddings: [[Number.NaN]] }, 1)).toBe("vector 0 is not a non-empty array of finite numbers");
  });
});
