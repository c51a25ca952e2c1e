// Reading a request head by its bytes, for the LB front's fast path (front.ts).
//
// issue 7 (performance): llhttp turned every header of every request into a JavaScript string (and called back
// into JavaScript for it), and the head sent up was then built again from those strings. Scanning the bytes
// once, and copying the lines passed on as they are, halves what the front spends on a head. The scan accepts
// only a strict subset of HTTP/1.1 (known methods, origin-form targets of visible ASCII, CRLF line ends, token
// header names, no folding, no Transfer-Encoding, one small Content-Length at most); anything else is left to
// node:http (`undefined`), whose parser then answers it as it would have. So the fast path never accepts a
// request node would refuse: test/lb/head-scan.test.ts checks that against llhttp itself.

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
export function latin1Slice(data: Buffer, start: number, end: number): string {
  return (data as unknown as Latin1Buffer).latin1Slice(start, end);
}
/** `out.write(text, offset, "latin1")`: bytes written. */
export function latin1Write(out: Buffer, text: string, offset: number): number {
  return (out as unknown as Latin1Buffer).latin1Write(text, offset);
}

/** The front's reading of one request head. */
export interface ScannedRequest {
  method: string;
  /** The request target as sent (origin-form). */
  url: string;
  host: string | undefined;
  authorization: string | undefined;
  /** 0 when there is no body. */
  contentLength: number;
  /** False when the caller sent `Connection: close`. */
  keepAlive: boolean;
  /** The X-Forwarded-For values the caller sent, joined (the proxy appends the caller's address). */
  forwardedFor: string | undefined;
  /** [start, end) of each header line passed up as it is, CRLF included. */
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

  const scanned: ScannedRequest = { method, url, host: undefined, authorization: undefined, contentLength: 0, keepAlive: true, forwardedFor: undefined, lines: [] };
  let lengthSeen = false;
  const end = headEnd + 2;
  while (pos < end) {
    // name ":" OWS value OWS CRLF; no folding, no space before the colon
    let n = pos;
    while (TOKEN[data[n]!] === 1) n++;
    if (n === pos || data[n] !== COLON) return undefined;
    let v = n + 1;
    let eol = v;
    while (VALUE[data[eol]!] === 1) eol++;
    if (data[eol] !== CR || data[eol + 1] !== LF) return undefined;
    while (v < eol && (data[v] === SP || data[v] === HTAB)) v++;
    let ve = eol;
    while (ve > v && (data[ve - 1] === SP || data[ve - 1] === HTAB)) ve--;
    const next = eol + 2;
    let pass = true;
    switch (n - pos) {
      case 2: // te
        if (nameIs(data, pos, "te")) pass = false;
        break;
      case 4:
        if (nameIs(data, pos, "host")) {
          if (scanned.host !== undefined) return undefined;
          scanned.host = latin1Slice(data, v, ve);
          pass = false;
        }
        break;
      case 6:
        if (nameIs(data, pos, "expect")) return undefined;
        break;
      case 7:
        if (nameIs(data, pos, "upgrade")) return undefined;
        if (nameIs(data, pos, "trailer")) pass = false;
        break;
      case 10:
        if (nameIs(data, pos, "connection")) {
          const value = latin1Slice(data, v, ve).toLowerCase();
          // Anything but the two usual values lists hop-by-hop headers: node:http sorts that out.
          if (value === "close") scanned.keepAlive = false;
          else if (value !== "keep-alive") return undefined;
          pass = false;
        } else if (nameIs(data, pos, "keep-alive")) pass = false;
        break;
      case 13:
        if (nameIs(data, pos, "authorization")) {
          if (scanned.authorization !== undefined) return undefined;
          scanned.authorization = latin1Slice(data, v, ve);
          pass = false;
        }
        break;
      case 14:
        if (nameIs(data, pos, "content-length")) {
          if (lengthSeen || ve - v < 1 || ve - v > 7) return undefined;
          let length = 0;
          for (let d = v; d < ve; d++) {
            const digit = data[d]! - 48;
            if (digit < 0 || digit > 9) return undefined;
            length = length * 10 + digit;
          }
          if (length > maxBody) return undefined;
          lengthSeen = true;
          scanned.contentLength = length;
        }
        break;
      case 15:
        if (nameIs(data, pos, "x-forwarded-for")) {
          const value = latin1Slice(data, v, ve);
          scanned.forwardedFor = scanned.forwardedFor === undefined ? value : `${scanned.forwardedFor}, ${value}`;
          pass = false;
        }
        break;
      case 16:
        if (nameIs(data, pos, "x-forwarded-host")) pass = false;
        break;
      case 17:
        if (nameIs(data, pos, "transfer-encoding")) return undefined;
        if (nameIs(data, pos, "x-forwarded-proto")) pass = false;
        break;
      case 18:
        if (nameIs(data, pos, "proxy-authenticate")) pass = false;
        break;
      case 19:
        if (nameIs(data, pos, "proxy-authorization")) pass = false;
        break;
    }
    if (pass) scanned.lines.push(pos, next);
    pos = next;
  }
  if (pos !== end) return undefined;
  return scanned;
}

