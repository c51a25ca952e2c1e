import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { UnreachableError, errorMessage } from "./errors.js";
import { JobsClient } from "./jobs-client.js";
import { HttpConnectionError, KeepAliveClient } from "./keep-alive-client.js";

const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A node:http server on 127.0.0.1 counting the connections it accepted: `{ url, connections() }`. */
async function httpServer(handler: Parameters<typeof createHttpServer>[1]): Promise<{ url: string; server: HttpServer; connections: () => number }> {
  const server = createHttpServer(handler);
  let accepted = 0;
  server.on("connection", () => accepted++);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closers.push(() => new Promise((r) => (server.closeAllConnections(), server.close(r))));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server, connections: () => accepted };
}

/** A TCP server answering each connection with `onSocket` (raw bytes, for framings node:http never writes). */
async function rawServer(
  onSocket: (socket: Socket) => void,
): Promise<{ url: string; server: NetServer; open: () => number; peak: () => number; accepted: () => number }> {
  let open = 0;
  let accepted = 0;
  let peak = 0;
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    accepted++;
    peak = Math.max(peak, ++open);
    socket.on("close", () => (open--, sockets.delete(socket)));
    socket.on("error", () => undefined); // the client hanging up mid-answer is part of some tests
    onSocket(socket);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closers.push(() => new Promise((r) => (sockets.forEach((s) => s.destroy()), server.close(r))));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server, open: () => open, peak: () => peak, accepted: () => accepted };
}

/** Each request a socket sends (its head, split at the blank line) handed to `answer`. */
function onRequests(socket: Socket, answer: (head: string, socket: Socket) => void): void {
  let text = "";
  socket.on("data", (d) => {
    text += d.toString("latin1");
    for (let end = text.indexOf("\r\n\r\n"); end >= 0; end = text.indexOf("\r\n\r\n")) {
      const head = text.slice(0, end);
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (text.length < end + 4 + length) return;
      text = text.slice(end + 4 + length);
      answer(head, socket);
    }
  });
}

function client(url: string, options?: ConstructorParameters<typeof KeepAliveClient>[1]): KeepAliveClient {
  const c = new KeepAliveClient(url, options);
  closers.push(() => c.close());
  return c;
}

