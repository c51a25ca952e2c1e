// Small keep-alive HTTP helpers shared by the benches (node:http, so the client costs the same for the
// baseline and for the measured path).
import http from "node:http";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

export const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/**
 * One request on the shared keep-alive agent (or `agent`): `{ status, body }`. With `discard`, the body is read and dropped
 * (`body` is then its length in bytes, as a number): large answers cost the client no copying or decoding.
 */
export function request(url, { method = "GET", headers = {}, body, discard = false, agent: via = agent } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
    const req = http.request(
      url,
      { method, agent: via, headers: { "content-type": "application/json", ...(data ? { "content-length": Buffer.byteLength(data) } : {}), ...headers } },
      (res) => {
        if (discard) {
          let bytes = 0;
          res.on("data", (c) => (bytes += c.length));
          res.on("end", () => resolve({ status: res.statusCode, body: bytes }));
          res.on("error", reject);
          return;
        }
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    if (data) req.write(data);
    req.end();
  });
}

/**
 * A plain loopback HTTP server answering every request with a tiny JSON body: the baseline. `GET /bytes/<n>`
 * answers n bytes instead (application/octet-stream, with their length), one buffer made once per size: what
 * the proxies in front of it (bench/peers-lb.bench.mjs) pass on for large answers.
 */
export async function startPlainServer() {
  const bodies = new Map();
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url.startsWith("/bytes/")) {
        const size = Math.min(Number.parseInt(req.url.slice(7), 10) || 0, 64 << 20);
        let bytes = bodies.get(size);
        if (!bytes) bodies.set(size, (bytes = Buffer.alloc(size, 120)));
        res.writeHead(200, { "content-type": "application/octet-stream", "content-length": size });
        res.end(bytes);
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"ok":true}');
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(r);
      }),
  };
}

/**
 * A bench helper in a process of its own (`script`, next to this file, given `args`) that prints its URL on its
 * first line: `{ child, url }`; its stdin stays open for it to read.
 */
export async function startChildServer(script, args = []) {
  const child = spawn(process.execPath, [fileURLToPath(new URL(script, import.meta.url)), ...args], { stdio: ["pipe", "pipe", "inherit"] });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    const onData = (d) => {
      out += d;
      const m = /^(http:\/\/\S+)\n/.exec(out);
      if (!m) return;
      // Anything it prints afterwards is read and dropped (a long-lived child must not fill the pipe).
      child.stdout.removeListener("data", onData);
      child.stdout.resume();
      resolve(m[1]);
    };
    child.stdout.on("data", onData);
    child.once("exit", (code) => reject(new Error(`${script} exited ${code}`)));
  });
  return { child, url };
}

/** Ends a child of startChildServer (its stdin) and waits for it to exit. */
function closeChild(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.stdin.end();
  });
}

/** The same plain server in a child process (plain-server-child.mjs): `{ url, close() }`. */
export async function startPlainServerProcess() {
  const { child, url } = await startChildServer("./plain-server-child.mjs");
  return { url, close: () => closeChild(child) };
}

/** svc's service in a child process (svc-child.mjs `kind` `arg`): `{ url, close() }`, `url` its endpoint's. */
export async function startSvcChild(kind, arg) {
  const { child, url } = await startChildServer("./svc-child.mjs", arg === undefined ? [kind] : [kind, arg]);
  return { url, close: () => closeChild(child) };
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Run `task` with `concurrency` loops until `total` tasks ran; returns elapsed ms. */
export async function pool(total, concurrency, task) {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++;
        await task(i);
      }
    }),
  );
  return performance.now() - started;
}
