import { describe, expect, it } from "vitest";
import { hasHeaderLine, IDEMPOTENCY_KEY, relayRequestBytes, plainChunkedEnd, scanRequestHead, scanResponseHead, upstreamRequestBytes } from "./head-scan.js";
import { requestHead } from "./exchange.js";
import { llhttp } from "./upstream.js";

const HEAD_END = Buffer.from("\r\n\r\n");
const scan = (text: string, maxBody = 65_536) => {
  const data = Buffer.from(text, "latin1");
  return scanRequestHead(data, data.indexOf(HEAD_END), maxBody);
};

/** What node's own parser (llhttp, strict, as node:http runs it) reads of a head; an Error when it refuses it. */
function parse(kind: "request" | "response", data: Buffer) {
  const P = llhttp!.Parser;
  const parser = new P();
  let head: { method?: string; url: string; status: number; headers: string[]; keepAlive: boolean; upgrade: boolean; http11: boolean } | undefined;
  const partial: string[] = [];
  parser[P.kOnHeaders] = ((h: string[]) => partial.push(...h)) as never;
  parser[P.kOnHeadersComplete] = ((
    major: number,
    minor: number,
    headers: string[] | undefined,
    method: number,
    url: string,
    status: number,
    _m: unknown,
    upgrade: boolean,
    keepAlive: boolean,
  ) => {
    head = { method: llhttp!.methods[method], url, status, headers: headers ?? partial, keepAlive, upgrade, http11: major === 1 && minor === 1 };
    return 1;
  }) as never;
  parser.initialize(kind === "request" ? P.REQUEST : P.RESPONSE, {}, 16 * 1024, 0);
  const result = parser.execute(data);
  return result instanceof Error ? result : head;
}

/** A seeded generator of random heads: header lines from `names` and `values`, then a few stray bytes anywhere. */
function randomHeads(seed: number, names: readonly string[], values: readonly string[], noise: readonly string[]) {
  const random = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
  return {
    random,
    pick,
    /** `first` and the lines `extra` says where (before line i), `count` random header lines, the empty line, mutated. */
    head(first: string, extra: (i: number, count: number) => string = () => ""): string {
      const count = Math.floor(random() * 5);
      let text = first;
      for (let i = 0; i <= count; i++) {
        text += extra(i, count);
        if (i < count) text += `${pick(names)}:${pick(["", " "])}${pick(values)}\r\n`;
      }
      text += "\r\n";
      const mutations = Math.floor(random() * 3);
      for (let m = 0; m < mutations; m++) {
        const at = Math.floor(random() * (text.length - 4));
        text = text.slice(0, at) + pick(noise) + text.slice(at + (random() < 0.5 ? 1 : 0));
      }
      return text;
    },
  };
}

