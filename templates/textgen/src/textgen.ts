// A language-model endpoint that runs anywhere: a small Markov model trained, when the worker loads this
// module, from corpus.txt (bundled into the artifact as text). Swap `model` for any TextBackend, e.g. a client
// of a real inference server, and nothing else changes.
import { Endpoint, MarkovTextBackend, textGeneration, type TextGenerationInput } from "svc";
import corpus from "./corpus.txt";

const model = MarkovTextBackend.fromText(corpus);

/** What an input without a prompt or messages (the `{}` of a first curl) is answered with. */
const DEFAULT_PROMPT = "Tell me about the lighthouse.";

function withDefaultPrompt(input: TextGenerationInput): TextGenerationInput {
  if (typeof input !== "object" || input === null || "prompt" in input || "messages" in input || "openai" in input) return input;
  return { ...(input as object), prompt: DEFAULT_PROMPT };
}

// A plain async generator (the build finds it statically); textGeneration() reads OpenAI chat requests,
// {prompt} and {messages} inputs, counts tokens, honours max_tokens / stop, and yields stream chunks.
export const chat = Endpoint({ name: "textgen", gpu: "ANY", workers: [0, 1] })(
  async function* chat(input: TextGenerationInput, ctx?: { signal?: AbortSignal }) {
    yield* textGeneration(withDefaultPrompt(input), model, { signal: ctx?.signal });
  },
);
