// Small HTTP helpers for the service: problem+json errors, bounded JSON bodies, a path matcher.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Problem } from "../errors.js";

export const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Payload Too Large",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

/** Thrown by route code; the server turns it into an application/problem+json answer. */
export class HttpProblem extends Error {
  readonly status: number;
  readonly errors?: string[];
  readonly headers?: Record<string, string>;
  constructor(status: number, detail: string, opts: { errors?: string[]; headers?: Record<string, string> } = {}) {
    super(detail);
    this.status = status;
    this.errors = opts.errors;
    this.headers = opts.headers;
  }
}

export function problemBody(status: number, detail: string, errors?: string[]): Problem {
  const body: Problem = { title: TITLES[status] ?? "Error", status, detail };
  if (errors && errors.length > 0) body.errors = errors;
  return body;
}

export function sendProblem(res: ServerResponse, status: number, detail: string, opts: { errors?: string[]; headers?: Record<string, string> } = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(problemBody(status, detail, opts.errors));
  res.writeHead(status, {
    "content-type": "application/problem+json",
    "content-length": Buffer.byteLength(text),
    ...opts.headers,
  });
  res.end(text);
}

export function sendJson(res: ServerResponse, value: unknown, status = 200): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Read the whole body, refusing more than `limit` bytes with 413 (nothing is stored then). */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    return Promise.reject(tooLarge(req, limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on("data", (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limit) {
        failed = true;
        chunks.length = 0;
        reject(tooLarge(req, limit));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (!failed) resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    });
    req.on("error", (err) => {
      if (!failed) reject(err);
    });
  });
}

function tooLarge(req: IncomingMessage, limit: number): HttpProblem {
  // Keep reading (and discarding) so the client gets to read our answer instead of a reset connection;
  // a client that sends far beyond the limit is cut off.
  let discarded = 0;
  req.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > limit * 4) req.destroy();
  });
  req.resume();
  return new HttpProblem(413, `The request body is larger than the limit of ${limit} bytes for this route`, {
    headers: { connection: "close" },
  });
}

/** Parse a JSON body; empty bodies are `undefined`. Malformed JSON is 400. */
export function parseJson(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new HttpProblem(400, `The request body is not valid JSON: ${(err as Error).message}`);
  }
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An integer query parameter within bounds, or 422. */
export function intParam(url: URL, name: string, min: number, max: number): number | undefined {
  const raw = url.searchParams.get(name);
  if (raw === null) return undefined;
  const value = Number(raw);
  if (!/^-?\d+$/.test(raw) || value < min || value > max) {
    throw new HttpProblem(422, `Query parameter "${name}" is invalid`, {
      errors: [`$.query.${name}: must be an integer from ${min} to ${max}`],
    });
  }
  return value;
}

/** The key of an `authorization` header: `Bearer <key>` or the bare key. */
export function keyFromHeader(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  const bearer = /^Bearer\s+(\S+)$/i.exec(trimmed);
  if (bearer) return bearer[1];
  if (/\s/.test(trimmed) || trimmed.length === 0) return undefined;
  return trimmed;
}
