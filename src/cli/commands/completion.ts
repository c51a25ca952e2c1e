// `svc completion bash|zsh|fish`: the completion script for a shell, on stdout.

import type { Command } from "commander";
import { UsageError } from "../../errors.js";
import { completionScript, SHELLS, type CommandNode, type Shell } from "../completion.js";

function tree(cmd: Command): CommandNode {
  return {
    name: cmd.name(),
    options: [...cmd.options.map((o) => o.long).filter((l): l is string => l !== undefined), "--help"],
    commands: cmd.commands.filter((c) => c.name() !== "help").map(tree),
  };
}

export function register(program: Command): void {
  program
    .command("completion")
    .description("Print the shell completion script (bash, zsh or fish): eval \"$(svc completion bash)\"")
    .argument("<shell>", SHELLS.join(" | "))
    .action((shell: string) => {
      if (!SHELLS.includes(shell as Shell)) throw new UsageError(`No completion for "${shell}"`, `Pick one of: ${SHELLS.join(", ")}.`);
      process.stdout.write(completionScript(shell as Shell, tree(program)));
    });
}
