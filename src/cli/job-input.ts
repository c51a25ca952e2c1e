// The input of `svc run`: JSON text, `@file` (a JSON file) or `-` (JSON on standard input); none is `{}`.

import { readFile } from "node:fs/promises";
import { UsageError, errorMessage } from "../errors.js";

export async function readJobInput(arg: string | undefined, readStdin: () => Promise<string>): Promise<unknown> {
  if (arg === undefined) return {};
  let text: string;
  let from: string;
  if (arg === "-") {
    text = await readStdin();
    from = "standard input";
  } else if (arg.startsWith("@")) {
    const file = arg.slice(1);
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      throw new UsageError(`Cannot read the input file ${file}: ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`);
    }
    from = file;
  } else {
    text = arg;
    from = "the input argument";
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(
      `The input in ${from} is not JSON: ${errorMessage(err)}`,
      `Quote it for the shell: svc run <endpoint> '{"prompt": "hi"}', or pass @input.json or - (stdin).`,
    );
  }
}

export async function readAllStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