/**
 * The request sent up to a worker, head and body in one buffer: the request line with the worker's `path`, its
 * Host, the caller's header lines as they came (less the connection-scoped ones, the key and X-Forwarded-*),
 * the X-Forwarded-* the proxy sets, then `body`. The same head `requestHead` (proxy.ts) writes. Pure.
 */
export function upstreamRequestBytes(
  data: Buffer,
  req: ScannedRequest,
  path: string,
  upstreamHost: string,
  remote: string | undefined,
  body: Buffer,
): Buffer {
  const first = `${req.method} ${path} HTTP/1.1\r\nhost: ${upstreamHost}\r\n`;
  let last = req.host === undefined ? "" : `x-forwarded-host: ${req.host}\r\n`;
  if (remote) last += `x-forwarded-for: ${req.forwardedFor === undefined ? remote : `${req.forwardedFor}, ${remote}`}\r\n`;
  last += "x-forwarded-proto: http\r\n\r\n";
  const lines = req.lines;
  let size = first.length + last.length + body.length;
  for (let k = 0; k < lines.length; k += 2) size += lines[k + 1]! - lines[k]!;
  const out = Buffer.allocUnsafe(size);
  let at = latin1Write(out, first, 0);
  for (let k = 0; k < lines.length; k += 2) at += data.copy(out, at, lines[k], lines[k + 1]);
  at += latin1Write(out, last, at);
  if (body.length > 0) body.copy(out, at);
  return out;
}

const HTTP11_STATUS = Buffer.from("HTTP/1.1 ", "latin1");

/** The front's reading of a worker's answer head (one with a known length, sent whole). */
export interface ScannedResponse {
  status: number;
  contentLength: number;
  /** False when the worker sent `Connection: close`: its connection is not reused. */
  keepAlive: boolean;
  /** Whether the worker sent a Date header (else the proxy adds one). */
  date: boolean;
  /** [start, end) of each header line passed down as it is, CRLF included. */
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
    let n = pos;
    while (TOKEN[data[n]!] === 1) n++;
    if (n === pos || data[n] !== COLON) return undefined;
    let v = n + 1;
    let eol = v;
    while (VALUE[data[eol]!] === 1) eol++;
    if (data[eol] !== CR || data[eol + 1] !== LF) return undefined;
    while (v < eol && (data[v] === SP || data[v] === HTAB)) v++;
    let ve = eol;
    while (ve > v && (data[ve - 1] === SP || data[ve - 1] === HTAB)) ve--;
    const next = eol + 2;
    let pass = true;
    switch (n - pos) {
      case 2:
        if (nameIs(data, pos, "te")) pass = false;
        break;
      case 4:
        if (nameIs(data, pos, "host")) pass = false;
        else if (nameIs(data, pos, "date")) scanned.date = true;
        break;
      case 7:
        if (nameIs(data, pos, "upgrade") || nameIs(data, pos, "trailer")) pass = false;
        break;
      case 9:
        if (nameIs(data, pos, "ratelimit")) pass = false;
        break;
      case 10:
        if (nameIs(data, pos, "connection")) {
          const value = latin1Slice(data, v, ve).toLowerCase();
          if (value === "close") scanned.keepAlive = false;
          else if (value !== "keep-alive") return undefined;
          pass = false;
        } else if (nameIs(data, pos, "keep-alive")) pass = false;
        break;
      case 14:
        if (nameIs(data, pos, "content-length")) {
          if (scanned.contentLength >= 0 || ve - v < 1 || ve - v > 15) return undefined;
          let length = 0;
          for (let d = v; d < ve; d++) {
            const digit = data[d]! - 48;
            if (digit < 0 || digit > 9) return undefined;
            length = length * 10 + digit;
          }
          scanned.contentLength = length;
        }
        break;
      case 16:
        if (nameIs(data, pos, "ratelimit-policy")) pass = false;
        break;
      case 17:
        if (nameIs(data, pos, "transfer-encoding")) return undefined;
        break;
      case 18:
        if (nameIs(data, pos, "proxy-authenticate")) pass = false;
        break;
      case 19:
        if (nameIs(data, pos, "proxy-authorization")) pass = false;
        break;
    }
    if (pass) scanned.lines.push(pos, next);
    pos = next;
  }
  if (pos !== end || scanned.contentLength < 0) return undefined;
  return scanned;
}
