// stdout is for results, stderr for progress. Spinners only on a TTY; colour only on a TTY without NO_COLOR.

import pc from "picocolors";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export interface Output {
  readonly json: boolean;
  readonly interactive: boolean;
  /** A progress line on stderr (suppressed with --json unless verbose). */
  info(message: string): void;
  warn(message: string): void;
  /** Run `work` with a spinner on a TTY, a plain line otherwise. */
  step<T>(label: string, work: () => Promise<T>): Promise<T>;
  /** Print the command's result: JSON on stdout with --json, otherwise the human text. */
  result(value: unknown, human: () => string): void;
}

export function isInteractive(): boolean {
  return Boolean(process.stdin.isTTY && process.stderr.isTTY) && !process.env.CI;
}

export function createOutput(options: { json?: boolean } = {}): Output {
  const json = Boolean(options.json);
  const tty = Boolean(process.stderr.isTTY);
  return {
    json,
    interactive: isInteractive(),
    info(message) {
      process.stderr.write(`${message}\n`);
    },
    warn(message) {
      process.stderr.write(`${tty ? pc.yellow("warning") : "warning"}: ${message}\n`);
    },
    async step(label, work) {
      if (!tty) {
        process.stderr.write(`${label}...\n`);
        return work();
      }
      let frame = 0;
      const started = Date.now();
      const timer = setInterval(() => {
        process.stderr.write(`\r${pc.cyan(FRAMES[frame++ % FRAMES.length]!)} ${label}`);
      }, 80);
      try {
        const value = await work();
        process.stderr.write(`\r${pc.green("✔")} ${label} ${pc.dim(`(${Date.now() - started} ms)`)}\n`);
        return value;
      } catch (err) {
        process.stderr.write(`\r${pc.red("✖")} ${label}\n`);
        throw err;
      } finally {
        clearInterval(timer);
      }
    },
    result(value, human) {
      if (json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
      else process.stdout.write(`${human()}\n`);
    },
  };
}
