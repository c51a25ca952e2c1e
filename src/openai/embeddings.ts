// OpenAI's embeddings (`POST .../openai/v1/embeddings`) on svc's own endpoints: the job's output (what the SDK's
// embeddings() returns, `{embeddings: number[][], input_tokens}`) becomes OpenAI's list of embeddings, as floats
// or as base64 of little-endian float32 (what the `openai` clients ask for by default). Pure functions.

import type { EmbeddingsRequest } from "svc/internal";

export interface EmbeddingsAnswer {
  object: "list";
  data: Array<{ object: "embedding"; index: number; embedding: number[] | string }>;
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** Why a job's output is not an embeddings reply for `count` texts; undefined when it is one. */
export function notEmbeddingsOutput(output: unknown, count: number): string | undefined {
  if (!isObject(output) || !Array.isArray(output.embeddings))
    return `expected {embeddings: number[][], input_tokens} (the SDK's embeddings()), got ${isObject(output) ? `an object with keys ${Object.keys(output).slice(0, 5).join(", ") || "none"}` : Array.isArray(output) ? "an array" : output === null ? "null" : typeof output}`;
  if (output.embeddings.length !== count) return `${output.embeddings.length} vectors for ${count} texts`;
  const bad = output.embeddings.findIndex((v) => !Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === "number" && Number.isFinite(x)));
  if (bad >= 0) return `vector ${bad} is not a non-empty array of finite numbers`;
  return undefined;
}

/** A vector as base64 of its little-endian float32 numbers. */
export function base64Vector(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((x, i) => bytes.writeFloatLE(x, i * 4));
  return bytes.toString("base64");
}

/** The answer from an output that notEmbeddingsOutput accepted. */
export function embeddingsFromOutput(
  output: { embeddings: number[][]; input_tokens?: unknown },
  request: EmbeddingsRequest,
  countTokens: (text: string) => number,
): EmbeddingsAnswer {
  const tokens =
    typeof output.input_tokens === "number" && Number.isInteger(output.input_tokens)
      ? output.input_tokens
      : request.input.reduce((sum, t) => sum + countTokens(t), 0);
  return {
    object: "list",
    data: output.embeddings.map((v, index) => ({ object: "embedding", index, embedding: request.encoding_format === "base64" ? base64Vector(v) : v })),
    model: request.model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}
