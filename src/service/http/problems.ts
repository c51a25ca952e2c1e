// The service's errors as HTTP answers (application/problem+json, RFC 9457), rendered in one place. Route code
// throws HttpProblem, which carries its status; the core throws Refusal (src/errors.ts), which knows nothing of
// HTTP, and problemOf maps each kind to its status here: the dispatcher (api.ts) and the LB front both answer
// through it.

import { Refusal, type Problem, type RefusalKind } from "../../errors.js";
import type { ServerResponse } from "node:http";
import { TITLES } from "../../http-titles.js";

/** Thrown by route code; the server turns it into an application/problem+json answer. */
export class HttpProblem extends Error {
  readonly status: number;
  readonly errors?: string[];
  readonly headers?: Record<string, string>;
  /** Extension members of the problem (RFC 9457): what a client needs beside the detail (a failed release). */
  readonly members?: Record<string, unknown>;
  constructor(status: number, detail: string, opts: { errors?: string[]; headers?: Record<string, string>; members?: Record<string, unknown> } = {}) {
    super(detail);
    this.status = status;
    this.errors = opts.errors;
    this.headers = opts.headers;
    this.members = opts.members;
  }
}

/** The status each kind of refusal is answered with. */
export const REFUSAL_STATUS: Record<RefusalKind, number> = {
  invalid: 400,
  forbidden: 403,
  "not-found": 404,
  conflict: 409,
  unprocessable: 422,
  "over-quota": 429,
  unavailable: 503,
};

/**
 * The answer an error gets: an HttpProblem as it is, a Refusal of the core as the problem of its kind (with
 * Retry-After when it clears by itself), anything else undefined (a bug: the caller lets it through). Pure.
 */
export function problemOf(err: unknown): HttpProblem | undefined {
  if (err instanceof HttpProblem) return err;
  if (!(err instanceof Refusal)) return undefined;
  const headers = err.retryAfterS === undefined ? undefined : { "retry-after": String(err.retryAfterS) };
  return new HttpProblem(REFUSAL_STATUS[err.kind], err.message, { errors: err.errors, headers });
}

export function problemBody(status: number, detail: string, errors?: string[], members?: Record<string, unknown>): Problem {
  const body: Problem = { ...members, title: TITLES[status] ?? "Error", status, detail };
  if (errors && errors.length > 0) body.errors = errors;
  return body;
}

export function sendProblem(
  res: ServerResponse,
  status: number,
  detail: string,
  opts: { errors?: string[]; headers?: Record<string, string>; members?: Record<string, unknown> } = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(problemBody(status, detail, opts.errors, opts.members));
  res.writeHead(status, {
    "content-type": "application/problem+json",
    "content-length": Buffer.byteLength(text),
    ...opts.headers,
  });
  res.end(text);
}

/**
 * A whole problem+json answer as raw HTTP/1.1, for code that writes to a socket itself (node's clientError, the
 * LB front). `headerLines`: more header lines, each ending in CRLF. Without `body` (an answer to HEAD), the
 * headers announce the body but it is not sent. Pure.
 */
export function problemResponse(
  status: number,
  detail: string,
  headerLines: string,
  body = true,
  extra: { errors?: string[]; members?: Record<string, unknown> } = {},
): string {
  const text = JSON.stringify(problemBody(status, detail, extra.errors, extra.members));
  return (
    `HTTP/1.1 ${status} ${TITLES[status] ?? "Error"}\r\ncontent-type: application/problem+json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n` +
    `${headerLines}\r\n${body ? text : ""}`
  );
}
