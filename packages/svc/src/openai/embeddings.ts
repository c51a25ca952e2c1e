// An OpenAI embeddings request, checked, and the job it becomes: the service writes it (src/openai/embeddings.ts
// in svc-cli), embeddings() reads it on the worker. Part of the SDK because both sides of the protocol must agree.

export const EMBEDDINGS_ROUTE = "/v1/embeddings";

/** The most texts one request may embed (OpenAI's own bound). */
export const MAX_EMBEDDING_INPUTS = 2048;

export interface EmbeddingsRequest {
  model: string;
  /** The texts, in order (a single string arrives as one text). */
  input: string[];
  /** The answer's encoding: the vectors as numbers, or each as base64 of little-endian float32. */
  encoding_format: "float" | "base64";
  /** Vectors are cut to this many numbers (and scaled back to length 1), when set. */
  dimensions?: number;
}

export interface EmbeddingsJobInput {
  openai: { route: typeof EMBEDDINGS_ROUTE; input: EmbeddingsRequest };
}

export type EmbeddingsVerdict = { ok: true; request: EmbeddingsRequest } | { ok: false; status: 400 | 422; detail: string; errors: string[] };

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);
const present = (body: Record<string, unknown>, key: string) => body[key] !== undefined && body[key] !== null;

/** Check a parsed body: 400 when it is not a JSON object, 422 listing every fault, else the request. Pure. */
export function checkEmbeddingsRequest(body: unknown): EmbeddingsVerdict {
  if (!isObject(body)) return { ok: false, status: 400, detail: "The request body must be a JSON object", errors: [] };
  const errors: string[] = [];
  if (typeof body.model !== "string" || body.model === "") errors.push("$.model: must be a non-empty string");
  const input = body.input;
  if (typeof input === "string") {
    if (input === "") errors.push("$.input: must not be empty");
  } else if (Array.isArray(input)) {
    if (input.length === 0) errors.push("$.input: must hold at least one string");
    else if (input.length > MAX_EMBEDDING_INPUTS) errors.push(`$.input: must hold at most ${MAX_EMBEDDING_INPUTS} strings`);
    else if (input.some((t) => typeof t === "number" || Array.isArray(t)))
      errors.push("$.input: token arrays are not accepted; send the texts (this service's models tokenize themselves)");
    else input.forEach((t, i) => typeof t !== "string" && errors.push(`$.input[${i}]: must be a string`));
  } else errors.push("$.input: must be a string or an array of strings");
  if (present(body, "encoding_format") && body.encoding_format !== "float" && body.encoding_format !== "base64")
    errors.push('$.encoding_format: must be "float" or "base64"');
  if (present(body, "dimensions") && !(Number.isInteger(body.dimensions) && (body.dimensions as number) >= 1))
    errors.push("$.dimensions: must be an integer >= 1");
  if (errors.length > 0)
    return { ok: false, status: 422, detail: `The embeddings request is invalid (${errors.length} problem${errors.length > 1 ? "s" : ""})`, errors };
  return {
    ok: true,
    request: {
      model: body.model as string,
      input: typeof input === "string" ? [input] : (input as string[]),
      encoding_format: body.encoding_format === "base64" ? "base64" : "float",
      ...(present(body, "dimensions") ? { dimensions: body.dimensions as number } : {}),
    },
  };
}

export function embeddingsJobInput(request: EmbeddingsRequest): EmbeddingsJobInput {
  return { openai: { route: EMBEDDINGS_ROUTE, input: request } };
}

export function isEmbeddingsJobInput(value: unknown): value is EmbeddingsJobInput {
  const openai = (value as { openai?: { route?: unknown; input?: unknown } } | null)?.openai;
  return isObject(openai) && openai.route === EMBEDDINGS_ROUTE && isObject(openai.input);
}
