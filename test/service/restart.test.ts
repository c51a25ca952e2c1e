// A `svc server` killed with SIGKILL mid-job and started again on the same data directory and port: the worker
// its predecessor left running is adopted (counted, so an endpoint of at most one worker runs one), its death
// sends its job back to the queue at once (not when the lease lapses), and the job's re-run shows in /stream
// only once. Real processes throughout: the server, the process workers, the binary's deploy.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "restart-admin-key";

let work: string;
let dataDir: string;
let port: number;
let url: string;
let server: ChildProcess | undefined;
let serverLog = "";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port: p } = probe.address() as { port: number };
      probe.close(() => resolve(p));
    });
  });
}

async function startServer(): Promise<void> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: KEY };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") && k !== "SVC_API_KEY") delete env[k];
  server = spawn(process.execPath, [bin, "server", "--port", String(port), "--data-dir", dataDir, "--workers", "process"], { env, stdio: ["ignore", "pipe", "pipe"] });
  server.stderr!.on("data", (d) => (serverLog += d));
  await new Promise<void>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${serverLog}`)), 30_000);
    server!.stdout!.on("data", (d) => {
      out += d;
      if (out.includes("\n")) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

/** Worker processes of this data directory (their artifact is extracted under it). */
function workerPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("runtime/worker.js")) continue;
      if (readFileSync(`/proc/${entry}/environ`, "utf8").includes(dataDir)) pids.push(Number(entry));
    } catch {
      // ended meanwhile
    }
  }
  return pids;
}

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as any };
}

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-restart-"));
  dataDir = join(work, "data");
  const project = join(work, "restart-app");
  cpSync(join(repo, "fixtures", "restart-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(repo, join(project, "node_modules", "svc"), "dir");
  port = await freePort();
  url = `http://127.0.0.1:${port}`;
  await startServer();
  const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  const deployed = spawnSync(process.execPath, [bin, "deploy", "--env", "prod", "--json"], { cwd: project, env: { ...base, SVC_API_URL: url, SVC_API_KEY: KEY }, encoding: "utf8", timeout: 120_000 });
  if (deployed.status !== 0) throw new Error(`deploy failed:\n${deployed.stderr}`);
}, 120_000);

afterAll(async () => {
  server?.kill("SIGKILL");
  for (const pid of workerPids()) process.kill(pid, "SIGKILL");
  rmSync(work, { recursive: true, force: true });
});

describe("svc server killed and restarted on the same data", () => {
  it("adopts the worker left running, never runs more than workersMax, requeues its job at once when it dies, and /stream shows one attempt", async () => {
    const endpoint = (await api("GET", "/v1/apps/restart-app/environments/prod")).body.endpoints[0].id as string;
    const job = (await api("POST", `/v2/${endpoint}/run`, { input: { n: 60, ms: 200 } })).body.id as string;
    await until("the job to run", async () => ((await api("GET", `/v2/${endpoint}/status/${job}`)).body.status === "IN_PROGRESS" ? true : undefined), 30_000);
    await new Promise((r) => setTimeout(r, 1000));
    const [leftover] = workerPids();
    expect(workerPids()).toEqual([leftover]);

    server!.kill("SIGKILL");
    await new Promise((r) => server!.once("exit", r));
    serverLog = "";
    await startServer();
    // For several seconds after the restart, the endpoint (at most 1 worker) runs exactly the one it had.
    const seen = new Set<number>();
    const watchUntil = Date.now() + 3000;
    while (Date.now() < watchUntil) {
      const pids = workerPids();
      pids.forEach((p) => seen.add(p));
      expect(pids.length).toBeLessThanOrEqual(1);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect([...seen]).toEqual([leftover]);
    expect(serverLog).toMatch(/adopted worker w\w+ of endpoint ticker, left running by an earlier run/);

    // The leftover dies mid-job: its job is back in the queue within a second or two (the lease is 30 s).
    expect((await api("GET", `/v2/${endpoint}/status/${job}`)).body.status).toBe("IN_PROGRESS");
    const killedAt = Date.now();
    process.kill(leftover!, "SIGKILL");
    const requeued = await until(
      "the job to be taken again",
      async () => {
        const lines = (await api("GET", `/v1/endpoints/${endpoint}/logs`)).body.lines as Array<{ text: string; ts: number }>;
        return lines.find((l) => l.ts >= killedAt - 1000 && /worker exited unexpectedly/.test(l.text));
      },
      10_000,
    );
    expect(requeued.ts - killedAt).toBeLessThan(3000);
    const done = await until("the job to complete", async () => {
      const { body } = await api("GET", `/v2/${endpoint}/status/${job}`);
      return body.status === "COMPLETED" ? body : undefined;
    }, 30_000);
    expect(Date.now() - killedAt).toBeLessThan(25_000);
    expect(done.output).toHaveLength(60);

    // Only the attempt that counts: 60 chunks from one worker process, not the dead attempt's too.
    const stream = (await api("GET", `/v2/${endpoint}/stream/${job}`)).body;
    expect(stream.status).toBe("COMPLETED");
    expect(stream.stream.map((c: { output: { i: number } }) => c.output.i)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    expect(new Set(stream.stream.map((c: { output: { pid: number } }) => c.output.pid)).size).toBe(1);
    expect(stream.stream[0].output.pid).not.toBe(leftover);
  }, 120_000);
});
