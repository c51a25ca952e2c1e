// Shell completion scripts for svc, generated from the command tree itself so they cannot drift from it: command
// and subcommand names, and each command's flags. Pure: the tree in, a script out.

export interface CommandNode {
  name: string;
  options: string[];
  commands: CommandNode[];
}

export type Shell = "bash" | "zsh" | "fish";
export const SHELLS: readonly Shell[] = ["bash", "zsh", "fish"];

/** Every command path ("volume create") with the words that may follow it. */
function paths(node: CommandNode, prefix: string[] = []): Array<{ path: string[]; words: string[]; options: string[] }> {
  const here = { path: prefix, words: node.commands.map((c) => c.name), options: node.options };
  return [here, ...node.commands.flatMap((c) => paths(c, [...prefix, c.name]))];
}

function bashScript(root: CommandNode): string {
  const all = paths(root);
  const known = all.filter((p) => p.path.length > 0).map((p) => `/${p.path.join("/")}`);
  const cases = all.map((p) => `    "${p.path.length ? `/${p.path.join("/")}` : ""}") words="${[...p.words, ...p.options].join(" ")}" ;;`).join("\n");
  return `# svc completion for bash: eval "$(svc completion bash)" (or save it under ~/.local/share/bash-completion/completions/svc)
_svc_completion() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" w i words=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$path/$w" in
      ${known.join("|")}) path="$path/$w" ;;
    esac
  done
  case "$path" in
${cases}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _svc_completion svc
`;
}

function zshScript(root: CommandNode): string {
  // zsh runs the bash function through its bashcompinit layer: one definition of the tree for both shells.
  return `# svc completion for zsh: eval "$(svc completion zsh)"
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
${bashScript(root).split("\n").slice(1).join("\n")}`;
}

function fishScript(root: CommandNode): string {
  const lines = ["# svc completion for fish: svc completion fish > ~/.config/fish/completions/svc.fish", "complete -c svc -f"];
  const top = root.commands.map((c) => c.name);
  lines.push(`complete -c svc -n "__fish_use_subcommand" -a "${top.join(" ")}"`);
  for (const p of paths(root)) {
    if (p.path.length === 0) continue;
    const seen = p.path.map((w) => `__fish_seen_subcommand_from ${w}`).join("; and ");
    if (p.words.length > 0) lines.push(`complete -c svc -n "${seen}" -a "${p.words.join(" ")}"`);
    for (const option of p.options.filter((o) => o.startsWith("--"))) lines.push(`complete -c svc -n "${seen}" -l ${option.slice(2)}`);
  }
  return `${lines.join("\n")}\n`;
}

export function completionScript(shell: Shell, root: CommandNode): string {
  return shell === "bash" ? bashScript(root) : shell === "zsh" ? zshScript(root) : fishScript(root);
}
