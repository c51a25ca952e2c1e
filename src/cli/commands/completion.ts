// `svc completion bash|zsh|fish`: the completion script for a shell, on stdout.

import type { Command } from "commander";
import { UsageError } from "../../errors.js";
import { completionScript, SHELLS, type CommandNode, type Shell } from "../completion.js";
import { completionNames, NAME_KINDS, type NameKind } from "../completion-names.js";
import { serviceTarget } from "../target.js";

/** What a command's first argument names, by the command's path: the argument's name says it, or this table. */
const ARGUMENT_NAMES: Record<string, NameKind> = { "app get": "app", "app delete": "app", "env get": "env", "env delete": "env" };

function tree(cmd: Command, path: string[] = []): CommandNode {
  const first = cmd.registeredArguments[0]?.name();
  const names = ARGUMENT_NAMES[path.join(" ")] ?? (first === "endpoint" ? "endpoint" : undefined);
  return {
    name: cmd.name(),
    options: [...cmd.options.map((o) => o.long).filter((l): l is string => l !== undefined), "--help"],
    commands: cmd.commands.filter((c) => c.name() !== "help" && !c.name().startsWith("__")).map((c) => tree(c, [...path, c.name()])),
    ...(names ? { names } : {}),
  };
}

export function register(program: Command): void {
  program
    .command("completion")
    .description('Print the shell completion script (bash, zsh or fish): eval "$(svc completion bash)"')
    .argument("<shell>", SHELLS.join(" | "))
    .action((shell: string) => {
      if (!SHELLS.includes(shell as Shell)) throw new UsageError(`No completion for "${shell}"`, `Pick one of: ${SHELLS.join(", ")}.`);
      process.stdout.write(completionScript(shell as Shell, tree(program)));
    });
  // What the completion scripts call for names of the context; one a line, nothing when none can be had.
  program
    .command("__complete", { hidden: true })
    .argument("<kind>", NAME_KINDS.join(" | "))
    .option("--app <name>")
    .option("--env <name>")
    .action(async (kind: string, o: { app?: string; env?: string }) => {
      if (!NAME_KINDS.includes(kind as NameKind)) return;
      const names = await completionNames(kind as NameKind, serviceTarget({ ...o, quiet: true }));
      if (names.length > 0) process.stdout.write(`${names.join("\n")}\n`);
    });
}
