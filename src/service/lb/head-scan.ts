// Reading a request head by its bytes, for the LB front's fast path (front.ts).
//
// llhttp turned every header of every request into a JavaScript string (and called back
// into JavaScript for it), and the head sent up was then built again from those strings. Scanning the bytes
// once, and copying the lines passed on as they are, halves what the front spends on a head. The scan accepts
// only a strict subset of HTTP/1.1 (known methods, origin-form targets of visible ASCII, CRLF line ends, token
// header names, no folding, no Transfer-Encoding, one small Content-Length at most); anything else is left to
// node:http (`undefined`), whose parser then answers it as it would have. So the fast path never accepts a
// request node would refuse: test/lb/head-scan.test.ts checks that against llhttp itself.

import { LB_CREDENTIAL_HEADER } from "../../lb-credential.js";

const CR = 13;
const LF = 10;
const SP = 32;
const HTAB = 9;
const COLON = 58;

/** tchar (RFC 9110 5.6.2): the bytes of a header name. */
const TOKEN = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN[c.charCodeAt(0)] = 1;
/** Bytes of a header value: visible ASCII, space, tab, obs-text (as llhttp accepts them). */
const VALUE = new Uint8Array(256);
VALUE[HTAB] = 1;
for (let b = 0x20; b <= 0x7e; b++) VALUE[b] = 1;
for (let b = 0x80; b <= 0xff; b++) VALUE[b] = 1;

const METHODS = new Set(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]);
const HTTP11 = Buffer.from(" HTTP/1.1\r\n", "latin1");

// Buffer's own latin1 methods (in node since its first versions, not in its typings): `toString("latin1", ...)`
// and `write(..., "latin1")` reach the same through an encoding switch, measurably slower at this rate.
interface Latin1Buffer {
  latin1Slice(start: number, end: number): string;
  latin1Write(text: string, offset: number): number;
}
/** `latin1Slice(data, start, end)`. */
function latin1Slice(data: Buffer, start: number, end: number): string {
  return (data as unknown as Latin1Buffer).latin1Slice(start, end);
}
/** `out.write(text, offset, "latin1")`: bytes written. */
function latin1Write(out: Buffer, text: string, offset: number): number {
  return (out as unknown as Latin1Buffer).latin1Write(text, offset);
}

/** The parts of the header line `readHeaderLine` read last (one scan at a time: scans are synchronous). */
const line = { nameEnd: 0, valueStart: 0, valueEnd: 0, next: 0 };

/** Read the header line at `pos` (name ":" OWS value OWS CRLF; no folding, no space before the colon) into `line`; false when it is not one. */
function readHeaderLine(data: Buffer, pos: number): boolean {
  let n = pos;
  while (TOKEN[data[n]!] === 1) n++;
  if (n === pos || data[n] !== COLON) return false;
  let v = n + 1;
  let eol = v;
  while (VALUE[data[eol]!] === 1) eol++;
  if (data[eol] !== CR || data[eol + 1] !== LF) return false;
  while (v < eol && (data[v] === SP || data[v] === HTAB)) v++;
  let ve = eol;
  while (ve > v && (data[ve - 1] === SP || data[ve - 1] === HTAB)) ve--;
  line.nameEnd = n;
  line.valueStart = v;
  line.valueEnd = ve;
  line.next = eol + 2;
  return true;
}

/** Add [start, end) to `lines`, joined to the last range when they touch: fewer, longer copies later. */
function keepLine(lines: number[], start: number, end: number): void {
  if (lines.length > 0 && lines[lines.length - 1] === start) lines[lines.length - 1] = end;
  else lines.push(start, end);
}

/** The header names the scanners act on; every other name is `Kind.Other`. */
const enum Kind {
  Other,
  Host,
  Authorization,
  ContentLength,
  TransferEncoding,
  Connection,
  /** Connection-scoped (RFC 9110 7.6.1) besides Connection and Transfer-Encoding: never passed on. */
  HopByHop,
  Expect,
  Upgrade,
  ForwardedFor,
  /** X-Forwarded-Host and -Proto: the proxy sets its own. */
  Forwarded,
  Date,
  /** RateLimit and RateLimit-Policy: the service's own replace a worker's. */
  RateLimit,
  ContentType,
  /** The worker credential the proxy sends up (lb-credential.ts): a caller's copy is never passed on. */
  LbCredential,
}