describe("scanRequestHead", () => {
  it("reads what the front needs and keeps the lines passed up", () => {
    const text =
      "POST /lb/abc/items/1?q=2 HTTP/1.1\r\nHost: svc:1\r\nAuthorization: Bearer k\r\nAccept: a\r\nContent-Length: 2\r\n" +
      "X-Forwarded-For: 10.0.0.1\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nX-Forwarded-Proto: https\r\nTE: trailers\r\n\r\n{}";
    const data = Buffer.from(text, "latin1");
    const head = scanRequestHead(data, data.indexOf(HEAD_END), 100)!;
    expect(head).toMatchObject({
      method: "POST",
      url: "/lb/abc/items/1?q=2",
      host: "svc:1",
      authorization: "Bearer k",
      contentLength: 2,
      keepAlive: true,
      forwardedFor: "10.0.0.1",
    });
    let kept = "";
    for (let i = 0; i < head.lines.length; i += 2) kept += data.toString("latin1", head.lines[i], head.lines[i + 1]);
    expect(kept).toBe("Accept: a\r\nContent-Length: 2\r\n");
    expect(scan("GET / HTTP/1.1\r\nconnection: Close\r\n\r\n")).toMatchObject({ keepAlive: false, lines: [] });
    expect(scan("GET / HTTP/1.1\r\n\r\n")).toMatchObject({ method: "GET", url: "/", host: undefined, contentLength: 0 });
  });

  it("sends up the same head as the node:http path, then the body, in one buffer", () => {
    const text =
      "PUT /lb/abc/x HTTP/1.1\r\nhost: svc:1\r\nauthorization: Bearer k\r\nAccept: a\r\nAccept: b\r\nx-forwarded-for: 10.0.0.1\r\n" +
      "X-Forwarded-Host: evil\r\ncontent-length: 3\r\n\r\nabc";
    const data = Buffer.from(text, "latin1");
    const headEnd = data.indexOf(HEAD_END);
    const head = scanRequestHead(data, headEnd, 100)!;
    const raw = [
      "host",
      "svc:1",
      "authorization",
      "Bearer k",
      "Accept",
      "a",
      "Accept",
      "b",
      "x-forwarded-for",
      "10.0.0.1",
      "X-Forwarded-Host",
      "evil",
      "content-length",
      "3",
    ];
    const expected = requestHead("PUT", "/x", "127.0.0.1:9000", raw, { host: "svc:1", remote: "127.0.0.2" }, false) + "abc";
    const body = data.subarray(headEnd + 4);
    expect(upstreamRequestBytes(data, head, "/x", "127.0.0.1:9000", "127.0.0.2", body, "").toString("latin1")).toBe(expected);
  });

  it("sends the worker's credential up and never a copy the caller sent, on both paths", () => {
    const line = "x-svc-lb-credential: the-workers-own\r\n";
    const text =
      "POST /lb/abc/x HTTP/1.1\r\nhost: svc:1\r\nX-SVC-LB-Credential: forged-by-caller\r\nauthorization: Bearer k\r\nAccept: a\r\n" +
      "x-svc-lb-credential: forged-again\r\ncontent-length: 2\r\n\r\n{}";
    const data = Buffer.from(text, "latin1");
    const headEnd = data.indexOf(HEAD_END);
    const head = scanRequestHead(data, headEnd, 100)!;
    const sent = upstreamRequestBytes(data, head, "/x", "127.0.0.1:9000", "127.0.0.2", data.subarray(headEnd + 4), line).toString("latin1");
    expect(sent).not.toContain("forged");
    expect(sent.startsWith(`POST /x HTTP/1.1\r\nhost: 127.0.0.1:9000\r\n${line}Accept: a\r\ncontent-length: 2\r\n`)).toBe(true);
    // The node:http path writes the same head.
    const raw = [
      "host",
      "svc:1",
      "X-SVC-LB-Credential",
      "forged-by-caller",
      "authorization",
      "Bearer k",
      "Accept",
      "a",
      "x-svc-lb-credential",
      "forged-again",
      "content-length",
      "2",
    ];
    expect(requestHead("POST", "/x", "127.0.0.1:9000", raw, { host: "svc:1", remote: "127.0.0.2" }, false, line) + "{}").toBe(sent);
    // What the worker's parser reads: exactly one credential, the worker's.
    const parsed = parse("request", Buffer.from(sent.slice(0, sent.indexOf("\r\n\r\n") + 4), "latin1"));
    if (!parsed || parsed instanceof Error) throw new Error("the head sent up does not parse");
    const credentials = parsed.headers.flatMap((h, i) => (i % 2 === 0 && h.toLowerCase() === "x-svc-lb-credential" ? [parsed.headers[i + 1]] : []));
    expect(credentials).toEqual(["the-workers-own"]);
    // A worker that asks none (a prebuilt image's) gets no line, and still no copy of the caller's.
    expect(upstreamRequestBytes(data, head, "/x", "127.0.0.1:9000", undefined, Buffer.alloc(0), "").toString("latin1")).not.toMatch(/credential/i);
  });

  it("passes a request on to another replica as it came: its target, Host and key kept, hop-by-hop lines dropped", () => {
    const text =
      "GET /v2/e1/status/j1 HTTP/1.1\r\nHost: svc:1\r\nAuthorization: Bearer k\r\nAccept: a\r\nConnection: keep-alive\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n";
    const data = Buffer.from(text, "latin1");
    const head = scan(text)!;
    const relayed = relayRequestBytes(data, head, "127.0.0.2");
    expect(relayed.toString("latin1")).toBe(
      "GET /v2/e1/status/j1 HTTP/1.1\r\nhost: svc:1\r\nauthorization: Bearer k\r\nAccept: a\r\nx-forwarded-host: svc:1\r\nx-forwarded-for: 10.0.0.1, 127.0.0.2\r\nx-forwarded-proto: http\r\n\r\n",
    );
    // What node's own parser reads of it: the same request, the key included.
    const parsed = parse("request", relayed);
    expect(parsed).toMatchObject({ method: "GET", url: "/v2/e1/status/j1", keepAlive: true });
    expect(parsed).not.toBeInstanceOf(Error);
  });

  it("leaves anything unusual to node:http", () => {
    const refused = [
      "GET / HTTP/1.0\r\n\r\n",
      "get / HTTP/1.1\r\n\r\n",
      "BREW / HTTP/1.1\r\n\r\n",
      "GET http://a/ HTTP/1.1\r\n\r\n",
      "GET /a b HTTP/1.1\r\n\r\n",
      "GET /\x7f HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
      "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n",
      "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
      "GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
      "GET / HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 2 2\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
      "POST / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
      "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
      "GET / HTTP/1.1\r\nConnection: keep-alive, x-private\r\n\r\n",
      "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
    ];
    for (const text of refused) expect(scan(text, 100), JSON.stringify(text)).toBeUndefined();
  });

  it("never accepts a head node's parser refuses, and reads the same one it reads (seeded random heads)", () => {
    const names = [
      "Host",
      "host",
      "Authorization",
      "Content-Length",
      "content-length",
      "Accept",
      "X-Forwarded-For",
      "Connection",
      "Keep-Alive",
      "Transfer-Encoding",
      "Expect",
      "Upgrade",
      "TE",
      "X-A",
    ];
    const values = ["a", "svc:1", "Bearer k", "0", "12", "keep-alive", "close", "chunked", " spaced ", "a\tb", "ümlaut", "x, y", ""];
    const gen = randomHeads(7, names, values, ["\r", "\n", " ", "\t", ":", "\x00", "\x7f", "(", "é", "\r\n"]);
    let accepted = 0;
    for (let round = 0; round < 4000; round++) {
      const text = gen.head(
        `${gen.pick(["GET", "POST", "HEAD", "DELETE", "PATCH", "OPTIONS", "PUT"])} ${gen.pick(["/", "/lb/abc/x?y=1", "/a%20b", "/#f"])} HTTP/1.1\r\n`,
      );
      const data = Buffer.from(text, "latin1");
      const headEnd = data.indexOf(HEAD_END);
      if (headEnd < 0) continue;
      const mine = scanRequestHead(data, headEnd, 100);
      if (!mine) continue;
      accepted++;
      const theirs = parse("request", data.subarray(0, headEnd + 4));
      expect(theirs, JSON.stringify(text)).not.toBeInstanceOf(Error);
      const head = theirs as Exclude<typeof theirs, Error | undefined>;
      expect([head.method, head.url, head.keepAlive, head.upgrade, head.http11], JSON.stringify(text)).toEqual([
        mine.method,
        mine.url,
        mine.keepAlive,
        false,
        true,
      ]);
      const value = (name: string) => {
        const found: string[] = [];
        for (let i = 0; i < head.headers.length; i += 2) if (head.headers[i]!.toLowerCase() === name) found.push(head.headers[i + 1]!);
        return found;
      };
      expect(value("host"), JSON.stringify(text)).toEqual(mine.host === undefined ? [] : [mine.host]);
      expect(value("authorization"), JSON.stringify(text)).toEqual(mine.authorization === undefined ? [] : [mine.authorization]);
      expect(value("content-length").map(Number), JSON.stringify(text)).toEqual(value("content-length").length ? [mine.contentLength] : []);
      expect(value("transfer-encoding"), JSON.stringify(text)).toEqual([]);
    }
    // The generator reaches both sides of the decision.
    expect(accepted).toBeGreaterThan(500);
  });
});

