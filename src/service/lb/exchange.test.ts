// The worker side of a proxied request (openExchange on a pooled connection) against a scripted worker: a real
// TCP server on 127.0.0.1 that answers each request with the bytes, pieces and pauses a test gives it.
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScannedResponse } from "./head-scan.js";
import { openExchange, type Downstream } from "./exchange.js";
import type { ProxyOutcome } from "./proxy.js";
import { parseAddress, UpstreamPool } from "./upstream.js";

type Piece = string | Buffer | { wait: number } | "close";
let script: Piece[][] = [];
const connections = new Set<Socket>();
let server: Server;
let address: ReturnType<typeof parseAddress>;

beforeAll(async () => {
  server = createServer((socket) => {
    connections.add(socket);
    socket.on("close", () => connections.delete(socket));
    socket.on("data", async () => {
      for (const piece of script.shift() ?? []) {
        if (piece === "close") return void socket.destroy();
        if (typeof piece === "object" && !Buffer.isBuffer(piece)) await new Promise((r) => setTimeout(r, piece.wait));
        else socket.write(piece);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  address = parseAddress(`http://127.0.0.1:${port}`);
});
afterAll(() => server.close());

/** A downstream that records what reached it; `whole` only when `acceptsWhole`. */
function recorder(acceptsWhole: boolean) {
  const seen = { wholes: 0, heads: [] as number[], body: [] as Buffer[], lines: [] as string[], failed: undefined as string | undefined, ended: false };
  const down: Downstream = {
    gone: false,
    head: (status) => void seen.heads.push(status),
    flushHead: () => {},
    write: (chunk) => (seen.body.push(Buffer.from(chunk)), true),
    end: (chunk) => {
      if (chunk) seen.body.push(Buffer.from(chunk));
      seen.ended = true;
    },
    onDrain: () => undefined,
    onGone: () => undefined,
    workerFailed: (_id, detail) => void (seen.failed = detail),
  };
  if (acceptsWhole) {
    down.whole = (answer: ScannedResponse, data: Buffer, bodyStart: number) => {
      seen.wholes++;
      seen.heads.push(answer.status);
      for (let i = 0; i < answer.lines.length; i += 2)
        seen.lines.push(
          ...data
            .toString("latin1", answer.lines[i], answer.lines[i + 1])
            .split("\r\n")
            .filter(Boolean),
        );
      seen.body.push(Buffer.from(data.subarray(bodyStart, bodyStart + answer.contentLength)));
      seen.ended = true;
    };
  }
  return { down, seen };
}

async function exchange(
  pool: UpstreamPool,
  acceptsWhole: boolean,
  pieces: Piece[],
): Promise<{ outcome: ProxyOutcome; seen: ReturnType<typeof recorder>["seen"]; socket: Socket }> {
  script.push(pieces);
  const { down, seen } = recorder(acceptsWhole);
  const ex = openExchange(pool, down, { upstream: address, workerId: "w1" }, false);
  ex.socket.write("GET / HTTP/1.1\r\nhost: w\r\n\r\n");
  ex.sent();
  return { outcome: await ex.outcome, seen, socket: ex.socket };
}

const ok = (body: string, extra = "") => `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

/**
 * A downstream that takes long answers by their bytes (`long`, as the LB front does) and keeps each piece it is
 * given as it is (no copy), so that a piece overwritten after it was given shows. `holds`: what `holding` says
 * (the caller's socket has not written the pieces out yet); `slow`: `write` asks the worker to wait once.
 */
function longRecorder({ holds, slow = false }: { holds: boolean; slow?: boolean }) {
  const seen = {
    longs: 0,
    wholes: 0,
    heads: [] as number[],
    lines: [] as string[],
    first: Buffer.alloc(0),
    pieces: [] as Buffer[],
    ended: false,
    failed: undefined as string | undefined,
    drain: undefined as (() => void) | undefined,
  };
  let asked = false;
  const down: Downstream = {
    gone: false,
    head: (status) => void seen.heads.push(status),
    flushHead: () => {},
    write: (chunk) => {
      seen.pieces.push(chunk);
      if (!slow || asked) return true;
      asked = true;
      return false;
    },
    end: (chunk) => {
      if (chunk) seen.pieces.push(chunk);
      seen.ended = true;
    },
    onDrain: (listener) => void (seen.drain = listener),
    onGone: () => undefined,
    workerFailed: (_id, detail) => void (seen.failed = detail),
    whole: () => void seen.wholes++,
    long: (answer, data, bodyStart, bodyEnd) => {
      seen.longs++;
      seen.heads.push(answer.status);
      for (let i = 0; i < answer.lines.length; i += 2)
        seen.lines.push(
          ...data
            .toString("latin1", answer.lines[i], answer.lines[i + 1])
            .split("\r\n")
            .filter(Boolean),
        );
      seen.first = Buffer.from(data.subarray(bodyStart, bodyEnd));
      return true;
    },
    holding: () => holds,
  };
  return { down, seen };
}

async function longExchange(pool: UpstreamPool, down: Downstream, pieces: Piece[]) {
  script.push(pieces);
  const ex = openExchange(pool, down, { upstream: address, workerId: "w1" }, false);
  ex.socket.write("GET / HTTP/1.1\r\nhost: w\r\n\r\n");
  ex.sent();
  return { outcome: await ex.outcome, socket: ex.socket };
}

/** 1 MiB whose every 4-byte word says its offset: a piece put in the wrong place, or overwritten, shows. */
const counted = (bytes: number) => {
  const body = Buffer.alloc(bytes);
  for (let i = 0; i + 4 <= bytes; i += 4) body.writeUInt32LE(i, i);
  return body;
};
const longHead = (length: number, extra = "") => `HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: ${length}\r\n${extra}\r\n`;
/** `body` sent in pieces of `size` bytes, a pause between some, so that it arrives in many reads. */
const inPieces = (body: Buffer, size: number): Piece[] => {
  const out: Piece[] = [];
  for (let at = 0; at < body.length; at += size) out.push(body.subarray(at, at + size), ...(at % (size * 4) === 0 ? [{ wait: 2 }] : []));
  return out;
};

describe("a long answer of known length, passed on by its bytes", () => {
  const body = counted(1 << 20);

  it("goes down as the worker's head and the pieces read, each a view of the connection's one read buffer while nothing holds it", async () => {
    const pool = new UpstreamPool();
    const { down, seen } = longRecorder({ holds: false });
    const { outcome, socket } = await longExchange(pool, down, [longHead(body.length, "Connection: keep-alive\r\nx-app: a\r\n"), ...inPieces(body, 48 * 1024)]);
    expect(outcome).toBe("ok");
    expect([seen.longs, seen.wholes, seen.heads, seen.lines, seen.ended]).toEqual([
      1,
      0,
      [200],
      ["content-type: application/octet-stream", `content-length: ${body.length}`, "x-app: a"],
      true,
    ]);
    expect(seen.pieces.length).toBeGreaterThan(4);
    // No copy and no new buffer a read: every piece is a view of the same memory, read into again and again.
    expect(new Set(seen.pieces.map((p) => p.buffer)).size).toBe(1);
    // (Checked piece by piece as each came: the later reads overwrote the earlier ones' memory, as they may.)
    const again = await longExchange(pool, longRecorder({ holds: false }).down, [ok("next")]);
    expect(again.socket).toBe(socket);
    pool.destroy();
  });

  it("never reads into a buffer whose piece the caller's side still holds: every byte arrives intact", async () => {
    const pool = new UpstreamPool();
    const { down, seen } = longRecorder({ holds: true });
    const { outcome } = await longExchange(pool, down, [longHead(body.length), ...inPieces(body, 48 * 1024)]);
    expect(outcome).toBe("ok");
    // The pieces were kept as given (views, not copies): intact only if no later read went into their memory.
    expect(Buffer.concat([seen.first, ...seen.pieces]).equals(body)).toBe(true);
    pool.destroy();
  });

  it("stops reading the worker while the caller catches up, and goes on when it has", async () => {
    const pool = new UpstreamPool();
    const { down, seen } = longRecorder({ holds: true, slow: true });
    script.push([longHead(body.length), ...inPieces(body, 48 * 1024)]);
    const ex = openExchange(pool, down, { upstream: address, workerId: "w1" }, false);
    ex.socket.write("GET / HTTP/1.1\r\nhost: w\r\n\r\n");
    ex.sent();
    await until(() => seen.drain !== undefined);
    await new Promise((r) => setTimeout(r, 100));
    // Waiting for the caller: the worker's connection is not read, and the answer is not over.
    expect([ex.socket.isPaused(), ex.settled, seen.ended]).toEqual([true, false, false]);
    seen.drain!();
    expect(await ex.outcome).toBe("ok");
    expect(Buffer.concat([seen.first, ...seen.pieces]).equals(body)).toBe(true);
    pool.destroy();
  });

  it("a worker that sends more than its length: the length goes down, and the connection is not reused", async () => {
    const pool = new UpstreamPool();
    const small = counted(100_000);
    const { down, seen } = longRecorder({ holds: false });
    const { outcome, socket } = await longExchange(pool, down, [
      longHead(small.length),
      small.subarray(0, 60_000),
      { wait: 20 },
      Buffer.concat([small.subarray(60_000), Buffer.from("HTTP/1.1 200 OK\r\n")]),
    ]);
    expect(outcome).toBe("ok");
    expect(Buffer.concat([seen.first, ...seen.pieces.map((p) => Buffer.from(p))]).length).toBe(small.length);
    const after = await longExchange(pool, longRecorder({ holds: false }).down, [ok("fresh")]);
    expect(after.socket).not.toBe(socket);
    pool.destroy();
  });

  it("a worker that dies in the middle of it cuts the answer short: a failure after the head, no end", async () => {
    const pool = new UpstreamPool();
    const { down, seen } = longRecorder({ holds: false });
    const { outcome } = await longExchange(pool, down, [longHead(body.length), body.subarray(0, 200_000), { wait: 20 }, "close"]);
    expect(outcome).toBe("worker-failed");
    expect([seen.longs, seen.ended]).toEqual([1, false]);
    expect(seen.failed).toMatch(/The worker w1 failed while handling the request/);
    pool.destroy();
  });
});

async function until(condition: () => boolean, ms = 5000): Promise<void> {
  for (const deadline = Date.now() + ms; !condition(); ) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("a pooled exchange with a worker", () => {
  it("hands a whole small answer on at once, without the worker's connection headers, and reuses the connection", async () => {
    const pool = new UpstreamPool();
    script = [];
    const first = await exchange(pool, true, [ok("hello", "Connection: keep-alive\r\nKeep-Alive: timeout=65\r\nRateLimit: x\r\n")]);
    expect(first.outcome).toBe("ok");
    expect(first.seen).toMatchObject({ wholes: 1, heads: [200], lines: ["content-type: text/plain", "content-length: 5"], ended: true });
    expect(Buffer.concat(first.seen.body).toString()).toBe("hello");
    const second = await exchange(pool, true, [ok("again")]);
    expect(second.socket).toBe(first.socket);
    expect(Buffer.concat(second.seen.body).toString()).toBe("again");
    pool.destroy();
  });

  it("waits for an answer that comes in pieces (the head split too) and hands it on whole", async () => {
    const pool = new UpstreamPool();
    const text = ok("x".repeat(3000));
    const { outcome, seen } = await exchange(pool, true, [
      text.slice(0, 20),
      { wait: 30 },
      text.slice(20, 90),
      { wait: 30 },
      text.slice(90, 2000),
      { wait: 30 },
      text.slice(2000),
    ]);
    expect([outcome, seen.wholes, seen.heads]).toEqual(["ok", 1, [200]]);
    expect(Buffer.concat(seen.body).toString()).toBe("x".repeat(3000));
    pool.destroy();
  });

  it("hands a small chunked answer whole in one read on as its bytes, its chunks as they came, and reuses the connection", async () => {
    const pool = new UpstreamPool();
    const body = '5\r\n{"ok"\r\n6\r\n:true}\r\n0\r\n\r\n';
    const first = await exchange(pool, true, [
      `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n${body}`,
    ]);
    expect(first.seen).toMatchObject({ wholes: 1, heads: [200], lines: ["content-type: application/json", "transfer-encoding: chunked"], ended: true });
    expect(Buffer.concat(first.seen.body).toString()).toBe(body);
    const second = await exchange(pool, true, [ok("next")]);
    expect(second.socket).toBe(first.socket);
    // With a trailer, the parser reads it (and the caller gets the body re-chunked by it).
    const trailer = await exchange(pool, true, ["HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nx-sum: 1\r\n\r\n"]);
    expect([trailer.outcome, trailer.seen.wholes, Buffer.concat(trailer.seen.body).toString()]).toEqual(["ok", 0, "hi"]);
    pool.destroy();
  });

  it("passes large, streamed and closing answers through the parser, bytes intact", async () => {
    const pool = new UpstreamPool();
    const big = Buffer.alloc(200_000, 7);
    const large = await exchange(pool, true, [`HTTP/1.1 200 OK\r\ncontent-length: ${big.length}\r\n\r\n`, big]);
    expect([large.outcome, large.seen.wholes, large.seen.heads]).toEqual(["ok", 0, [200]]);
    expect(Buffer.concat(large.seen.body).equals(big)).toBe(true);
    const chunked = await exchange(pool, true, ["HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n", { wait: 20 }, "2\r\nde\r\n0\r\n\r\n"]);
    expect([chunked.outcome, chunked.seen.wholes, Buffer.concat(chunked.seen.body).toString()]).toEqual(["ok", 0, "abcde"]);
    // No whole answers for a downstream that cannot take them (node:http's ServerResponse).
    const plain = await exchange(pool, false, [ok("plain")]);
    expect([plain.outcome, plain.seen.wholes, Buffer.concat(plain.seen.body).toString()]).toEqual(["ok", 0, "plain"]);
    // Connection: close: answered, and the connection is not reused.
    const closing = await exchange(pool, true, [ok("bye", "Connection: close\r\n")]);
    expect([closing.outcome, Buffer.concat(closing.seen.body).toString()]).toEqual(["ok", "bye"]);
    const after = await exchange(pool, true, [ok("new")]);
    expect(after.socket).not.toBe(closing.socket);
    pool.destroy();
  });

  it("a worker that dies before its answer is whole gives a failure and nothing else downstream", async () => {
    const pool = new UpstreamPool();
    const { outcome, seen } = await exchange(pool, true, ["HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", { wait: 20 }, "close"]);
    expect(outcome).toBe("worker-failed");
    expect(seen.failed).toMatch(/The worker w1 failed while handling the request .*it was not retried/);
    expect([seen.wholes, seen.heads, seen.ended]).toEqual([0, [], false]);
    pool.destroy();
  });
});

describe("a streamed answer (no length)", () => {
  /** A downstream that records the order of the calls it gets. */
  function calls() {
    const order: string[] = [];
    const down: Downstream = {
      gone: false,
      head: () => void order.push("head"),
      flushHead: () => void order.push("flushHead"),
      write: (chunk) => (order.push(`write ${chunk.toString("latin1")}`), true),
      end: (chunk) => void order.push(`end ${chunk?.toString("latin1") ?? ""}`),
      onDrain: () => undefined,
      onGone: () => undefined,
      workerFailed: (_id, detail) => void order.push(`failed ${detail}`),
    };
    return { down, order };
  }
  const chunkedHead = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";

  it("read whole at once goes down as its head and one end with its body: the caller gets one write, not one for the head", async () => {
    const pool = new UpstreamPool();
    const { down, order } = calls();
    const { outcome } = await longExchange(pool, down, [`${chunkedHead}b\r\n{"ok":true}\r\n0\r\n\r\n`]);
    expect(outcome).toBe("ok");
    expect(order).toEqual(["head", 'end {"ok":true}']);
    pool.destroy();
  });

  it("whose first piece comes later begins at once: its head is flushed at the end of the read it came in", async () => {
    const pool = new UpstreamPool();
    const { down, order } = calls();
    const { outcome } = await longExchange(pool, down, [chunkedHead, { wait: 50 }, "3\r\nabc\r\n", { wait: 50 }, "0\r\n\r\n"]);
    expect(outcome).toBe("ok");
    expect(order).toEqual(["head", "flushHead", "write abc", "end "]);
    pool.destroy();
  });
});
