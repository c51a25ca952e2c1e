// A running job's progress on stderr (`svc run`): on a terminal one line rewritten in place as the value changes,
// cleared before the job's own output is written; elsewhere (a log, a pipe) one line per change.

export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** The line shown for a progress value: text as it is, anything else as compact JSON; cut to `width`. Pure. */
export function progressText(value: unknown, width?: number): string {
  const shown = typeof value === "string" ? value : JSON.stringify(value);
  const line = `progress: ${shown.replace(/\s*\n\s*/g, " ")}`;
  if (width === undefined || width < 8 || line.length < width) return line;
  return `${line.slice(0, width - 2)}…`;
}

export class ProgressLine {
  private last: string | undefined;
  private drawn = false;

  constructor(private readonly stream: ProgressStream) {}

  /** The job reported `value`: shown when it changed (or the line was cleared meanwhile). */
  show(value: unknown): void {
    const json = JSON.stringify(value);
    if (json === this.last && (this.drawn || !this.stream.isTTY)) return;
    this.last = json;
    if (!this.stream.isTTY) {
      this.stream.write(`${progressText(value)}\n`);
      return;
    }
    this.stream.write(`\r\x1b[K${progressText(value, this.stream.columns)}`);
    this.drawn = true;
  }

  /** Take the line off the terminal (before other output); the next show draws it again. */
  clear(): void {
    if (!this.drawn) return;
    this.stream.write("\r\x1b[K");
    this.drawn = false;
  }
}