describe("scanResponseHead", () => {
  const scanResponse = (text: string) => {
    const data = Buffer.from(text, "latin1");
    return scanResponseHead(data, data.indexOf(HEAD_END));
  };

  it("reads a whole answer of known length and drops the connection-scoped lines and the worker's rate limits", () => {
    const text =
      "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\nDate: x\r\nConnection: keep-alive\r\nKeep-Alive: timeout=65\r\n" +
      "RateLimit: r=1\r\nratelimit-policy: q=1\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n{}";
    const data = Buffer.from(text, "latin1");
    const answer = scanResponseHead(data, data.indexOf(HEAD_END))!;
    expect(answer).toMatchObject({ status: 201, contentLength: 2, keepAlive: true, date: true });
    let kept = "";
    for (let i = 0; i < answer.lines.length; i += 2) kept += data.toString("latin1", answer.lines[i], answer.lines[i + 1]);
    expect(kept).toBe("Content-Type: application/json\r\nContent-Length: 2\r\nDate: x\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n");
    // Lines that touch are one range: two copies here, not five.
    expect(answer.lines.length).toBe(4);
    expect(scanResponse("HTTP/1.1 500\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")).toMatchObject({ status: 500, keepAlive: false, date: false });
  });

  it("reads a chunked answer's head, its Transfer-Encoding line passed down as it is", () => {
    const text = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: Chunked\r\nConnection: keep-alive\r\n\r\n";
    const data = Buffer.from(text, "latin1");
    const answer = scanResponseHead(data, data.indexOf(HEAD_END))!;
    expect(answer).toMatchObject({ status: 200, contentLength: -1, chunked: true, keepAlive: true });
    let kept = "";
    for (let i = 0; i < answer.lines.length; i += 2) kept += data.toString("latin1", answer.lines[i], answer.lines[i + 1]);
    expect(kept).toBe("Content-Type: application/json\r\nTransfer-Encoding: Chunked\r\n");
  });

  it("leaves streamed, informational, bodiless and unusual answers to the parser", () => {
    for (const text of [
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
      "HTTP/1.1 100 Continue\r\n\r\n",
      "HTTP/1.1 103 Early Hints\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
      "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive, x-private\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n folded\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX: a\x01\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
    ]) {
      expect(scanResponse(text), JSON.stringify(text)).toBeUndefined();
    }
  });

  it("never accepts an answer node's parser refuses, and reads the same status, length and keep-alive (seeded)", () => {
    const names = ["content-length", "Content-Type", "Connection", "Keep-Alive", "Transfer-Encoding", "Date", "Set-Cookie", "RateLimit"];
    const values = ["0", "12", "keep-alive", "close", "chunked", "text/plain", " a ", "x\ty", "ü"];
    const gen = randomHeads(11, names, values, ["\r", "\n", " ", "\t", ":", "\x00", "\x7f", "é", "\r\n", "9"]);
    let accepted = 0;
    for (let round = 0; round < 4000; round++) {
      // Most answers get one Content-Length, somewhere among the other lines.
      const withLength = gen.random() < 0.85;
      const where = gen.random();
      const length = Math.floor(gen.random() * 200);
      const status = gen.pick(["200 OK", "201 Created", "404 Not Found", "500", "302 Found", "204 No Content", "101 Switching"]);
      const text = gen.head(`HTTP/1.1 ${status}\r\n`, (i, count) =>
        withLength && i === Math.floor(where * (count + 1)) ? `Content-Length: ${length}\r\n` : "",
      );
      const data = Buffer.from(text, "latin1");
      const headEnd = data.indexOf(HEAD_END);
      if (headEnd < 0) continue;
      const mine = scanResponseHead(data, headEnd);
      if (!mine) continue;
      accepted++;
      const theirs = parse("response", data.subarray(0, headEnd + 4));
      expect(theirs, JSON.stringify(text)).not.toBeInstanceOf(Error);
      const head = theirs as Exclude<typeof theirs, Error | undefined>;
      expect([head.status, head.keepAlive, head.http11], JSON.stringify(text)).toEqual([mine.status, mine.keepAlive, true]);
      const lengths = [];
      const codings = [];
      for (let i = 0; i < head.headers.length; i += 2) {
        if (head.headers[i]!.toLowerCase() === "content-length") lengths.push(Number(head.headers[i + 1]));
        if (head.headers[i]!.toLowerCase() === "transfer-encoding") codings.push(head.headers[i + 1]!.toLowerCase());
      }
      if (mine.chunked) expect([lengths, codings], JSON.stringify(text)).toEqual([[], ["chunked"]]);
      else expect([lengths, codings], JSON.stringify(text)).toEqual([[mine.contentLength], []]);
    }
    expect(accepted).toBeGreaterThan(300);
  });
});

