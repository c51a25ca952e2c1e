// The token counting every part of the language-model support agrees on (usage, max_tokens, metrics).
//
// A deliberately simple, documented tokenizer (docs/llm.md), not a model's real vocabulary: a token is a run
// of letters, digits, "_" and "'" (a word), or one other non-space character (punctuation, a symbol), either
// with the whitespace before it attached; trailing whitespace at the very end is one token of its own.
// Joining the tokens gives back the text exactly, so streamed pieces and counts always agree.

import type { ChatMessage } from "./backend.js";

const TOKEN = /\s*[\p{L}\p{N}_']+|\s*[^\s\p{L}\p{N}_']|\s+/gu;

export function tokenize(text: string): string[] {
  return text.match(TOKEN) ?? [];
}

export function countTokens(text: string): number {
  return tokenize(text).length;
}

/**
 * The text a chat is rendered to before counting its tokens (and what a completion-style backend sees):
 * one `<|role|>` line per message, then `<|assistant|>` to say who speaks next.
 */
export function renderChatPrompt(messages: readonly ChatMessage[]): string {
  return messages.map((m) => `<|${m.role}|>\n${m.content}\n`).join("") + "<|assistant|>\n";
}

/**
 * Counts the tokens of a text that arrives in pieces without re-reading all of it: only the last token can
 * still grow (" Hel" + "lo"), so that one is kept and re-tokenized with the next piece.
 */
export class TokenCounter {
  private settled = 0;
  private last = "";

  get count(): number {
    return this.settled + (this.last ? 1 : 0);
  }

  /** Tokens fixed for good (all but the last one, which may still grow). */
  get settledCount(): number {
    return this.settled;
  }

  /** The last token so far: the only one the next piece can still change. */
  get tail(): string {
    return this.last;
  }

  push(piece: string): number {
    const tokens = tokenize(this.last + piece);
    if (tokens.length > 0) {
      this.settled += tokens.length - 1;
      this.last = tokens[tokens.length - 1]!;
    }
    return this.count;
  }
}

/**
 * Lets text through until it holds `max` tokens. A piece that would pass the limit is cut at a token
 * boundary, so the text let through never has more than `max` tokens.
 */
export class TokenLimiter {
  private readonly counter = new TokenCounter();
  constructor(readonly max: number) {}

  get count(): number {
    return this.counter.count;
  }

  get reached(): boolean {
    return this.counter.count >= this.max;
  }

  /** The part of `piece` that fits. */
  push(piece: string): string {
    if (this.reached) return "";
    const tail = this.counter.tail;
    const tokens = tokenize(tail + piece);
    if (this.counter.settledCount + tokens.length <= this.max) {
      this.counter.push(piece);
      return piece;
    }
    // tokens[0] begins with the tail already let through; keep tokens up to the limit, minus that tail.
    const allowed = this.max - this.counter.settledCount;
    const kept = tokens.slice(0, allowed).join("").slice(tail.length);
    this.counter.push(kept);
    return kept;
  }
}
