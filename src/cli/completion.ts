// Shell completion scripts for svc, generated from the command tree itself so they cannot drift from it: command
// and subcommand names, and each command's flags. Names that depend on the context (endpoints, apps,
// environments) the script asks of svc itself when the cursor is on them: `svc __complete <kind>` (after
// --app and --env, and for a command's first argument when it names one). Pure: the tree in, a script out.

import type { NameKind } from "./completion-names.js";

export interface CommandNode {
  name: string;
  options: string[];
  commands: CommandNode[];
  /** What the command's first argument names, when the service knows such names. */
  names?: NameKind;
}

export type Shell = "bash" | "zsh" | "fish";
export const SHELLS: readonly Shell[] = ["bash", "zsh", "fish"];

/** Every command path ("volume create") with the words that may follow it. */
function paths(node: CommandNode, prefix: string[] = []): Array<{ path: string[]; words: string[]; options: string[]; names?: NameKind }> {
  const here = { path: prefix, words: node.commands.map((c) => c.name), options: node.options, names: node.names };
  return [here, ...node.commands.flatMap((c) => paths(c, [...prefix, c.name]))];
}

function bashScript(root: CommandNode): string {
  const all = paths(root);
  const known = all.filter((p) => p.path.length > 0).map((p) => `/${p.path.join("/")}`);
  const cases = all.map((p) => `    "${p.path.length ? `/${p.path.join("/")}` : ""}") words="${[...p.words, ...p.options].join(" ")}" ;;`).join("\n");
  const named = all.filter((p) => p.names !== undefined);
  const nameCases = named.map((p) => `      "/${p.path.join("/")}") kind=${p.names} ;;`).join("\n");
  return `# svc completion for bash: eval "$(svc completion bash)" (or save it under ~/.local/share/bash-completion/completions/svc)
_svc_completion() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" path="" w i words="" last=0 kind="" scope=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$path/$w" in
      ${known.join("|")}) path="$path/$w"; last=$i ;;
    esac
    case "$w" in
      --app|--env) scope="$scope $w \${COMP_WORDS[i+1]}" ;;
    esac
  done
  # Names the service knows: after --app or --env, or as the first argument of a command that takes one.
  case "$prev" in
    --app) kind=app ;;
    --env) kind=env ;;
    *)
      if [[ $last -eq $((COMP_CWORD - 1)) && "$cur" != -* ]]; then
        case "$path" in
${nameCases}
        esac
      fi ;;
  esac
  if [[ -n "$kind" ]]; then
    COMPREPLY=($(compgen -W "$("\${COMP_WORDS[0]}" __complete "$kind" $scope 2>/dev/null)" -- "$cur"))
    [[ "$prev" == --app || "$prev" == --env ]] && return
  fi
  case "$path" in
${cases}
  esac
  COMPREPLY+=($(compgen -W "$words" -- "$cur"))
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
    if (p.names) lines.push(`complete -c svc -n "${seen}" -a "(svc __complete ${p.names} 2>/dev/null)"`);
    for (const option of p.options.filter((o) => o.startsWith("--"))) {
      const value = option === "--app" ? ' -xa "(svc __complete app 2>/dev/null)"' : option === "--env" ? ' -xa "(svc __complete env 2>/dev/null)"' : "";
      lines.push(`complete -c svc -n "${seen}" -l ${option.slice(2)}${value}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

export function completionScript(shell: Shell, root: CommandNode): string {
  return shell === "bash" ? bashScript(root) : shell === "zsh" ? zshScript(root) : fishScript(root);
}