describe("plainChunkedEnd", () => {
  const end = (body: string, limit = 1024) => plainChunkedEnd(Buffer.from(`HEAD${body}`, "latin1"), 4, limit);
  it("finds the end of a small chunked body whole in the buffer, written plainly", () => {
    expect(end('b\r\n{"ok":true}\r\n0\r\n\r\n')).toBe(4 + 21);
    expect(end("3\r\nabc\r\nA\r\n0123456789\r\n0\r\n\r\n")).toBe(4 + 28);
    expect(end("0\r\n\r\n")).toBe(4 + 5);
    // What follows the body is not part of it (the caller decides what to make of it).
    expect(end("1\r\na\r\n0\r\n\r\nHTTP/1.1")).toBe(4 + 11);
  });
  it("says -1 for a body still coming, larger than the limit, or with extensions, trailers or bad framing", () => {
    for (const body of [
      'b\r\n{"ok":true}\r\n',
      'b\r\n{"ok":true}\r\n0\r\n',
      'b\r\n{"ok":',
      "3;name=x\r\nabc\r\n0\r\n\r\n",
      "3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n",
      "3\r\nabcd\r\n0\r\n\r\n",
      "3 \r\nabc\r\n0\r\n\r\n",
      "\r\nabc\r\n0\r\n\r\n",
      "-3\r\nabc\r\n0\r\n\r\n",
      "1000000\r\n",
      "3\nabc\r\n0\r\n\r\n",
    ]) {
      expect(end(body), JSON.stringify(body)).toBe(-1);
    }
    expect(end("3\r\nabc\r\n0\r\n\r\n", 10)).toBe(-1);
    expect(end("3\r\nabc\r\n0\r\n\r\n", 13)).toBe(4 + 13);
  });
});

describe("hasHeaderLine", () => {
  const scan = (text: string) => {
    const data = Buffer.from(text, "latin1");
    const head = scanRequestHead(data, data.indexOf("\r\n\r\n"), 1024)!;
    return { data, head };
  };
  it("finds a header the scan passed up, in any case, and not a prefix of another name", () => {
    const a = scan("POST /v2/e/run HTTP/1.1\r\nHost: x\r\nIdempotency-KEY: abc\r\nContent-Length: 0\r\n\r\n");
    expect(hasHeaderLine(a.data, a.head.lines, IDEMPOTENCY_KEY)).toBe(true);
    const b = scan("POST /v2/e/run HTTP/1.1\r\nHost: x\r\nIdempotency-Keys: abc\r\nX-Idempotency-Key: d\r\nContent-Length: 0\r\n\r\n");
    expect(hasHeaderLine(b.data, b.head.lines, IDEMPOTENCY_KEY)).toBe(false);
  });
});
