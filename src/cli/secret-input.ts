// Reading a secret (an API key, a secret's value): from a hidden prompt on a terminal, from standard input
// otherwise; never from an argument, which would land in the shell's history and in `ps`.

import { UsageError } from "../errors.js";
import { isInteractive } from "./output.js";

/** Read stdin to its end; the one trailing newline a `echo` or a heredoc adds is not part of the secret. */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}

/** Ask on the terminal without echoing what is typed (Ctrl-C cancels). */
function askHidden(question: string): Promise<string> {
  const input = process.stdin;
  return new Promise((resolve, reject) => {
    let value = "";
    // Echo off before the question shows: what is typed after it must never reach the screen.
    input.setRawMode(true);
    process.stderr.write(question);
    input.resume();
    const done = (err?: Error) => {
      input.setRawMode(false);
      input.pause();
      input.off("data", onData);
      process.stderr.write("\n");
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (data: Buffer) => {
      for (const ch of data.toString("utf8")) {
        if (ch === "\r" || ch === "\n" || ch === "\u0004") return done();
        if (ch === "\u0003") return done(new UsageError("Cancelled; nothing was changed"));
        if (ch === "\u007f" || ch === "\b") value = value.slice(0, -1);
        else value += ch;
      }
    };
    input.on("data", onData);
  });
}

/**
 * A secret for `what` ("the API key"): hidden prompt on a TTY, standard input when it is not a terminal. With a
 * terminal but CI set (no one to type), a usage error that says how to pass it.
 */
export async function readSecret(what: string, question: string): Promise<string> {
  let value: string;
  if (!process.stdin.isTTY) value = await readStdin();
  else if (isInteractive()) value = await askHidden(question);
  else throw new UsageError(`No ${what} given`, `Pipe it on standard input, e.g. \`printf %s "$TOKEN" | svc ...\` (svc never prompts with CI set).`);
  if (value === "") throw new UsageError(`The ${what} is empty; nothing was changed`);
  return value;
}
