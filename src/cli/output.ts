// One output style for every command. stdout is for results, stderr for progress. On a TTY (stderr), steps
// show a spinner (ora: it erases every row a label wrapped onto, on a narrow terminal too) and end with their
// time; otherwise each step is one plain line. Colour on a TTY, or as
// FORCE_COLOR and NO_COLOR say. Tables are aligned by one function. A warning already printed is not printed again.

import type { Ora } from "ora";
import pc from "picocolors";
import type { LocalEndpoint } from "../deploy/access.js";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

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
  /** Colour on stderr (colorWanted: FORCE_COLOR, NO_COLOR, else a TTY). */
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

/**
 * Whether text written to a stream is coloured. FORCE_COLOR forces it on, even without a terminal (CI logs that
 * render colour), or off when "0" or "false"; it wins over NO_COLOR, as in Node and chalk. NO_COLOR (any
 * non-empty value) turns it off. Otherwise: on a terminal only. Pure.
 */
export function colorWanted(env: NodeJS.ProcessEnv, isTTY: boolean): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined) return force !== "0" && force.toLowerCase() !== "false";
  if (env.NO_COLOR) return false;
  return isTTY;
}

/**
 * picocolors' styles that always apply: whether to use them is colorWanted's decision (picocolors' own
 * detection looks at stdout and the platform, not at the stream a line goes to).
 */
export const styles = pc.createColors(true);

export function isInteractive(): boolean {
  return Boolean(process.stdin.isTTY && process.stderr.isTTY) && !process.env.CI;
}

/** Bytes as a person reads them: `0 B`, `512 B`, `1.5 KB`, `12.3 MB`, `4.2 GB` (powers of 1000). Pure. */
export function formatBytes(n: number): string {
  if (n < 999.5) return `${Math.round(n)} B`;
  const units = ["KB", "MB", "GB", "TB", "PB"];
  let value = n;
  let unit = -1;
  while (value >= 999.5 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${value >= 100 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
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
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd(),
  );
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
  const rows = endpoints.map((e) => [
    e.name,
    e.type === "lb" ? "load-balanced" : "queue",
    e.url,
    e.type === "lb" ? e.routes.join(", ") : e.functions.join(", "),
  ]);
  const [head, ...lines] = alignRows([["ENDPOINT", "TYPE", "URL", "SERVES"], ...rows]);
  return [head!, ...lines.flatMap((line, i) => [line, `  ${endpoints[i]!.curl}`])].join("\n");
}

// ora is loaded only where spinners are drawn (a TTY): `main` loads it before the command runs, since a step
// that blocks the event loop (discovery compiles TypeScript) would otherwise end before a background load did. A
// step that still ends first prints its end line as ora would (docs/design/0019-cli-loads-on-use.md).
let ora: typeof import("ora").default | undefined;
let oraLoading: Promise<void> | undefined;

/** Load the spinner (once); without it each step still prints its end line. */
export function loadSpinner(): Promise<void> {
  oraLoading ??= import("ora").then(
    (m) => void (ora = m.default),
    () => undefined /* no spinner then: each step still prints its end line */,
  );
  return oraLoading;
}

interface Spinner {
  setDetail(text: string): void;
  end(ok: boolean): void;
}

export function createOutput(options: { json?: boolean } = {}): Output {
  const json = Boolean(options.json);
  const tty = Boolean(process.stderr.isTTY);
  const color = colorWanted(process.env, tty);
  const c = pc.createColors(color);
  const warned = new Set<string>();
  // Frames painted here, not by ora (whose colours follow its own detection): colour is this module's decision.
  const frames = { interval: 80, frames: FRAMES.map((f) => c.cyan(f)) };

  // While a spinner runs, ora takes every write to stderr and stdout: it erases the spinner (all the rows a long
  // label wrapped onto), lets the line through, and draws the spinner again below it.
  const write = (line: string) => {
    process.stderr.write(`${line}\n`);
  };

  const spin = (label: string): Spinner => {
    const started = performance.now();
    if (!tty) {
      process.stderr.write(`${label}...\n`);
      return { setDetail() {}, end() {} };
    }
    // Its timer may keep the process alive: every command ends its steps, and bin/svc.js exits when main returns.
    // stdin is left alone (a step may wait for a confirmation typed there).
    // A terminal that reports no width (a pty nobody sized: `script` without a terminal of its own) is taken as 80
    // wide, as a terminal is by default: ora divides by the width to count the rows it erases.
    if (!process.stderr.columns) process.stderr.columns = 80;
    let spinner: Ora | undefined;
    let text = label;
    let ended = false;
    const begin = () => {
      if (ended || !ora) return;
      spinner = ora({ text, stream: process.stderr, spinner: frames, color: false, discardStdin: false, isEnabled: true }).start();
    };
    if (ora) begin();
    else void loadSpinner().then(begin);
    return {
      setDetail(detail) {
        text = detail ? `${label} ${c.dim(detail)}` : label;
        if (spinner) spinner.text = text;
      },
      end(ok) {
        ended = true;
        const took = c.dim(`(${formatDuration(performance.now() - started)})`);
        const last = ok ? { symbol: c.green("✔"), text: `${label} ${took}` } : { symbol: c.red("✖"), text: label };
        if (spinner) spinner.stopAndPersist(last);
        else write(`${last.symbol} ${last.text}`);
      },
    };
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
      write(`${c.yellow("warning")}: ${message}`);
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
