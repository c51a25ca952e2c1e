// A tiny language model that runs anywhere: a token-level Markov chain trained when it is created, from a
// text corpus shipped with the project (templates/textgen/src/corpus.txt). It continues text the way the
// corpus does, picks a sentence about a word of the user's last message when it can, and honours
// temperature, top_p and seed. It stands in for a real model behind the TextBackend interface.

import type { ChatMessage, GenerationParams, TextBackend } from "./backend.js";
import { sampleIndex, seededRandom } from "./sampling.js";
import { tokenize } from "./tokens.js";

export interface MarkovOptions {
  /** Tokens of context the next token depends on (falls back to fewer when a context is unseen). Default 2. */
  order?: number;
  /** Sentences in a reply when nothing stops it earlier. Default 3. */
  sentences?: number;
  /** Tokens in a reply when the request sets no max_tokens. Default 256. */
  maxTokens?: number;
  /** Pause between tokens, to imitate a slower model in demos. Default 0 (yield to the event loop only). */
  tokenDelayMs?: number;
}

interface Successors {
  tokens: string[];
  counts: number[];
}

const SENTENCE_END = /^\s*[.!?]$/;
const CONTEXT_SEPARATOR = "\u0000";
// Words too common to say what a message is about.
const COMMON_WORDS = new Set(
  "about after again also because been before being could does doing from have having here into just like more most much only other over please said same should some such tell than that their them then there these they this those through very want what when where which while will with would write your".split(
    " ",
  ),
);

/** The words of a text that say what it is about, crudely singular ("bridges" -> "bridge"). */
function wordsOf(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}']+/gu) ?? [])
    .filter((w) => w.length >= 4 && !COMMON_WORDS.has(w))
    .map((w) => (w.length > 4 && w.endsWith("s") && !w.endsWith("ss") ? w.slice(0, -1) : w));
}

export class MarkovTextBackend implements TextBackend {
  private readonly order: number;
  private readonly sentences: number;
  private readonly maxTokens: number;
  private readonly tokenDelayMs: number;
  /** transitions[k - 1]: successors of every context of k tokens. */
  private readonly transitions: Array<Map<string, Successors>> = [];
  private readonly sentenceStarts: number[] = [];
  /** Sentences (indices into sentenceStarts) each word occurs in. */
  private readonly sentencesWith = new Map<string, number[]>();
  private readonly tokens: string[];

  private constructor(corpus: string, options: MarkovOptions) {
    this.order = Math.max(1, Math.trunc(options.order ?? 2));
    this.sentences = Math.max(1, Math.trunc(options.sentences ?? 3));
    this.maxTokens = Math.max(1, Math.trunc(options.maxTokens ?? 256));
    this.tokenDelayMs = Math.max(0, options.tokenDelayMs ?? 0);
    // One space between words: paragraphs and line breaks of the corpus are not something to imitate.
    this.tokens = tokenize(corpus.replace(/\s+/g, " ").trim());
    if (this.tokens.length < this.order + 2) throw new RangeError("MarkovTextBackend: the corpus is too short to learn from");
    for (let k = 1; k <= this.order; k++) this.transitions.push(new Map());

    let sentence = -1;
    for (let i = 0; i < this.tokens.length; i++) {
      if (i === 0 || SENTENCE_END.test(this.tokens[i - 1]!)) {
        this.sentenceStarts.push(i);
        sentence++;
      }
      for (const word of wordsOf(this.tokens[i]!)) {
        const list = this.sentencesWith.get(word) ?? [];
        if (list[list.length - 1] !== sentence) list.push(sentence);
        this.sentencesWith.set(word, list);
      }
      if (i + 1 >= this.tokens.length) break;
      for (let k = 1; k <= this.order && i - k + 1 >= 0; k++) {
        const key = this.tokens.slice(i - k + 1, i + 1).join(CONTEXT_SEPARATOR);
        const table = this.transitions[k - 1]!;
        const successors = table.get(key) ?? { tokens: [], counts: [] };
        const next = this.tokens[i + 1]!;
        const at = successors.tokens.indexOf(next);
        if (at >= 0) successors.counts[at]!++;
        else {
          successors.tokens.push(next);
          successors.counts.push(1);
        }
        table.set(key, successors);
      }
    }
  }

  /** Train a model on `corpus` (plain prose; a few tens of KB is plenty). */
  static fromText(corpus: string, options: MarkovOptions = {}): MarkovTextBackend {
    return new MarkovTextBackend(corpus, options);
  }

  get vocabularySize(): number {
    return this.transitions[0]!.size;
  }

  async *generate(messages: readonly ChatMessage[], params: GenerationParams = {}): AsyncGenerator<string> {
    const temperature = params.temperature ?? 1;
    const sampling = { temperature, top_p: params.top_p ?? 1 };
    const random = seededRandom(params.seed ?? Math.floor(Math.random() * 2 ** 32));
    const limit = Math.min(params.max_tokens ?? this.maxTokens, this.maxTokens * 8);

    let position = this.pickSentenceStart(messages, temperature, random);
    // The reply opens with the first tokens of a corpus sentence, so the chain has its full context.
    const context: string[] = [];
    let sentencesDone = 0;
    for (let produced = 0; produced < limit; produced++) {
      if (params.signal?.aborted) return;
      let token: string | undefined;
      if (produced === 0 || (produced < this.order && !SENTENCE_END.test(this.tokens[position + produced - 1]!))) {
        token = this.tokens[position + produced];
      }
      token ??= this.next(context, sampling, random);
      if (token === undefined) {
        // Past the corpus's very last token: carry on with another sentence.
        position = this.sentenceStarts[Math.floor(random() * this.sentenceStarts.length)]!;
        context.length = 0;
        token = this.tokens[position]!;
      }
      context.push(token);
      if (context.length > this.order) context.shift();
      yield produced === 0 ? token.trimStart() : token;
      if (SENTENCE_END.test(token) && ++sentencesDone >= this.sentences) return;
      await pause(this.tokenDelayMs);
    }
  }

  /** The next token after `context`, backing off to shorter contexts the corpus has seen. */
  private next(context: readonly string[], sampling: { temperature: number; top_p: number }, random: () => number): string | undefined {
    for (let k = Math.min(this.order, context.length); k >= 1; k--) {
      const successors = this.transitions[k - 1]!.get(context.slice(context.length - k).join(CONTEXT_SEPARATOR));
      if (successors) return successors.tokens[sampleIndex(successors.counts, sampling, random)];
    }
    return undefined;
  }

  /** Begin with a corpus sentence sharing the most words with the last user message, if any does. */
  private pickSentenceStart(messages: readonly ChatMessage[], temperature: number, random: () => number): number {
    const lastUser = [...messages].reverse().find((m) => m.role === "user") ?? messages[messages.length - 1];
    const shared = new Map<number, number>();
    for (const word of new Set(wordsOf(lastUser?.content ?? ""))) {
      for (const sentence of this.sentencesWith.get(word) ?? []) shared.set(sentence, (shared.get(sentence) ?? 0) + 1);
    }
    const most = Math.max(0, ...shared.values());
    const best = [...shared]
      .filter(([, n]) => n === most)
      .map(([sentence]) => sentence)
      .sort((a, b) => a - b);
    const pool = best.length > 0 ? best : this.sentenceStarts.map((_, i) => i);
    const sentence = temperature <= 0 ? pool[0]! : pool[Math.floor(random() * pool.length)]!;
    return this.sentenceStarts[sentence]!;
  }
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => (ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve)));
}