/** Connection-scoped headers (RFC 9110 7.6.1): never passed on, either way (proxy.ts uses the same list). */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
]);
/** Set by the proxy itself: the caller's values are replaced (X-Forwarded-For is appended to). */
export const FORWARDED: ReadonlySet<string> = new Set(["x-forwarded-host", "x-forwarded-for", "x-forwarded-proto"]);

/**
 * The names the scanners act on, by length (most names are none of them: a length with no entry is decided at
 * once). Derived from the lists above, plus the names with a rule of their own.
 */
const KINDS_BY_LENGTH: Array<Array<[string, Kind]>> = (() => {
  const own: Array<[string, Kind]> = [
    ["host", Kind.Host],
    ["authorization", Kind.Authorization],
    ["content-length", Kind.ContentLength],
    ["transfer-encoding", Kind.TransferEncoding],
    ["connection", Kind.Connection],
    ["expect", Kind.Expect],
    ["upgrade", Kind.Upgrade],
    ["x-forwarded-for", Kind.ForwardedFor],
    ["date", Kind.Date],
    ["ratelimit", Kind.RateLimit],
    ["ratelimit-policy", Kind.RateLimit],
    ["content-type", Kind.ContentType],
    [LB_CREDENTIAL_HEADER, Kind.LbCredential],
  ];
  const all = new Map<string, Kind>(own);
  for (const name of HOP_BY_HOP) if (!all.has(name)) all.set(name, Kind.HopByHop);
  for (const name of FORWARDED) if (!all.has(name)) all.set(name, Kind.Forwarded);
  const table: Array<Array<[string, Kind]>> = [];
  for (const [name, kind] of all) (table[name.length] ??= []).push([name, kind]);
  return table;
})();

/** What the header name `data[pos, pos + length)` is, in any case. */
function headerKind(data: Buffer, pos: number, length: number): Kind {
  const candidates = KINDS_BY_LENGTH[length];
  if (candidates === undefined) return Kind.Other;
  for (let i = 0; i < candidates.length; i++) if (nameIs(data, pos, candidates[i]![0])) return candidates[i]![1];
  return Kind.Other;
}

/** The X-Forwarded-* lines the proxy sends up (each ending in CRLF): `forwardedFor` is what the caller sent. */
export function forwardedLines(host: string | undefined, remote: string | undefined, forwardedFor: string | undefined): string {
  let lines = host ? `x-forwarded-host: ${host}\r\n` : "";
  if (remote) lines += `x-forwarded-for: ${forwardedFor === undefined ? remote : `${forwardedFor}, ${remote}`}\r\n`;
  return `${lines}x-forwarded-proto: http\r\n`;
}

