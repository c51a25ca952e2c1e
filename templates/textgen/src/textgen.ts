// A language-model endpoint that runs anywhere: a small Markov model. Its "weights" are the prose it is trained
// from, and a class endpoint loads them once per worker, in its constructor, not per job: from the network volume
// "models" (textgen/corpus.txt, put there with `svc volume cp`) when the file is there, else the corpus bundled
// into the artifact (src/corpus.txt, as text). Swap the model for any TextBackend, e.g. a client of a real
// inference server, and nothing else changes.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Endpoint, MarkovTextBackend, textGeneration, type TextGenerationInput } from "svc";
import bundled from "./corpus.txt";

/** Where the corpus goes on the volume. */
export const CORPUS_PATH = "textgen/corpus.txt";

/** What an input without a prompt or messages (the `{}` of a first curl) is answered with. */
const DEFAULT_PROMPT = "Tell me about the lighthouse.";

function withDefaultPrompt(input: TextGenerationInput): TextGenerationInput {
  if (typeof input !== "object" || input === null || "prompt" in input || "messages" in input || "openai" in input) return input;
  return { ...(input as object), prompt: DEFAULT_PROMPT };
}

function loadCorpus(): string {
  const volume = process.env.SVC_VOLUME_PATH;
  const file = volume ? join(volume, CORPUS_PATH) : undefined;
  if (file && existsSync(file)) {
    console.log(`textgen: training on ${CORPUS_PATH} from the volume`);
    return readFileSync(file, "utf8");
  }
  console.warn(
    `textgen: no corpus at ${file ?? `${CORPUS_PATH} (this worker has no volume)`}; training on the bundled src/corpus.txt. ` +
      `Upload one with: npx svc volume cp src/corpus.txt models:${CORPUS_PATH}`,
  );
  return bundled;
}

@Endpoint({ name: "textgen", gpu: "ANY", workers: [0, 1], volume: "models" })
export class TextGen {
  private readonly model = MarkovTextBackend.fromText(loadCorpus());

  // An async generator: textGeneration() reads OpenAI chat requests, {prompt} and {messages} inputs, counts
  // tokens, honours max_tokens / stop, and yields stream chunks.
  async *chat(input: TextGenerationInput, ctx?: { signal?: AbortSignal }) {
    yield* textGeneration(withDefaultPrompt(input), this.model, { signal: ctx?.signal });
  }
}
