// Slow clients against a real `svc server` (node bin/svc.js, process workers) serving a job with an 8 MB output:
// 60 connections ask for its status and never read the answer, 20 log followers never read theirs. The service's
// memory (VmRSS of its process) stays bounded, /health answers quickly for everyone else, a normal reader gets the
// whole output, the follower cap answers 429, the non-readers are dropped after the stall timeout, and the
// memory comes back once they are gone. docs/service.md ("Slow clients") has the limits.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "slow-clients-admin-key";
const OUTPUT_BYTES = 8 * 1024 * 1024;
const STATUS_READERS = 60;
const FOLLOWERS = 20;
/** The service's send stall timeout in this test (SVC_SEND_STALL_MS; 30 s by default). */
const STALL_MS = 8_000;
/** How much the service's RSS may grow while the slow clients hold on (before the limits it grew by ~550-900 MB). */
const RSS_GROWTH_MAX = 200 * 1024 * 1024;
/** ...and how much above the baseline it may stay once they are gone (the heap shrinks lazily; before: +550 MB). */
const RSS_AFTER_MAX = 150 * 1024 * 1024;
const HEALTH_MAX_MS = 1_000;

let work: string;
let server: ChildProcess;
let url: string;
let endpointUrl: string;
let endpointId: string;
let jobId: string;
let expected: string;
let baseline: number;
const sockets: Array<{ socket: Socket; openedAt: number; closedAt?: number; received: number; kind: "status" | "follower" }> = [];

/** VmRSS of the service process, in bytes. */
function rss(): number {
  const line = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${server.pid}/status`, "utf8"));
  return Number(line![1]) * 1024;
}

function startServer(dataDir: string): Promise<string> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: KEY, SVC_SEND_STALL_MS: String(STALL_MS), SVC_MAX_FOLLOWERS_PER_USER: String(FOLLOWERS) };
  delete env.SVC_API_URL;
  server = spawn(process.execPath, [bin, "server", "--port", "0", "--data-dir", dataDir, "--workers", "process"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  server.stderr!.on("data", (d) => (stderr += d.toString()));
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${stderr}`)), 30_000);
    let out = "";
    server.stdout!.on("data", (d) => {
      out += d.toString();
      const line = /^(http:\/\/\S+)\n/.exec(out);
      if (line) {
        clearTimeout(timer);
        resolve(line[1]!);
      }
    });
    server.on("exit", (code) => reject(new Error(`svc server exited ${code}:\n${stderr}`)));
  });
}

async function api(path: string, body?: unknown): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(path.startsWith("http") ? path : `${url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** A connection that sends one GET and never reads a byte of the answer. */
function nonReader(path: string, kind: "status" | "follower"): void {
  const socket = connect({ host: "127.0.0.1", port: Number(new URL(url).port) });
  const entry: (typeof sockets)[number] = { socket, openedAt: Date.now(), received: 0, kind };
  socket.pause();
  socket.on("data", (d: Buffer) => (entry.received += d.length));
  socket.on("error", () => undefined); // a reset when the service drops us is what we wait for
  socket.on("close", () => (entry.closedAt = Date.now()));
  socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${KEY}\r\n\r\n`);
  sockets.push(entry);
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-slow-clients-"));
  const project = join(work, "big-output");
  cpSync(join(repo, "fixtures", "big-output"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  url = await startServer(join(work, "data"));
  const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  const deploy = spawnSync(process.execPath, [bin, "deploy", "--json"], {
    cwd: project,
    env: { ...base, SVC_API_URL: url, SVC_API_KEY: KEY },
    encoding: "utf8",
    timeout: 120_000,
  });
  if (deploy.status !== 0) throw new Error(`svc deploy exited ${deploy.status}:\n${deploy.stderr}`);
  const endpoint = (JSON.parse(deploy.stdout) as { endpoints: Array<{ id: string; url: string }> }).endpoints[0]!;
  endpointUrl = endpoint.url;
  endpointId = endpoint.id;

  const job = await api(`${endpointUrl}/runsync?wait=120000`, { function: "output", input: { bytes: OUTPUT_BYTES } });
  const record = JSON.parse(job.text) as { id: string; status: string; output: string };
  expect(record.status).toBe("COMPLETED");
  expect(record.output.length).toBe(OUTPUT_BYTES);
  jobId = record.id;
  expected = record.output;
  // A log backlog of ~6 MB that every follower is sent first.
  const chatter = await api(`${endpointUrl}/runsync?wait=120000`, { function: "chatter", input: { count: 3000, size: 2000 } });
  expect(JSON.parse(chatter.text).status).toBe("COMPLETED");
  const deadline = Date.now() + 30_000;
  while (
    (JSON.parse((await api(`/v1/endpoints/${endpointId}/logs`)).text) as { lines: Array<{ text: string }> }).lines.filter((l) => l.text.startsWith("chatter"))
      .length < 3000
  ) {
    if (Date.now() > deadline) throw new Error("the chatter never reached the logs");
    await new Promise((r) => setTimeout(r, 200));
  }
  baseline = rss();
}, 180_000);

