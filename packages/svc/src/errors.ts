// One small error hierarchy, handled in one place (src/cli/main.ts for the CLI, the HTTP layer for the service).
//
// - UserError: the user can fix it (bad flag, bad config, missing key). Printed without a stack.
// - ApiError: the service answered with an application/problem+json error. Printed with status and detail.
// - InternalError (or any other Error): a bug in svc. Printed with a stack only under --debug.

export interface SourceLocation {
  /** Path relative to the project root, with forward slashes. */
  file: string;
  /** 1-based line. */
  line: number;
  /** 1-based column. */
  column?: number;
}

export function formatLocation(loc: SourceLocation): string {
  return loc.column ? `${loc.file}:${loc.line}:${loc.column}` : `${loc.file}:${loc.line}`;
}

/** Exit codes of the `svc` binary; documented in docs/cli.md. */
export const ExitCode = {
  ok: 0,
  /** Generic failure the user can act on (bad config, build error, validation). */
  user: 1,
  /** Wrong usage: unknown command or flag, missing argument. */
  usage: 2,
  /** The service answered with an error (4xx/5xx problem). */
  api: 3,
  /** The service could not be reached. */
  unreachable: 4,
  /** Interrupted by SIGINT/SIGTERM. */
  interrupted: 130,
  /** A bug in svc. */
  internal: 70,
} as const;

export class SvcError extends Error {
  declare readonly exitCode: number;
  constructor(message: string, exitCode: number, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : options);
    this.name = new.target.name;
    // Fields, not printed: an error nothing catches in a script prints as its stack and its enumerable fields.
    hidden(this, "exitCode", exitCode);
  }
}

function hidden(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: false, writable: false, configurable: true });
}

/** Something the user can fix. `hint` says what to do; `problems` lists individual faults (file:line ...). */
export class UserError extends SvcError {
  declare readonly hint?: string;
  declare readonly problems: string[];
  constructor(message: string, opts: { hint?: string; problems?: string[]; exitCode?: number; cause?: unknown } = {}) {
    super(message, opts.exitCode ?? ExitCode.user, { cause: opts.cause });
    hidden(this, "hint", opts.hint);
    hidden(this, "problems", opts.problems ?? []);
    // Uncaught in a script (a call with no service to go to), Node prints the stack: let it be what went wrong
    // and what to do, not frames with the hint buried below them. SVC_DEBUG=1 keeps the frames.
    if (process.env.SVC_DEBUG !== "1") {
      const lines = [`${this.name}: ${message}`, ...this.problems.map((p) => `  ${p}`), ...(opts.hint ? [`hint: ${opts.hint}`] : [])];
      Object.defineProperty(this, "stack", { value: lines.join("\n"), enumerable: false, writable: true, configurable: true });
    }
  }
}

/** Wrong command-line usage. */
export class UsageError extends UserError {
  constructor(message: string, hint?: string) {
    super(message, { hint, exitCode: ExitCode.usage });
  }
}

/** An application/problem+json error body, as the spec's ErrorResponse. */
export interface Problem {
  type?: string;
  title: string;
  status: number;
  detail: string;
  errors?: string[];
  [extra: string]: unknown;
}

/** The service answered with an error. */
export class ApiError extends SvcError {
  readonly status: number;
  readonly problem: Problem;
  constructor(problem: Problem, opts: { cause?: unknown } = {}) {
    super(`${problem.status} ${problem.title}: ${problem.detail}`, ExitCode.api, opts);
    this.status = problem.status;
    this.problem = problem;
  }
}

/** The service could not be reached at all. */
export class UnreachableError extends UserError {
  constructor(url: string, cause?: unknown) {
    super(`Cannot reach the svc service at ${url}`, {
      hint: "Check SVC_API_URL, or start a service with `svc server` (or `svc dev` for local work).",
      exitCode: ExitCode.unreachable,
      cause,
    });
  }
}

/** A bug in svc: something that should not happen whatever the user does. */
export class InternalError extends SvcError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, ExitCode.internal, options);
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A thrown value's stack for a log (its message where it has none; any value thrown, not only Errors). */
export function errorStack(err: unknown): string {
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}

/** A thrown value as an Error (streams' destroy() and callbacks take one): an Error as it is, anything else wrapped. */
export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
