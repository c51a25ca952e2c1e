import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { socketGet } from "./socket-get.js";

const dir = mkdtempSync(join(tmpdir(), "svc-socket-get-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r) ?? r(undefined));
  server = undefined;
});

/** A server on 127.0.0.1 answering every request with `handle`; its address. */
async function serve(handle: (req: IncomingMessage, res: ServerResponse) => void, tls?: { key: Buffer; cert: Buffer }): Promise<string> {
  server = tls ? createTlsServer(tls) : createServer();
  server.on("request", handle);
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return `${tls ? "https" : "http"}://127.0.0.1:${port}`;
}

const body = randomBytes(10 * 1024 * 1024 + 123); // across three 4 MB buffers
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe("socketGet", () => {
  it("receives a body of a known length into its file, saying how far the file is whole as buffers land", async () => {
    let asked: IncomingMessage | undefined;
    const url = await serve((req, res) => {
      asked = req;
      res.writeHead(200, { "content-length": body.length, "x-repo-commit": "c0ffee" }).end(body);
    });
    const answer = await socketGet(new URL(`${url}/org/model/resolve/main/w.bin?x=1`), { authorization: "Bearer t", "accept-encoding": "identity" }, 5000);
    expect(answer.status).toBe(200);
    expect(answer.headers["x-repo-commit"]).toBe("c0ffee");
    expect(answer.plainBody).toBe(true);
    const path = join(dir, "whole");
    let seen = 0;
    const told: number[] = [];
    await answer.receive(
      path,
      0,
      (b) => ((seen += b.length), true),
      (n) => told.push(n),
    );
    expect(sha256(readFileSync(path))).toBe(sha256(body));
    expect(seen).toBe(body.length);
    expect(told).toEqual([...told].sort((a, b) => a - b));
    expect(told.length).toBeGreaterThanOrEqual(2); // two writes in flight may land in either order: then one tells both
    expect(told.at(-1)).toBe(body.length);
    expect(asked?.url).toBe("/org/model/resolve/main/w.bin?x=1");
    expect(asked?.headers.authorization).toBe("Bearer t");
  });

  it("continues a partial file from its offset, dropping what lay past it", async () => {
    let range: string | undefined;
    const url = await serve((req, res) => {
      range = req.headers.range;
      res.writeHead(206, { "content-length": 6, "content-range": "bytes 6-11/12" }).end("second");
    });
    const path = join(dir, "partial");
    writeFileSync(path, "first STALE TAIL");
    const answer = await socketGet(new URL(url), { range: "bytes=6-" }, 5000);
    expect(answer.status).toBe(206);
    await answer.receive(path, 6, () => true);
    expect(readFileSync(path, "utf8")).toBe("first second");
    expect(range).toBe("bytes=6-");
  });

  it("receives a body that ends with the connection (no length given)", async () => {
    const url = await serve((_req, res) => {
      res.socket?.write(`HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n`);
      res.socket?.end(body);
    });
    const answer = await socketGet(new URL(url), {}, 5000);
    const path = join(dir, "until-close");
    await answer.receive(path, 0, () => true);
    expect(statSync(path).size).toBe(body.length);
  });

  it("takes a body the connection delivered and closed on before it was asked for, and says a short one", async () => {
    const url = await serve((req, res) => {
      const whole = req.url === "/whole";
      res.writeHead(200, { "content-length": whole ? 5 : 100 });
      res.end(whole ? "hello" : "short");
      // The short one: its connection ends at once, 95 bytes before its length.
      if (!whole) res.socket?.destroy();
    });
    const whole = await socketGet(new URL(`${url}/whole`), {}, 5000);
    const short = await socketGet(new URL(`${url}/short`), {}, 5000);
    await new Promise((r) => setTimeout(r, 200));
    await whole.receive(join(dir, "early-whole"), 0, () => true);
    expect(readFileSync(join(dir, "early-whole"), "utf8")).toBe("hello");
    await expect(short.receive(join(dir, "early-short"), 0, () => true)).rejects.toThrow(/closed before the body ended/);
    expect(readFileSync(join(dir, "early-short"), "utf8")).toBe("short");
  });

  it("skips an informational answer (103 Early Hints) for the one after it", async () => {
    const url = await serve((_req, res) => {
      res.writeEarlyHints({ link: "</w.bin>; rel=preload" });
      res.writeHead(200, { "content-length": 5 }).end("hello");
    });
    const answer = await socketGet(new URL(url), {}, 5000);
    expect(answer.status).toBe(200);
    const path = join(dir, "after-hints");
    await answer.receive(path, 0, () => true);
    expect(readFileSync(path, "utf8")).toBe("hello");
  });

  it("says a chunked body is not one it takes, and refuses to receive it", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "transfer-encoding": "chunked" });
      res.end("chunked bytes");
    });
    const answer = await socketGet(new URL(url), {}, 5000);
    expect(answer.plainBody).toBe(false);
    await expect(answer.receive(join(dir, "chunked"), 0, () => true)).rejects.toThrow(/chunked or encoded/);
    answer.close();
  });

  it("keeps what arrived when the connection breaks mid-body, then rejects", async () => {
    const sent = 6 * 1024 * 1024;
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-length": body.length });
      res.write(body.subarray(0, sent), () => setTimeout(() => res.socket?.destroy(), 100));
    });
    const answer = await socketGet(new URL(url), {}, 5000);
    const path = join(dir, "broken");
    await expect(answer.receive(path, 0, () => true)).rejects.toThrow(/closed before the body ended/);
    expect(readFileSync(path).equals(body.subarray(0, sent))).toBe(true);
  });

  it("stops at what `take` refuses, writing nothing of it", async () => {
    const url = await serve((_req, res) => res.writeHead(200, { "content-length": body.length }).end(body));
    const answer = await socketGet(new URL(url), {}, 5000);
    const path = join(dir, "refused");
    let seen = 0;
    await answer.receive(path, 0, (b) => {
      seen += b.length;
      return seen <= 1024 * 1024;
    });
    const kept = statSync(path).size;
    expect(kept).toBeLessThanOrEqual(1024 * 1024);
    expect(readFileSync(path).equals(body.subarray(0, kept))).toBe(true);
  });

  it("breaks off a body that goes silent for its idle time", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-length": body.length });
      res.write(body.subarray(0, 1000));
    });
    const answer = await socketGet(new URL(url), {}, 300);
    await expect(answer.receive(join(dir, "silent"), 0, () => true)).rejects.toThrow(/no byte for/);
  });

  it("rejects what is not an HTTP answer, and a connection refused", async () => {
    server = createServer();
    server.on("connection", (s: Socket) => s.end("SSH-2.0-OpenSSH\r\n\r\n"));
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
    const { port } = server.address() as AddressInfo;
    await expect(socketGet(new URL(`http://127.0.0.1:${port}/`), {}, 5000)).rejects.toThrow(/not an HTTP\/1\.1 answer/);
    await expect(socketGet(new URL("http://127.0.0.1:1/"), {}, 5000)).rejects.toThrow(/ECONNREFUSED/);
    await expect(socketGet(new URL(`http://127.0.0.1:${port}/`), { authorization: "Bearer a\r\nx: y" }, 5000)).rejects.toThrow(/line break/);
  });

  it("receives over TLS, checking the server's certificate", async () => {
    const key = join(dir, "key.pem");
    const cert = join(dir, "cert.pem");
    const request = "req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1";
    execFileSync("openssl", [...request.split(" "), "-keyout", key, "-out", cert], { stdio: "ignore" });
    const url = await serve((_req, res) => res.writeHead(200, { "content-length": body.length }).end(body), {
      key: readFileSync(key),
      cert: readFileSync(cert),
    });
    expect(url).toMatch(/^https:/);
    await expect(socketGet(new URL(url), {}, 5000)).rejects.toThrow(/self.signed|certificate/i);
    const answer = await socketGet(new URL(url), {}, 5000, readFileSync(cert));
    const path = join(dir, "over-tls");
    await answer.receive(path, 0, () => true);
    expect(sha256(readFileSync(path))).toBe(sha256(body));
  });
});