describe("KeepAliveClient", () => {
  it("sends the method, path, headers and body, and reads a JSON answer of known length; calls share one connection", async () => {
    const seen: Array<{ method?: string; url?: string; auth?: string; body: string }> = [];
    const { url, connections } = await httpServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
        res.writeHead(201, { "content-type": "application/json", "content-length": 11 });
        res.end('{"ok":true}');
      });
    });
    const http = client(url);
    for (let i = 0; i < 3; i++) {
      const answer = await http.request({
        method: "POST",
        path: `/v2/e/run?i=${i}`,
        headers: { authorization: "Bearer k" },
        body: JSON.stringify({ input: { i } }),
      });
      expect(answer.status).toBe(201);
      expect(answer.statusText).toBe("Created");
      expect(answer.headers["content-type"]).toBe("application/json");
      expect(JSON.parse(answer.body.toString())).toEqual({ ok: true });
    }
    expect(seen).toEqual([0, 1, 2].map((i) => ({ method: "POST", url: `/v2/e/run?i=${i}`, auth: "Bearer k", body: `{"input":{"i":${i}}}` })));
    expect(connections()).toBe(1);
  });

  it("reads chunked answers delivered a few bytes at a time, with extensions and trailers, and keeps the connection", async () => {
    const body = "0123456789".repeat(100);
    const raw = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${(300).toString(16)};ext=1\r\n${body.slice(0, 300)}\r\n${(700).toString(16)}\r\n${body.slice(300)}\r\n0\r\nX-Trailer: yes\r\n\r\n`;
    const { url, peak } = await rawServer((socket) =>
      onRequests(socket, async (_head, s) => {
        for (let at = 0; at < raw.length; at += 7) {
          s.write(raw.slice(at, at + 7));
          if (at % 70 === 0) await new Promise((r) => setImmediate(r));
        }
      }),
    );
    const http = client(url);
    for (let i = 0; i < 2; i++) {
      const answer = await http.request({ method: "GET", path: "/" });
      expect(answer.body.toString()).toBe(body);
    }
    expect(peak()).toBe(1);
  });

  it("reads an answer delimited by the server's close, and a large one of known length over many reads", async () => {
    const closing = await rawServer((socket) => onRequests(socket, (_h, s) => s.end("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end")));
    expect((await client(closing.url).request({ method: "GET", path: "/" })).body.toString()).toBe("until the end");

    const big = Buffer.alloc(5 << 20, 7);
    const { url } = await httpServer((_req, res) => res.writeHead(200, { "content-length": big.length }).end(big));
    const answer = await client(url).request({ method: "GET", path: "/big" });
    expect(answer.body.length).toBe(big.length);
    expect(answer.body.equals(big)).toBe(true);
  });

  it("skips a 100 Continue, reads HEAD and 204 answers without a body, and goes on on the same connection", async () => {
    const { url, peak } = await rawServer((socket) =>
      onRequests(socket, (head, s) => {
        if (head.startsWith("HEAD")) s.write("HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n");
        else if (head.startsWith("DELETE")) s.write("HTTP/1.1 204 No Content\r\n\r\n");
        else s.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi");
      }),
    );
    const http = client(url);
    expect((await http.request({ method: "HEAD", path: "/" })).headers["content-length"]).toBe("99");
    expect((await http.request({ method: "DELETE", path: "/x" })).status).toBe(204);
    const answer = await http.request({ method: "POST", path: "/" });
    expect([answer.status, answer.body.toString()]).toEqual([200, "hi"]);
    expect(peak()).toBe(1);
  });

  it("opens a new connection after `Connection: close`, and after the server closed an idle one", async () => {
    let n = 0;
    const { url, accepted } = await rawServer((socket) =>
      onRequests(socket, (_h, s) => {
        n++;
        if (n === 1) s.write("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 1\r\n\r\na");
        else if (n === 2)
          s.end("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nb"); // then hangs up while idle
        else s.write("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nc");
      }),
    );
    const http = client(url);
    expect((await http.request({ method: "GET", path: "/" })).body.toString()).toBe("a");
    expect((await http.request({ method: "GET", path: "/" })).body.toString()).toBe("b");
    await new Promise((r) => setTimeout(r, 50));
    expect((await http.request({ method: "GET", path: "/" })).body.toString()).toBe("c");
    // Three connections: neither the closed one nor the one the server hung up was written to again (that call
    // would have failed).
    expect(accepted()).toBe(3);
  });

  it("sends a read again on a new connection when a kept one closes unanswered; never a write", async () => {
    // Each connection answers its first request and hangs up on the second, as a server closing an idle
    // connection just as the client writes to it.
    const { url, accepted } = await rawServer((socket) => {
      let n = 0;
      onRequests(socket, (_h, s) => (++n === 1 ? s.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok") : s.destroy()));
    });
    const http = client(url);
    await http.request({ method: "GET", path: "/" });
    const again = await http.request({ method: "GET", path: "/status" });
    expect([again.status, again.body.toString(), accepted()]).toEqual([200, "ok", 2]);
    const write = await http.request({ method: "POST", path: "/run", body: "{}" }).catch((e: unknown) => e);
    expect(write).toBeInstanceOf(HttpConnectionError);
    expect(accepted()).toBe(2); // not sent again
  });

  it("does not reuse an idle connection past the keep-alive timeout the server announced", async () => {
    const { url, connections } = await httpServer((_req, res) => res.writeHead(200, { "keep-alive": "timeout=1", "content-length": 0 }).end());
    const http = client(url);
    await http.request({ method: "GET", path: "/" });
    await http.request({ method: "GET", path: "/" });
    // timeout=1 leaves no safe time to reuse (the client keeps a second's margin): each call had its own.
    expect(connections()).toBe(2);
  });

  it("opens at most maxSockets connections; the calls beyond wait and are all answered", async () => {
    const { url, peak } = await rawServer((socket) =>
      onRequests(socket, (_h, s) => setTimeout(() => s.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"), 30)),
    );
    const http = client(url, { maxSockets: 2 });
    const answers = await Promise.all(Array.from({ length: 7 }, () => http.request({ method: "GET", path: "/" })));
    expect(answers.map((a) => a.body.toString())).toEqual(Array(7).fill("ok"));
    expect(peak()).toBe(2);
  });

  it("fails with the system's code when nothing listens, and the job client says it cannot reach the service", async () => {
    const { url, server } = await rawServer(() => undefined);
    await new Promise((r) => server.close(r));
    const err = await client(url)
      .request({ method: "GET", path: "/" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HttpConnectionError);
    expect((err as HttpConnectionError).code).toBe("ECONNREFUSED");
    const jobsErr = await new JobsClient(`${url}/v2/e1`, "k").run({ a: 1 }).catch((e: unknown) => e);
    expect(jobsErr).toBeInstanceOf(UnreachableError);
    expect(errorMessage(jobsErr)).toContain(`${url}/v2/e1/run`);
  });

  it("fails a call whose server goes silent (timeoutMs), and one aborted by its signal; neither connection is reused", async () => {
    const { url, peak } = await rawServer((socket) =>
      onRequests(socket, (head, s) => head.includes("/answer") && s.write("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\ny")),
    );
    const http = client(url, { maxSockets: 1 });
    const silent = await http.request({ method: "GET", path: "/silent", timeoutMs: 150 }).catch((e: unknown) => e);
    expect(silent).toBeInstanceOf(HttpConnectionError);
    expect((silent as HttpConnectionError).code).toBe("ETIMEDOUT");
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("stopped by the caller")), 50);
    await expect(http.request({ method: "GET", path: "/silent", signal: controller.signal })).rejects.toThrow("stopped by the caller");
    // An answer still works, on a fresh connection: the two before were closed, never handed to it.
    expect((await http.request({ method: "GET", path: "/answer" })).body.toString()).toBe("y");
    expect(peak()).toBe(1);
  });

  it("fails a garbled answer, and one whose connection breaks midway, instead of waiting", async () => {
    const garbled = await rawServer((socket) => onRequests(socket, (_h, s) => s.write("SMTP ready\r\n\r\n")));
    await expect(client(garbled.url).request({ method: "GET", path: "/" })).rejects.toThrow(/not an HTTP\/1.1 answer/);
    const broken = await rawServer((socket) => onRequests(socket, (_h, s) => s.end("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part")));
    await expect(client(broken.url).request({ method: "GET", path: "/" })).rejects.toThrow(/closed the connection before its answer was whole/);
  });

  it("refuses header values and paths that would split the request", async () => {
    const http = client("http://127.0.0.1:9");
    await expect(http.request({ method: "GET", path: "/", headers: { authorization: "Bearer a\r\nx-evil: 1" } })).rejects.toThrow(TypeError);
    await expect(http.request({ method: "GET", path: "/a b HTTP/1.1\r\n" })).rejects.toThrow(TypeError);
  });

  it("speaks https through node:tls", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-tls-"));
    closers.push(() => rmSync(dir, { recursive: true, force: true }));
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
      ],
      { stdio: "ignore" },
    );
    const cert = readFileSync(join(dir, "cert.pem"));
    const server = createHttpsServer({ key: readFileSync(join(dir, "key.pem")), cert }, (req, res) =>
      res.writeHead(200, { "content-length": 5 }).end(req.headers.host === `localhost:${port}` ? "hello" : "wrong"),
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    closers.push(() => new Promise((r) => (server.closeAllConnections(), server.close(r))));
    const port = (server.address() as { port: number }).port;
    const answer = await client(`https://localhost:${port}`, { tls: { ca: cert } }).request({ method: "GET", path: "/" });
    expect(answer.body.toString()).toBe("hello");
    // Without the certificate's CA the connection is refused, as https clients do.
    await expect(client(`https://localhost:${port}`).request({ method: "GET", path: "/" })).rejects.toThrow(HttpConnectionError);
  });

  it("does not keep a process alive with its idle connections", async () => {
    const { url } = await httpServer((_req, res) => res.writeHead(200, { "content-length": 2 }).end("ok"));
    const script = `import { KeepAliveClient } from ${JSON.stringify(new URL("./keep-alive-client.ts", import.meta.url).pathname)};
      const a = await new KeepAliveClient(${JSON.stringify(url)}).request({ method: "GET", path: "/" });
      console.log(a.body.toString());`;
    const started = Date.now();
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    const code = await new Promise((r) => child.on("exit", r));
    expect([code, out.trim()]).toEqual([0, "ok"]);
    expect(Date.now() - started).toBeLessThan(3900); // before the 4 s an idle connection is kept
  });
});
