// Writing an embeddings endpoint. The endpoint stays a plain async function (the build discovers it statically)
// and hands its input to embeddings(), which reads the job the service's /openai/v1/embeddings route makes (or
// a plain {input}), runs the model on the texts and returns {embeddings, input_tokens}:
//
//   export const embed = Endpoint({ name: "embedder", cpu: "cpu3c-1-2" })(async function embed(input: EmbeddingsInput) {
//     return embeddings(input, (texts) => texts.map(vectorOf));
//   });
//
// docs/llm.md, "Embeddings", documents the input and output.

import { UserError } from "./errors.js";
import { countTokens } from "./llm/tokens.js";
import { checkEmbeddingsRequest, isEmbeddingsJobInput, type EmbeddingsJobInput, type EmbeddingsRequest } from "./openai/embeddings.js";

export type { EmbeddingsJobInput, EmbeddingsRequest } from "./openai/embeddings.js";

/** What an embeddings endpoint accepts: the route's job, or `{input: string | string[], dimensions?}`. */
export type EmbeddingsInput = EmbeddingsJobInput | { input: string | string[]; dimensions?: number; model?: string };

/** The model: the texts in, one vector per text out, in order. */
export type EmbeddingModel = (texts: string[], request: EmbeddingsRequest & { signal?: AbortSignal }) => Promise<number[][]> | number[][];

/** What embeddings() returns: the job's output, which the service turns into OpenAI's answer. */
export interface EmbeddingsOutput {
  embeddings: number[][];
  input_tokens: number;
}

export class EmbeddingsInputError extends UserError {
  constructor(problems: string[]) {
    super(`Invalid embeddings input: ${problems.join("; ")}`, {
      problems,
      hint: "Send {input: string | string[]} or an OpenAI embeddings request through the /openai/v1/embeddings route.",
    });
  }
}

/** Cut to `dimensions` numbers and scale back to length 1, as OpenAI's shortened embeddings are. */
function shorten(vector: number[], dimensions: number): number[] {
  const cut = vector.slice(0, dimensions);
  const norm = Math.hypot(...cut);
  return norm > 0 ? cut.map((x) => x / norm) : cut;
}

/**
 * Run an embedding model for a job: check the input, embed its texts, and return one vector per text with the
 * texts' token count (svc's tokenizer). A model that returns another number of vectors, or numbers that are not
 * finite, fails the job.
 */
export async function embeddings(input: unknown, model: EmbeddingModel, options: { signal?: AbortSignal } = {}): Promise<EmbeddingsOutput> {
  const body = isEmbeddingsJobInput(input) ? input.openai.input : input;
  const verdict = checkEmbeddingsRequest(typeof body === "object" && body !== null && !("model" in body) ? { model: "default", ...body } : body);
  if (!verdict.ok) throw new EmbeddingsInputError(verdict.errors.length > 0 ? verdict.errors : [verdict.detail]);
  const request = verdict.request;
  const vectors = await model(request.input, { ...request, signal: options.signal });
  if (!Array.isArray(vectors) || vectors.length !== request.input.length)
    throw new Error(`The embedding model returned ${Array.isArray(vectors) ? vectors.length : "no"} vectors for ${request.input.length} texts`);
  vectors.forEach((v, i) => {
    if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === "number" && Number.isFinite(x)))
      throw new Error(`The embedding model's vector ${i} is not a non-empty array of finite numbers`);
  });
  return {
    embeddings: request.dimensions ? vectors.map((v) => shorten(v, request.dimensions!)) : vectors,
    input_tokens: request.input.reduce((sum, text) => sum + countTokens(text), 0),
  };
}