afterAll(async () => {
  for (const { socket } of sockets) socket.destroy();
  if (server && server.exitCode === null) {
    server.kill("SIGTERM");
    await new Promise((r) => {
      const t = setTimeout(() => {
        server.kill("SIGKILL");
        r(undefined);
      }, 10_000);
      server.once("exit", () => {
        clearTimeout(t);
        r(undefined);
      });
    });
  }
  rmSync(work, { recursive: true, force: true });
});

describe("slow clients against svc server", () => {
  it("60 non-reading /status readers and 20 paused followers: RSS stays bounded, /health stays fast, a normal reader gets the whole output, the 21st follower is refused", async () => {
    for (let i = 0; i < STATUS_READERS; i++) nonReader(`/v2/${endpointId}/status/${jobId}`, "status");
    for (let i = 0; i < FOLLOWERS; i++) nonReader(`/v1/endpoints/${endpointId}/logs?follow=1`, "follower");
    // Lines that arrive while the followers do not read.
    const more = api(`${endpointUrl}/runsync?wait=120000`, { function: "chatter", input: { count: 1000, size: 2000 } });

    let peak = rss();
    let slowest = 0;
    const latencies: number[] = [];
    const started = Date.now();
    let reader: Promise<{ status: number; text: string }> | undefined;
    while (Date.now() - started < STALL_MS - 3_000) {
      const t0 = Date.now();
      const health = await api(`${endpointUrl}/health`);
      latencies.push(Date.now() - t0);
      slowest = Math.max(slowest, Date.now() - t0);
      expect(health.status).toBe(200);
      peak = Math.max(peak, rss());
      reader ??= api(`${endpointUrl}/status/${jobId}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const normal = await reader!;
    expect(normal.status).toBe(200);
    const record = JSON.parse(normal.text) as { id: string; status: string; output: string };
    expect(record.status).toBe("COMPLETED");
    expect(record.output === expected).toBe(true);

    // Every follower slot of this user is taken (the paused ones count until they are dropped).
    const refused = await api(`/v1/endpoints/${endpointId}/logs?follow=1`);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("content-type")).toBe("application/problem+json");
    expect(refused.headers.get("retry-after")).toBe("5");
    expect(JSON.parse(refused.text)).toMatchObject({ status: 429, title: "Too Many Requests" });

    expect(JSON.parse((await more).text).status).toBe("COMPLETED");
    peak = Math.max(peak, rss());
    console.log(
      `slow clients: baseline RSS ${(baseline / 1048576).toFixed(0)} MB, peak ${(peak / 1048576).toFixed(0)} MB, slowest /health ${slowest} ms (${latencies.join(" ")})`,
    );
    expect(peak - baseline).toBeLessThan(RSS_GROWTH_MAX);
    expect(slowest).toBeLessThan(HEALTH_MAX_MS);
  }, 60_000);

  it(
    "drops every client that does not read after the stall timeout (its socket is closed)",
    async () => {
      // A paused socket sees nothing, not even its end: wait past the timeout, then read what the kernel kept. A
      // dropped connection then ends, short of the whole answer; one still open would get it all and stay open.
      // The stall clock starts when the service's write first blocks, which is after the connection opened by as
      // long as the service took to fill the kernel's buffers for all 60 (seconds on a loaded machine): 6 s margin.
      const last = Math.max(...sockets.map((s) => s.openedAt));
      await new Promise((r) => setTimeout(r, Math.max(0, last + STALL_MS + 6_000 - Date.now())));
      for (const { socket } of sockets) socket.resume();
      const deadline = Date.now() + 10_000;
      while (sockets.some((s) => s.closedAt === undefined) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      const open = sockets.filter((s) => s.closedAt === undefined);
      expect(open.map((s) => s.kind)).toEqual([]);
      for (const s of sockets.filter((x) => x.kind === "status")) expect(s.received).toBeLessThan(OUTPUT_BYTES);
      // Their follower slots are free again.
      const controller = new AbortController();
      const res = await fetch(`${url}/v1/endpoints/${endpointId}/logs?follow=1`, { headers: { authorization: `Bearer ${KEY}` }, signal: controller.signal });
      expect(res.status).toBe(200);
      controller.abort();
    },
    STALL_MS + 30_000,
  );

  it("gives the memory back once the slow clients are gone", async () => {
    // Shared outputs linger 5 s after their last reader; the heap shrinks at its next collections.
    const deadline = Date.now() + 20_000;
    let now = rss();
    while (now - baseline >= RSS_AFTER_MAX && Date.now() < deadline) {
      await api(`${endpointUrl}/health`);
      await new Promise((r) => setTimeout(r, 500));
      now = rss();
    }
    console.log(`slow clients: RSS after ${(now / 1048576).toFixed(0)} MB (baseline ${(baseline / 1048576).toFixed(0)} MB)`);
    expect(now - baseline).toBeLessThan(RSS_AFTER_MAX);
  }, 30_000);
});
