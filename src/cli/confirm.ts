// Confirming destructive commands: ask on a TTY; without one (or with CI set) never ask, require --yes.

import { createInterface } from "node:readline/promises";
import { UsageError } from "../errors.js";
import type { Output } from "./output.js";

/** A yes/no question on stderr; only called when the output is interactive. */
export async function askOnTty(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/** Destructive commands: ask on a TTY, else require --yes (naming it). `what` completes "This ...". */
export async function confirmDestructive(out: Output, yes: boolean | undefined, what: string): Promise<void> {
  if (yes) return;
  if (!out.interactive) throw new UsageError(`This ${what}; nothing was changed`, "Pass --yes to confirm (svc never asks without a terminal or with CI set).");
  if (!(await askOnTty(`This ${what}. Continue?`))) throw new UsageError("Cancelled; nothing was changed");
}
