// Requests and answers on the wire: bounded JSON bodies, request targets and query parameters, the
// credential header, and sends that a slow client cannot turn into unbounded memory. Errors: problems.ts.

import { isUtf8 } from "node:buffer";
import type { IncomingMessage, ServerResponse } from "node:http";
import { HttpProblem } from "./problems.js";
import { errorMessage } from "../../errors.js";

/** A 200 answer of JSON text already serialized (a job record cut from stored pieces). */
export function sendText(res: ServerResponse, text: string): void {
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export function sendJson(res: ServerResponse, value: unknown, status = 200): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Largest piece handed to the socket at once: a client that does not read holds at most about this much. */
const SEND_SLICE = 64 * 1024;

/**
 * Wait until `res` can take more (its "drain"), or it ended: false when the client went away, or when it read
 * nothing for `stallMs` (the connection is then dropped: a client that does not read is not buffered forever).
 */
export function writable(res: ServerResponse, stallMs: number, event: "drain" | "finish" = "drain"): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      res.off(event, onReady);
      res.off("close", onClose);
      resolve(ok);
    };
    const onReady = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => {
      res.destroy();
      done(false);
    }, stallMs);
    res.once(event, onReady);
    res.once("close", onClose);
  });
}

/**
 * Send a 200 answer made of `pieces` (strings and shared Buffers, never joined into one copy) with its
 * content-length, handing the socket at most SEND_SLICE bytes at a time and waiting for it to drain in between:
 * memory per answer stays small whatever the client does, and one that stops reading is dropped after `stallMs`.
 * Resolves when the answer was sent or dropped.
 */
export async function sendPieces(
  res: ServerResponse,
  pieces: ReadonlyArray<string | Buffer>,
  stallMs: number,
  contentType = "application/json",
): Promise<void> {
  let length = 0;
  for (const piece of pieces) length += typeof piece === "string" ? Buffer.byteLength(piece) : piece.length;
  res.writeHead(200, { "content-type": contentType, "content-length": length });
  for (const piece of pieces) {
    if (typeof piece === "string") {
      if (!res.write(piece) && !(await writable(res, stallMs))) return;
      continue;
    }
    for (let at = 0; at < piece.length; at += SEND_SLICE) {
      // subarray shares the bytes: no copy per answer.
      if (!res.write(piece.subarray(at, at + SEND_SLICE)) && !(await writable(res, stallMs))) return;
      // A slice the kernel took at once is still a copy: other requests go between slices, so many large
      // answers at the same moment do not hold up everyone else's (a loopback socket takes megabytes).
      if (at + SEND_SLICE < piece.length) await new Promise((resolve) => setImmediate(resolve));
    }
  }
  res.end();
  // The last piece may still sit unread in the socket: the same stall rule until it is out.
  if (!res.writableFinished) await writable(res, stallMs, "finish");
}

/**
 * Content types a JSON body may arrive under. Besides JSON itself, what clients send when their author forgot the
 * header: none, `text/plain` (fetch with a string body) and a form (curl -d); clients written for this API elsewhere
 * must keep working, and the body is parsed as JSON either way. Anything else (multipart, binary, XML...) is 415.
 */
export function jsonContentType(header: string | undefined): boolean {
  if (header === undefined) return true;
  const type = header.split(";")[0]!.trim().toLowerCase();
  return (
    type === "" ||
    type === "application/json" ||
    type === "text/plain" ||
    type === "application/x-www-form-urlencoded" ||
    (type.startsWith("application/") && type.endsWith("+json"))
  );
}

/**
 * Read the whole (JSON) body, refusing more than `limit` bytes with 413 and a declared non-JSON content-type
 * with 415 (nothing is stored then). Every caller reads JSON.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  if (!jsonContentType(req.headers["content-type"])) {
    req.resume();
    return Promise.reject(
      new HttpProblem(415, `The request body must be JSON: send it with \`Content-Type: application/json\`, not ${req.headers["content-type"]}`),
    );
  }
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) return refuseAfterDrain(req, limit);
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
        refuseAfterDrain(req, limit, size).catch(reject);
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (failed) return;
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      // The listeners stay on the request, which lives on while a /runsync waits and while its keep-alive
      // connection is idle: the chunks must not live on with them (megabytes a request).
      chunks.length = 0;
      resolve(body);
    });
    req.on("error", (err) => {
      if (!failed) reject(err);
    });
  });
}

/** How much of a body over its limit is read and thrown away so the client can read the 413 (see below). */
export const OVERSIZE_DRAIN_BYTES = 64 * 1024 * 1024;

