// The `svc` entry point: parse the command line, run one command, and turn every error into a message and an
// exit code. This is the only place that decides exit codes; bin/svc.js calls process.exit with the result.

import { Command, CommanderError } from "commander";
import { colorWanted, styles as pc } from "./output.js";
import { ApiError, ExitCode, SvcError, UserError } from "../errors.js";
import { commands } from "./commands/index.js";
import { SVC_VERSION } from "../version.js";
import { selectProfile } from "../profiles.js";

export async function main(argv: string[]): Promise<number> {
  const debug = argv.includes("--debug") || process.env.SVC_DEBUG === "1";
  const program = new Command("svc")
    .description("Build, run and deploy serverless GPU/CPU endpoints written in TypeScript")
    .version(SVC_VERSION)
    .option("--debug", "print stack traces of internal errors")
    .option("--profile <name>", "the stored service target to use (svc login; default: SVC_PROFILE or the current one)")
    .exitOverride()
    .showSuggestionAfterError(true)
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  for (const register of commands) register(program);
  // The command that ran: a service validation error names the flag the user typed, not the JSON field it filled.
  let flags: ReadonlySet<string> = new Set();
  program.hook("preAction", (_program, action) => {
    flags = new Set(action.options.map((o) => o.long).filter((l): l is string => l !== undefined));
    selectProfile((action.optsWithGlobals() as { profile?: string }).profile);
  });
  try {
    await program.parseAsync(argv, { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : ExitCode.ok;
  } catch (err) {
    // `svc` alone shows the help as asked; a group without its subcommand (`svc volume`) is wrong usage.
    const bare = argv.every((a) => a === "--debug");
    return report(err, debug, bare, flags);
  }
}

/** Request fields whose flag is not their kebab-case name (the spec's REST names). */
const FIELD_FLAGS: Record<string, string> = {
  gpuTypeIds: "--gpu",
  executionTimeoutMs: "--execution-timeout",
  networkVolumeId: "--volume",
  computeType: "--compute",
  templateId: "--template",
  imageName: "--image",
  containerDiskInGb: "--disk",
};

/**
 * A service validation error (`$.workersMin: must be ...`) with the flag of the command that filled that field in
 * front: `--workers-min ($.workersMin): must be ...`. Unchanged when the command has no such flag. Pure.
 */
export function withFlagName(error: string, flags: ReadonlySet<string>): string {
  const m = /^\$\.([A-Za-z][A-Za-z0-9]*)([^:\s]*)/.exec(error);
  if (!m) return error;
  const field = m[1]!;
  const flag = FIELD_FLAGS[field] ?? `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
  return flags.has(flag) ? `${flag} (${m[0]})${error.slice(m[0].length)}` : error;
}

function report(err: unknown, debug: boolean, bare = false, flags: ReadonlySet<string> = new Set()): number {
  if (err instanceof CommanderError) {
    // Commander already printed its message (unknown option, missing argument, --help, --version).
    if (err.code === "commander.helpDisplayed" || err.code === "commander.version") return ExitCode.ok;
    // Help shown instead of running something (`svc volume`, `svc help nosuch`) is an error to commander
    // (exitCode 1); asked-for help (`svc help volume`) is not.
    if (err.code === "commander.help") return err.exitCode === 0 || bare ? ExitCode.ok : ExitCode.usage;
    return ExitCode.usage;
  }
  const color = colorWanted(process.env, Boolean(process.stderr.isTTY));
  const red = (s: string) => (color ? pc.red(s) : s);
  if (err instanceof ApiError) {
    process.stderr.write(`${red("error")}: the service answered ${err.status} ${err.problem.title}: ${err.problem.detail}\n`);
    for (const e of err.problem.errors ?? []) process.stderr.write(`  - ${withFlagName(e, flags)}\n`);
    const hint = apiErrorHint(err.status);
    if (hint) process.stderr.write(`${hint}\n`);
    if (debug && err.stack) process.stderr.write(`${err.stack}\n`);
    return err.exitCode;
  }
  if (err instanceof UserError) {
    process.stderr.write(`${red("error")}: ${err.message}\n`);
    for (const p of err.problems) process.stderr.write(`  - ${p}\n`);
    if (err.hint) process.stderr.write(`${err.hint}\n`);
    if (debug && err.stack) process.stderr.write(`${err.stack}\n`);
    return err.exitCode;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`${red("internal error")}: ${message}\n`);
  if (debug && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
  else process.stderr.write("This is a bug in svc. Run again with --debug for details and report it.\n");
  return err instanceof SvcError ? err.exitCode : ExitCode.internal;
}

/** What to do about the API errors a user can act on; the service's detail says what went wrong. */
export function apiErrorHint(status: number): string | undefined {
  switch (status) {
    case 401:
      return "Check SVC_API_KEY (in the environment or a .env file): the service does not accept it. `svc server` prints where its admin key is.";
    case 403:
      return "The key lacks the scope for this. Use a key that has it, or create one with `svc keys create --scope <scope>` (needs an admin key).";
    case 404:
      return "Check the name or id: list what exists with the command's `list` (for example `svc endpoint list`, `svc volume list`, `svc app list`).";
    default:
      return undefined;
  }
}