/** The decimal number `data[start, end)` (1 to `maxDigits` digits, nothing else), or -1. */
function decimal(data: Buffer, start: number, end: number, maxDigits: number): number {
  if (end - start < 1 || end - start > maxDigits) return -1;
  let value = 0;
  for (let d = start; d < end; d++) {
    const digit = data[d]! - 48;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

/** A Connection value: true for keep-alive, false for close, undefined for anything else (a list of headers). */
function connectionKeepAlive(data: Buffer, start: number, end: number): boolean | undefined {
  const value = latin1Slice(data, start, end).toLowerCase();
  return value === "keep-alive" ? true : value === "close" ? false : undefined;
}

/**
 * One buffer: `first`, the lines `lines` ([start, end) pairs) of `data` as they are, `last`, then `body`. The
 * heads the proxy sends either way are built so: its own lines around the ones it passes on.
 */
export function spliceHead(first: string, data: Buffer, lines: readonly number[], last: string, body: Buffer): Buffer {
  let size = first.length + last.length + body.length;
  for (let k = 0; k < lines.length; k += 2) size += lines[k + 1]! - lines[k]!;
  const out = Buffer.allocUnsafe(size);
  let at = latin1Write(out, first, 0);
  for (let k = 0; k < lines.length; k += 2) at += data.copy(out, at, lines[k], lines[k + 1]);
  at += latin1Write(out, last, at);
  if (body.length > 0) body.copy(out, at);
  return out;
}

/** The front's reading of one request head. */
export interface ScannedRequest {
  method: string;
  /** The request target as sent (origin-form). */
  url: string;
  host: string | undefined;
  authorization: string | undefined;
  /** As sent (one line at most: more are node:http's to judge). */
  contentType: string | undefined;
  /** 0 when there is no body. */
  contentLength: number;
  /** False when the caller sent `Connection: close`. */
  keepAlive: boolean;
  /** The X-Forwarded-For values the caller sent, joined (the proxy appends the caller's address). */
  forwardedFor: string | undefined;
  /** [start, end) ranges of the header lines passed up as they are, CRLF included (touching lines joined). */
  lines: number[];
}

/** Whether `data[start, start + word.length)` is `word` (lower case) in any case. */
function nameIs(data: Buffer, start: number, word: string): boolean {
  for (let i = 0; i < word.length; i++) {
    if ((data[start + i]! | 0x20) !== word.charCodeAt(i)) return false;
  }
  return true;
}

/**
 * The request whose head is `data[0, headEnd + 4)` (`headEnd`: where "\r\n\r\n" starts), when the front may serve
 * it; undefined when node:http must (anything unusual, malformed or with a body over `maxBody` bytes). Pure.
 */
export function scanRequestHead(data: Buffer, headEnd: number, maxBody: number): ScannedRequest | undefined {
  // Request line: METHOD SP /target SP HTTP/1.1 CRLF
  const sp1 = data.indexOf(SP);
  if (sp1 < 3 || sp1 > 7) return undefined;
  const method = latin1Slice(data, 0, sp1);
  if (!METHODS.has(method)) return undefined;
  if (data[sp1 + 1] !== 0x2f) return undefined;
  let i = sp1 + 1;
  while (i < headEnd && data[i]! > 0x20 && data[i]! < 0x7f) i++;
  if (data[i] !== SP) return undefined;
  const url = latin1Slice(data, sp1 + 1, i);
  for (let k = 0; k < HTTP11.length; k++) if (data[i + k] !== HTTP11[k]) return undefined;
  let pos = i + HTTP11.length;

  const scanned: ScannedRequest = {
    method,
    url,
    host: undefined,
    authorization: undefined,
    contentType: undefined,
    contentLength: 0,
    keepAlive: true,
    forwardedFor: undefined,
    lines: [],
  };
  let lengthSeen = false;
  const end = headEnd + 2;
  while (pos < end) {
    if (!readHeaderLine(data, pos)) return undefined;
    const v = line.valueStart;
    const ve = line.valueEnd;
    const next = line.next;
    let pass = true;
    switch (headerKind(data, pos, line.nameEnd - pos)) {
      case Kind.Other:
      case Kind.Date:
      case Kind.RateLimit:
        break;
      case Kind.Host:
        if (scanned.host !== undefined) return undefined;
        scanned.host = latin1Slice(data, v, ve);
        pass = false;
        break;
      case Kind.Authorization:
        if (scanned.authorization !== undefined) return undefined;
        scanned.authorization = latin1Slice(data, v, ve);
        pass = false;
        break;
      case Kind.ContentType:
        if (scanned.contentType !== undefined) return undefined;
        scanned.contentType = latin1Slice(data, v, ve);
        break;
      case Kind.ContentLength: {
        const length = lengthSeen ? -1 : decimal(data, v, ve, 7);
        if (length < 0 || length > maxBody) return undefined;
        lengthSeen = true;
        scanned.contentLength = length;
        break;
      }
      case Kind.Connection: {
        // Anything but the two usual values lists hop-by-hop headers: node:http sorts that out.
        const keepAlive = connectionKeepAlive(data, v, ve);
        if (keepAlive === undefined) return undefined;
        scanned.keepAlive = keepAlive;
        pass = false;
        break;
      }
      case Kind.ForwardedFor: {
        const value = latin1Slice(data, v, ve);
        scanned.forwardedFor = scanned.forwardedFor === undefined ? value : `${scanned.forwardedFor}, ${value}`;
        pass = false;
        break;
      }
      case Kind.HopByHop:
      case Kind.Forwarded:
      case Kind.LbCredential:
        pass = false;
        break;
      case Kind.TransferEncoding:
      case Kind.Expect:
      case Kind.Upgrade:
        return undefined;
    }
    if (pass) keepLine(scanned.lines, pos, next);
    pos = next;
  }
  if (pos !== end) return undefined;
  return scanned;
}

/**
 * Whether one of the header lines the scan passed up (`lines`: its [start, end) ranges) is named `name` (lower
 * case, any case in `data`). Pure.
 */
export function hasHeaderLine(data: Buffer, lines: number[], name: string): boolean {
  for (let r = 0; r < lines.length; r += 2) {
    // A range may hold several touching lines: look at each line start within it.
    let pos = lines[r]!;
    const end = lines[r + 1]!;
    while (pos < end) {
      if (data[pos + name.length] === 0x3a && nameIs(data, pos, name)) return true;
      const next = data.indexOf(LF, pos);
      if (next < 0 || next >= end) break;
      pos = next + 1;
    }
  }
  return false;
}

export const IDEMPOTENCY_KEY = "idempotency-key";

/**
 * The request sent up to a worker, head and body in one buffer: the request line with the worker's `path`, its
 * Host, its credential line (`credentialLine`, CRLF included; "" for a worker that asks none), the caller's
 * header lines as they came (less the connection-scoped ones, the key, X-Forwarded-* and any credential of its
 * own), the X-Forwarded-* the proxy sets, then `body`. The same head `requestHead` (proxy.ts) writes. Pure.
 */
export function upstreamRequestBytes(
  data: Buffer,
  req: ScannedRequest,
  path: string,
  upstreamHost: string,
  remote: string | undefined,
  body: Buffer,
  credentialLine: string,
): Buffer {
  const first = `${req.method} ${path} HTTP/1.1\r\nhost: ${upstreamHost}\r\n${credentialLine}`;
  return spliceHead(first, data, req.lines, `${forwardedLines(req.host, remote, req.forwardedFor)}\r\n`, body);
}

/**
 * A request passed on to another replica of the service (a follower's job read going to the replica serving jobs),
 * head only, as it came: its request line, Host and key, the caller's other header lines (less the
 * connection-scoped ones and a worker credential, which means nothing there), and the X-Forwarded-* the proxy
 * sets. Pure.
 */
export function relayRequestBytes(data: Buffer, req: ScannedRequest, remote: string | undefined): Buffer {
  let first = `${req.method} ${req.url} HTTP/1.1\r\n`;
  if (req.host !== undefined) first += `host: ${req.host}\r\n`;
  if (req.authorization !== undefined) first += `authorization: ${req.authorization}\r\n`;
  return spliceHead(first, data, req.lines, `${forwardedLines(req.host, remote, req.forwardedFor)}\r\n`, EMPTY);
}

const EMPTY = Buffer.alloc(0);
const HTTP11_STATUS = Buffer.from("HTTP/1.1 ", "latin1");

/** The front's reading of a worker's answer head (one with a known length, sent whole). */
export interface ScannedResponse {
  status: number;
  /** -1 for a chunked answer (then `chunked`). */
  contentLength: number;
  /** `Transfer-Encoding: chunked` (its line is passed down as it is, with the chunks as they came). */
  chunked?: boolean;
  /** False when the worker sent `Connection: close`: its connection is not reused. */
  keepAlive: boolean;
  /** Whether the worker sent a Date header (else the proxy adds one). */
  date: boolean;
  /** [start, end) ranges of the header lines passed down as they are, CRLF included (touching lines joined). */
  lines: number[];
}

/**
 * The answer whose head is `data[0, headEnd + 4)`, when it can be passed down whole and simply: HTTP/1.1, a final
 * status with a body (not 1xx, 204 or 304), one Content-Length, no Transfer-Encoding, no Connection header
 * listing others. Undefined otherwise: the exchange then reads it with llhttp, as before. The lines dropped:
 * connection-scoped ones, and RateLimit/RateLimit-Policy (the service's own replace them). Pure.
 */
export function scanResponseHead(data: Buffer, headEnd: number): ScannedResponse | undefined {
  for (let k = 0; k < HTTP11_STATUS.length; k++) if (data[k] !== HTTP11_STATUS[k]) return undefined;
  const d1 = data[9]! - 48;
  const d2 = data[10]! - 48;
  const d3 = data[11]! - 48;
  if (d1 < 2 || d1 > 5 || d2 < 0 || d2 > 9 || d3 < 0 || d3 > 9) return undefined;
  const status = d1 * 100 + d2 * 10 + d3;
  if (status === 204 || status === 304) return undefined;
  let pos = 12;
  if (data[pos] === SP) {
    pos++;
    while (VALUE[data[pos]!] === 1) pos++;
  }
  if (data[pos] !== CR || data[pos + 1] !== LF) return undefined;
  pos += 2;

  const scanned: ScannedResponse = { status, contentLength: -1, keepAlive: true, date: false, lines: [] };
  const end = headEnd + 2;
  while (pos < end) {
    if (!readHeaderLine(data, pos)) return undefined;
    const v = line.valueStart;
    const ve = line.valueEnd;
    const next = line.next;
    let pass = true;
    switch (headerKind(data, pos, line.nameEnd - pos)) {
      case Kind.Other:
      case Kind.Authorization:
      case Kind.Expect:
      case Kind.ForwardedFor:
      case Kind.Forwarded:
      case Kind.LbCredential:
        break;
      case Kind.Date:
        scanned.date = true;
        break;
      case Kind.ContentLength: {
        const length = scanned.contentLength >= 0 ? -1 : decimal(data, v, ve, 15);
        if (length < 0) return undefined;
        scanned.contentLength = length;
        break;
      }
      case Kind.Connection: {
        const keepAlive = connectionKeepAlive(data, v, ve);
        if (keepAlive === undefined) return undefined;
        scanned.keepAlive = keepAlive;
        pass = false;
        break;
      }
      case Kind.Host:
      case Kind.HopByHop:
      case Kind.Upgrade:
      case Kind.RateLimit:
        pass = false;
        break;
      case Kind.TransferEncoding:
        // Only `chunked` alone, once; any other coding is llhttp's to read.
        if (scanned.chunked || ve - v !== 7 || !nameIs(data, v, "chunked")) return undefined;
        scanned.chunked = true;
        break;
    }
    if (pass) keepLine(scanned.lines, pos, next);
    pos = next;
  }
  if (pos !== end) return undefined;
  // Exactly one of a length and chunked (both: llhttp's to judge).
  if (scanned.chunked ? scanned.contentLength >= 0 : scanned.contentLength < 0) return undefined;
  return scanned;
}

/**
 * Where a chunked body that starts at `data[start]` ends (after its last chunk's CRLF), when it is whole in `data`,
 * at most `limit` bytes long and written plainly: sizes in hex digits only (no extensions), no trailers. -1
 * otherwise (incomplete, larger, or anything else): llhttp reads it then. Pure.
 */
export function plainChunkedEnd(data: Buffer, start: number, limit: number): number {
  let pos = start;
  const stop = Math.min(data.length, start + limit);
  for (;;) {
    let size = 0;
    let digits = 0;
    for (;;) {
      const c = data[pos];
      const d = c === undefined ? -1 : c >= 48 && c <= 57 ? c - 48 : (c | 0x20) >= 97 && (c | 0x20) <= 102 ? (c | 0x20) - 87 : -1;
      if (d < 0) break;
      if (++digits > 6) return -1;
      size = size * 16 + d;
      pos++;
    }
    if (digits === 0 || data[pos] !== CR || data[pos + 1] !== LF) return -1;
    pos += 2;
    if (size === 0) {
      // The last chunk: no trailers, its empty line right away.
      if (data[pos] !== CR || data[pos + 1] !== LF || pos + 2 > stop) return -1;
      return pos + 2;
    }
    pos += size;
    if (pos + 2 > stop || data[pos] !== CR || data[pos + 1] !== LF) return -1;
    pos += 2;
  }
}
