// One output style for every command. stdout is for results, stderr for progress. On a TTY (stderr), steps
// show a spinner and end with their time; otherwise each step is one plain line. Colour only on a TTY without
// NO_COLOR. Tables are aligned by one function. A warning already printed is not printed again.

import pc from "picocolors";
import type { LocalEndpoint } from "../deploy/access.js";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const CLEAR_LINE = "\r\x1b[K";

/** Consecutive steps driven by a library's `onProgress(label)`: each label ends the step before it. */
export interface Steps {
  onProgress(label: string): void;
  /** Extra text for the running step (a percentage): shown beside its spinner on a TTY, nothing otherwise. */
  detail(text: string): void;
  /** End the running step: done, or failed with `err`. */
  done(err?: unknown): void;
}

export interface Output {
  readonly json: boolean;
  readonly interactive: boolean;
  /** stderr is a terminal: spinners, rewritten lines. */
  readonly tty: boolean;
  /** Colour on stderr (a TTY without NO_COLOR). */
  readonly color: boolean;
  /** A progress line on stderr. */
  info(message: string): void;
  /** A warning on stderr, once per distinct message. */
  warn(message: string): void;
  /** Run `work` with a spinner and its time on a TTY, a plain line otherwise. */
  step<T>(label: string, work: () => Promise<T>): Promise<T>;
  /** Steps announced one after another (see Steps). */
  steps(): Steps;
  /** Print the command's result: JSON on stdout with --json, otherwise the human text. */
  result(value: unknown, human: () => string): void;
}

export function isInteractive(): boolean {
  return Boolean(process.stdin.isTTY && process.stderr.isTTY) && !process.env.CI;
}

/** A step's time as shown: `850 ms`, `1.2 s`, `2 min 5 s`. Pure. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

/**
 * Rows as aligned lines: every column but the last padded to its widest cell, two spaces between columns, no
 * trailing spaces. The one table layout of the CLI. Pure.
 */
export function alignRows(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ").trimEnd());
}

/** A table with an upper-case header row. Pure. */
export function alignTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return alignRows([header.map((h) => h.toUpperCase()), ...rows]).join("\n");
}

/**
 * The endpoints a local session serves (`svc dev`, `svc deploy --preview`): one aligned row each (name, kind, URL,
 * what it serves), followed by its curl. Pure.
 */
export function endpointTable(endpoints: readonly LocalEndpoint[]): string {
  const rows = endpoints.map((e) => [e.name, e.type === "lb" ? "load-balanced" : "queue", e.url, e.type === "lb" ? e.routes.join(", ") : e.functions.join(", ")]);
  const [head, ...lines] = alignRows([["ENDPOINT", "TYPE", "URL", "SERVES"], ...rows]);
  return [head!, ...lines.flatMap((line, i) => [line, `  ${endpoints[i]!.curl}`])].join("\n");
}

interface Spinner {
  setDetail(text: string): void;
  end(ok: boolean): void;
  /** Clear the spinner's line so another line can be written; it is drawn again on the next frame. */
  clear(): void;
}

export function createOutput(options: { json?: boolean } = {}): Output {
  const json = Boolean(options.json);
  const tty = Boolean(process.stderr.isTTY);
  const color = tty && !process.env.NO_COLOR;
  const paint = (style: (s: string) => string, text: string) => (color ? style(text) : text);
  const warned = new Set<string>();
  let active: Spinner | undefined;

  const write = (line: string) => {
    active?.clear();
    process.stderr.write(`${line}\n`);
  };

  const spin = (label: string): Spinner => {
    const started = performance.now();
    if (!tty) {
      process.stderr.write(`${label}...\n`);
      return { setDetail() {}, end() {}, clear() {} };
    }
    let frame = 0;
    let detail = "";
    const draw = () => process.stderr.write(`${CLEAR_LINE}${paint(pc.cyan, FRAMES[frame++ % FRAMES.length]!)} ${label}${detail ? ` ${paint(pc.dim, detail)}` : ""}`);
    draw();
    // Never what keeps the process alive: a command that ends (or fails) without ending its step still exits.
    const timer = setInterval(draw, 80).unref();
    const spinner: Spinner = {
      setDetail(text) {
        detail = text;
      },
      clear() {
        process.stderr.write(CLEAR_LINE);
      },
      end(ok) {
        clearInterval(timer);
        if (active === spinner) active = undefined;
        const took = paint(pc.dim, `(${formatDuration(performance.now() - started)})`);
        process.stderr.write(`${CLEAR_LINE}${ok ? `${paint(pc.green, "✔")} ${label} ${took}` : `${paint(pc.red, "✖")} ${label}`}\n`);
      },
    };
    active = spinner;
    return spinner;
  };

  return {
    json,
    interactive: isInteractive(),
    tty,
    color,
    info(message) {
      write(message);
    },
    warn(message) {
      if (warned.has(message)) return;
      warned.add(message);
      write(`${paint(pc.yellow, "warning")}: ${message}`);
    },
    async step(label, work) {
      const spinner = spin(label);
      try {
        const value = await work();
        spinner.end(true);
        return value;
      } catch (err) {
        spinner.end(false);
        throw err;
      }
    },
    steps() {
      let current: Spinner | undefined;
      return {
        onProgress(label) {
          current?.end(true);
          current = spin(label);
        },
        detail(text) {
          current?.setDetail(text);
        },
        done(err) {
          current?.end(err === undefined);
          current = undefined;
        },
      };
    },
    result(value, human) {
      if (json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
      else process.stdout.write(`${human()}\n`);
    },
  };
}
