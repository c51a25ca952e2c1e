// Stop strings over streamed text. A stop string can arrive split across pieces ("Q" + ":"), so text that
// could be the start of one is held back until the next piece decides.

export class StopScanner {
  private held = "";
  private readonly stops: string[];

  constructor(stops: readonly string[]) {
    this.stops = stops.filter((s) => s.length > 0);
  }

  /** The text safe to emit now; `stopped` once a stop string appeared (the text ends right before it). */
  push(piece: string): { text: string; stopped: boolean } {
    const buffer = this.held + piece;
    let first = -1;
    for (const stop of this.stops) {
      const at = buffer.indexOf(stop);
      if (at >= 0 && (first < 0 || at < first)) first = at;
    }
    if (first >= 0) {
      this.held = "";
      return { text: buffer.slice(0, first), stopped: true };
    }
    const keep = this.longestPartialStop(buffer);
    this.held = buffer.slice(buffer.length - keep);
    return { text: buffer.slice(0, buffer.length - keep), stopped: false };
  }

  /** The text held back, once no more pieces come: it was no stop string after all. */
  flush(): string {
    const rest = this.held;
    this.held = "";
    return rest;
  }

  /** Length of the longest end of `text` that is the beginning of a stop string. */
  private longestPartialStop(text: string): number {
    let longest = 0;
    for (const stop of this.stops) {
      for (let length = Math.min(stop.length - 1, text.length); length > longest; length--) {
        if (text.endsWith(stop.slice(0, length))) {
          longest = length;
          break;
        }
      }
    }
    return longest;
  }
}
