// The `svc` entry point: parse the command line, run one command, and turn every error into a message and an
// exit code. This is the only place that decides exit codes; bin/svc.js calls process.exit with the result.

import { Command, CommanderError } from "commander";
import { colorWanted, loadSpinner, styles as pc } from "./output.js";
import { ApiError, ExitCode, SvcError, UserError } from "../errors.js";
import { loadCommands, namedCommand } from "./commands/index.js";
import { addExamples } from "./examples.js";
import { SVC_VERSION } from "../version.js";
import { selectProfile } from "../profiles.js";
import { announceTargets } from "./target.js";

/**
 * The command tree, nothing parsed or run: every command registered, or only the module of the command `argv`
 * runs (commands/index.ts namedCommand), so that a command loads what it uses and nothing of the others.
 */
export async function buildProgram(argv?: readonly string[]): Promise<Command> {
  // `svc --version` alone needs no command at all.
  const versionOnly = argv !== undefined && argv.length > 0 && argv.every((a) => a === "--version" || a === "-V" || a === "--debug");
  const groups = await loadCommands(versionOnly ? "" : argv === undefined ? undefined : namedCommand(argv));
  const program = new Command("svc")
    .description("Build, run and deploy serverless GPU/CPU endpoints written in TypeScript")
    .version(SVC_VERSION)
    .option("--debug", "print stack traces of internal errors")
    .option("--profile <name>", "the stored service target to use (svc login; default: SVC_PROFILE or the current one)")
    .exitOverride()
    .showSuggestionAfterError(true)
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  for (const group of groups) {
    program.commandsGroup(group.heading);
    for (const register of group.commands) register(program);
  }
  // `svc help` last, under a heading of its own rather than in the last group.
  program.commandsGroup("Help:").helpCommand(true);
  addExamples(program);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const debug = argv.includes("--debug") || process.env.SVC_DEBUG === "1";
  // Words after `--` are the command's own (a job's input), never svc's flags.
  const own = argv.includes("--") ? argv.slice(0, argv.indexOf("--")) : argv;
  const json = own.includes("--json");
  announceTargets(!json);
  const program = await buildProgram(argv);
  // Spinners are drawn on a terminal only: their module loads there alone.
  if (process.stderr.isTTY && !json) await loadSpinner();
  // Under --json, a usage error commander finds is reported as JSON too: keep its message instead of printing it.
  let commanderMessage: string | undefined;
  if (json) {
    const keep = { outputError: (message: string) => void (commanderMessage = message) };
    const quiet = (cmd: Command): void => {
      cmd.configureOutput({ ...cmd.configureOutput(), ...keep });
      cmd.commands.forEach(quiet);
    };
    quiet(program);
  }
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
    return report(err, debug, json, bare, flags, commanderMessage);
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
  shmSizeMb: "--shm",
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

/**
 * An error as the CLI reports it, the same whether printed for a person or as JSON (`--json`): what went wrong,
 * the listed faults, what to do, the service's status for an API error, and the exit code.
 */
export interface ErrorReport {
  message: string;
  problems?: string[];
  hint?: string;
  /** The HTTP status of the service's answer (API errors only). */
  status?: number;
  exitCode: number;
  /** A bug in svc, not something the user did. */
  internal?: boolean;
  stack?: string;
}

/** What `err` reports; undefined for an error commander already printed that ends with success (help, version). Pure. */
export function errorReport(err: unknown, flags: ReadonlySet<string> = new Set(), bare = false, commanderMessage?: string): ErrorReport | undefined {
  if (err instanceof CommanderError) {
    if (err.code === "commander.helpDisplayed" || err.code === "commander.version") return undefined;
    // Help shown instead of running something (`svc volume`, `svc help nosuch`) is an error to commander
    // (exitCode 1); asked-for help (`svc help volume`) is not.
    if (err.code === "commander.help") return err.exitCode === 0 || bare ? undefined : { message: "a subcommand is missing", exitCode: ExitCode.usage };
    return { message: (commanderMessage ?? err.message).replace(/^error: /, "").trim(), exitCode: ExitCode.usage };
  }
  const stack = err instanceof Error ? err.stack : undefined;
  if (err instanceof ApiError) {
    const problems = (err.problem.errors ?? []).map((e) => withFlagName(e, flags));
    return {
      message: `the service answered ${err.status} ${err.problem.title}: ${err.problem.detail}`,
      ...(problems.length > 0 ? { problems } : {}),
      ...(apiErrorHint(err.status) ? { hint: apiErrorHint(err.status) } : {}),
      status: err.status,
      exitCode: err.exitCode,
      stack,
    };
  }
  if (err instanceof UserError) {
    return {
      message: err.message,
      ...(err.problems.length > 0 ? { problems: [...err.problems] } : {}),
      ...(err.hint ? { hint: err.hint } : {}),
      exitCode: err.exitCode,
      stack,
    };
  }
  return {
    message: err instanceof Error ? err.message : String(err),
    hint: "This is a bug in svc. Run again with --debug for details and report it.",
    exitCode: err instanceof SvcError ? err.exitCode : ExitCode.internal,
    internal: true,
    stack,
  };
}

/** The report as `--json` prints it on stderr: one line, `{"error": {...}}`; the stack only under --debug. Pure. */
export function errorJson(report: ErrorReport, debug: boolean): string {
  const { stack, ...rest } = report;
  return `${JSON.stringify({ error: debug && stack ? { ...rest, stack } : rest })}\n`;
}

/** The report as a person reads it on stderr. Pure. */
export function errorText(report: ErrorReport, debug: boolean, color: boolean): string {
  const red = (s: string) => (color ? pc.red(s) : s);
  const lines = [`${red(report.internal ? "internal error" : "error")}: ${report.message}`, ...(report.problems ?? []).map((p) => `  - ${p}`)];
  const stack = debug ? report.stack : undefined;
  // An internal error's hint is to run again with --debug: not said when that is what ran.
  if (report.hint && !(report.internal && stack)) lines.push(report.hint);
  if (stack) lines.push(stack);
  return `${lines.join("\n")}\n`;
}

function report(err: unknown, debug: boolean, json: boolean, bare: boolean, flags: ReadonlySet<string>, commanderMessage: string | undefined): number {
  const r = errorReport(err, flags, bare, commanderMessage);
  if (!r) return ExitCode.ok;
  if (json) process.stderr.write(errorJson(r, debug));
  // Commander printed its own message already (unknown option, missing argument, help instead of a command).
  else if (!(err instanceof CommanderError)) process.stderr.write(errorText(r, debug, colorWanted(process.env, Boolean(process.stderr.isTTY))));
  return r.exitCode;
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
