import { Endpoint } from "svc";

// A class endpoint: one instance per worker (load a model once), each public method is a function.
@Endpoint({ name: "words", workers: [0, 1] })
export class Words {
  private readonly seen = new Map<string, number>();

  async count(input: { text: string }) {
    const words = input.text.split(/\s+/).filter(Boolean);
    for (const w of words) this.seen.set(w, (this.seen.get(w) ?? 0) + 1);
    return { words: words.length, distinctSoFar: this.seen.size };
  }
}
