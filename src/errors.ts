// svc's error hierarchy. The classes user code also sees (UserError, ApiError, ...) are defined in the SDK package
// (`svc`), because user code catches the same classes the CLI throws and the SDK's job client raises; the CLI's
// modules import them from here. Refusal is the service's own and lives here.
//
// - UserError: the user can fix it (bad flag, bad config, missing key). Printed without a stack.
// - ApiError: the service answered with an application/problem+json error. Printed with status and detail.
// - InternalError (or any other Error): a bug in svc. Printed with a stack only under --debug.
// - Refusal: the service's core refuses a request in its own terms (not found, shutting down...); the service's
//   HTTP edge (src/service/http/problems.ts) answers it as application/problem+json.

export {
  ApiError,
  ExitCode,
  InternalError,
  SvcError,
  UnreachableError,
  UsageError,
  UserError,
  asError,
  errorMessage,
  errorStack,
  formatLocation,
  type Problem,
  type SourceLocation,
} from "svc/internal";

/**
 * Why the service's core refuses what it was asked, in its own terms. Each kind is one answer at the HTTP edge:
 * invalid 400, forbidden 403, not-found 404, conflict 409, unprocessable 422, over-quota 429 (a tenant's quota is
 * used up: it clears as its work drains), unavailable 503. The core (engine,
 * store, balancer, cluster) throws these and never speaks HTTP; http/problems.ts maps them.
 */
export type RefusalKind = "invalid" | "forbidden" | "not-found" | "conflict" | "unprocessable" | "over-quota" | "unavailable";

export class Refusal extends Error {
  readonly kind: RefusalKind;
  /** Individual faults, each naming where it is ("$.input: required"). */
  readonly errors?: string[];
  /** Seconds after which the same request may succeed: the refusal clears by itself. */
  readonly retryAfterS?: number;
  constructor(kind: RefusalKind, detail: string, opts: { errors?: string[]; retryAfterS?: number; cause?: unknown } = {}) {
    super(detail, { cause: opts.cause });
    this.name = new.target.name;
    this.kind = kind;
    this.errors = opts.errors;
    this.retryAfterS = opts.retryAfterS;
  }
}