/**
 * The 413 for a body over `limit`, answered once the body has been read to its end and discarded: a client that
 * writes its whole body before it reads (Python's http.client, requests, curl without Expect) would otherwise hit
 * a closed socket (a broken pipe) instead of the answer. A body more than OVERSIZE_DRAIN_BYTES over the limit is
 * cut off: its sender gets the 413 if it reads early, a reset otherwise.
 */
function refuseAfterDrain(req: IncomingMessage, limit: number, alreadyRead = 0): Promise<never> {
  const problem = new HttpProblem(413, `The request body is larger than the limit of ${limit} bytes for this route`, { headers: { connection: "close" } });
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit + OVERSIZE_DRAIN_BYTES) {
    // Announced far over: no point in reading it. Answer now; the socket closes after the answer.
    req.resume();
    return Promise.reject(problem);
  }
  return new Promise((_, reject) => {
    let read = alreadyRead;
    const refuse = () => reject(problem);
    req.on("data", (chunk: Buffer) => {
      read += chunk.length;
      if (read > limit + OVERSIZE_DRAIN_BYTES) {
        req.removeListener("end", refuse);
        refuse();
        // Stop reading only after the answer had its chance to go out.
        setImmediate(() => req.destroy());
      }
    });
    req.once("end", refuse);
    // A body that breaks off mid-way: nothing to answer, the socket is gone.
    req.once("error", refuse);
    req.resume();
    if (req.readableEnded) refuse();
  });
}

/** Bodies nested deeper than this are refused: JSON.stringify (the store) and recursive code overflow the stack. */
export const MAX_JSON_DEPTH = 512;

/** True when `body` (JSON text) nests arrays/objects deeper than `max`. Bytes suffice: UTF-8 never hides `"\\[]{}`. */
function nestedDeeper(body: Buffer, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** Parse a JSON body; empty bodies are `undefined`. Malformed JSON, bytes that are not UTF-8 and nesting deeper than MAX_JSON_DEPTH are 400. */
export function parseJson(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  // Decoding would silently turn invalid bytes into U+FFFD and store that.
  if (!isUtf8(body)) throw new HttpProblem(400, "The request body is not valid UTF-8");
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new HttpProblem(400, `The request body is not valid JSON: ${errorMessage(err)}`);
  }
  // Only a body longer than the limit can nest that deep: small bodies (most job submissions) skip the scan.
  if (body.length > MAX_JSON_DEPTH && nestedDeeper(body, MAX_JSON_DEPTH)) {
    throw new HttpProblem(400, `The request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
  }
  return value;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** What routes read of a request target: its path and its query (a URL has both). */
export interface RequestTarget {
  readonly pathname: string;
  readonly searchParams: URLSearchParams;
}

/**
 * The path and query of an origin-form request target ("/a/b?c=d"), without building a URL: the job API and
 * the LB proxy parse one per request. Targets a URL would rewrite (backslashes, absolute form) go through
 * `new URL`, so every route sees the same path as before; "." and ".." segments, which a URL would resolve to
 * another route, and targets that are not URLs are 400. The query is parsed when first read.
 */
export function requestTarget(raw: string): RequestTarget {
  const q = raw.indexOf("?");
  const pathname = q < 0 ? raw : raw.slice(0, q);
  if (raw.charCodeAt(0) !== 47 /* "/" */ || pathname.includes(".") || pathname.includes("\\")) {
    // A URL would resolve "." and ".." segments: `DELETE /v1/apps/a/environments/..` would delete app "a".
    if (/(^|[/\\])(\.|%2e){1,2}([/\\]|$)/i.test(pathname)) throw new HttpProblem(400, 'The request path has a "." or ".." segment');
    try {
      return new URL(raw, "http://svc.invalid");
    } catch {
      throw new HttpProblem(400, "The request target is not a valid path");
    }
  }
  let params: URLSearchParams | undefined;
  return {
    pathname,
    get searchParams() {
      return (params ??= new URLSearchParams(q < 0 ? "" : raw.slice(q + 1)));
    },
  };
}

/** An integer query parameter within bounds, or 422. */
export function intParam(url: RequestTarget, name: string, min: number, max: number): number | undefined {
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

/** The key of an `authorization` header, and whether it came as `Bearer <key>` (rather than the bare key). */
export function credentialFromHeader(header: string | undefined): { key: string; bearer: boolean } | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  const bearer = /^Bearer\s+(\S+)$/i.exec(trimmed);
  if (bearer) return { key: bearer[1]!, bearer: true };
  if (/\s/.test(trimmed) || trimmed.length === 0) return undefined;
  return { key: trimmed, bearer: false };
}
