// What a job's life looks like to its client, with real processes throughout: a `svc server` (process workers,
// the runtime from dist/: compile first; no sandbox, so the test sees the files its handlers write),
// fixtures/jobs-app deployed by the binary, and the job API's official client (runpod-sdk) reading /status.
// Progress a handler reports is seen while it runs and survives the server being killed and started again on the
// same data; a job whose ttl runs out in the queue never starts; a plain failure is retried after its backoff, a
// NonRetryableError is not.
import runpodSdk from "runpod-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "job-semantics-admin-key";

let work: string;
let dataDir: string;
let url: string;
let port: number;
let server: ChildProcess | undefined;
let serverLog = "";
const ids = new Map<string, string>();
type SdkEndpoint = ReturnType<ReturnType<typeof runpodSdk>["endpoint"]>;
const sdk = (name: string): SdkEndpoint => runpodSdk(KEY, { baseUrl: `${url}/v2` }).endpoint(ids.get(name)!)!;

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
  server = spawn(process.execPath, [bin, "server", "--port", String(port), "--data-dir", dataDir, "--workers", "process", "--sandbox", "none"], { env, stdio: ["ignore", "pipe", "pipe"] });
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

async function killServer(): Promise<void> {
  server!.kill("SIGKILL");
  await new Promise((r) => server!.once("exit", r));
  serverLog = "";
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

async function until<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${serverLog}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const FINAL = ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"];
const final = (name: string, id: string) => until(`job ${id} to end`, async () => {
  const record = await sdk(name).status(id);
  return FINAL.includes(record.status) ? record : undefined;
}, 60_000);

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-job-semantics-"));
  dataDir = join(work, "data");
  const project = join(work, "jobs-app");
  cpSync(join(repo, "fixtures", "jobs-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(repo, join(project, "node_modules", "svc"), "dir");
  port = await freePort();
  url = `http://127.0.0.1:${port}`;
  await startServer();
  const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  const deployed = spawnSync(process.execPath, [bin, "deploy", "--env", "prod", "--json"], { cwd: project, env: { ...base, SVC_API_URL: url, SVC_API_KEY: KEY }, encoding: "utf8", timeout: 120_000 });
  if (deployed.status !== 0) throw new Error(`deploy failed:\n${deployed.stderr}`);
  for (const e of (await api("GET", "/v1/apps/jobs-app/environments/prod")).body.endpoints as Array<{ name: string; id: string }>) ids.set(e.name, e.id);
}, 120_000);

afterAll(async () => {
  server?.kill("SIGKILL");
  for (const pid of workerPids()) process.kill(pid, "SIGKILL");
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("progress", () => {
  it("is seen through /status by the official client while the job runs, and is still there after the server is killed and started again", async () => {
    const gate = join(work, "progress-gate");
    const job = await sdk("progress").run({ input: { steps: 6, stepMs: 400, gate } });
    // Read as the client reads it: the record's output while IN_PROGRESS, the latest step each time.
    const seen: number[] = [];
    await until("the last step", async () => {
      const record = await sdk("progress").status(job.id);
      expect(record.status === "IN_QUEUE" || record.status === "IN_PROGRESS").toBe(true);
      const step = (record.output as { step?: number } | undefined)?.step;
      if (record.status === "IN_PROGRESS" && step !== undefined) {
        expect(record.output).toEqual({ step, of: 6 });
        if (seen.at(-1) !== step) seen.push(step);
      }
      return step === 6;
    }, 60_000);
    // Several values as they came, never going back.
    expect(seen.length).toBeGreaterThanOrEqual(3);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);

    // The handler now waits for the gate without reporting more: what the restarted server shows is what it kept.
    await new Promise((r) => setTimeout(r, 500));
    await killServer();
    await startServer();
    const after = await sdk("progress").status(job.id);
    expect(after).toMatchObject({ id: job.id, status: "IN_PROGRESS", output: { step: 6, of: 6 } });

    writeFileSync(gate, "open");
    const done = await final("progress", job.id);
    expect(done).toMatchObject({ status: "COMPLETED", output: { done: 6 }, attempts: 1 });
  }, 120_000);
});

describe("ttl", () => {
  it("a job whose ttl runs out while it waits in the queue never starts, and ends TIMED_OUT saying so", async () => {
    const busyMark = join(work, "busy-started");
    const lateMark = join(work, "late-started");
    // The endpoint's one worker is busy for a while...
    const busy = await sdk("single").run({ input: { ms: 5000, mark: busyMark } });
    await until("the busy job to start", () => existsSync(busyMark), 60_000);
    // ...so a job with a 1.5 s ttl waits in the queue past it.
    const late = await sdk("single").run({ input: { mark: lateMark }, policy: { ttl: 1500 } });
    const ended = await final("single", late.id);
    expect(ended).toMatchObject({ status: "TIMED_OUT", errorType: "TtlExpired", executionTime: 0 });
    expect(ended.error).toMatch(/ttl of 1500 ms .* ran out while it waited in the queue; it never started/);
    expect(ended.delayTime).toBeGreaterThanOrEqual(1400);
    // The worker frees up and takes jobs again, but never that one.
    expect((await final("single", busy.id)).status).toBe("COMPLETED");
    expect((await sdk("single").runSync({ input: { ms: 0 } }, 30_000)).status).toBe("COMPLETED");
    expect(existsSync(lateMark)).toBe(false);
    // Its record is kept as any ended job's (30 min for /run).
    expect((await sdk("single").status(late.id)).status).toBe("TIMED_OUT");
  }, 120_000);

  it("a running job whose ttl runs out is stopped and ends TIMED_OUT", async () => {
    const job = await sdk("single").run({ input: { ms: 20_000 }, policy: { ttl: 3000 } });
    const ended = await final("single", job.id);
    expect(ended).toMatchObject({ status: "TIMED_OUT", errorType: "TtlExpired" });
    expect(ended.error).toMatch(/ran out while it ran; it was stopped/);
    // The worker was told to stop it: it takes the next job at once, not after the 20 s.
    const next = Date.now();
    expect((await sdk("single").runSync({ input: { ms: 0 } }, 30_000)).status).toBe("COMPLETED");
    expect(Date.now() - next).toBeLessThan(10_000);
  }, 120_000);
});

describe("execution timeout", () => {
  it("a job's policy.executionTimeout stops it when it runs longer, whatever its endpoint's", async () => {
    const job = await sdk("single").run({ input: { ms: 20_000 }, policy: { executionTimeout: 2000 } });
    const ended = await final("single", job.id);
    expect(ended).toMatchObject({ status: "TIMED_OUT", errorType: "TimeoutError", error: "The job ran longer than its execution timeout of 2000 ms" });
    expect(ended.executionTime).toBeLessThan(10_000);
  }, 120_000);
});

describe("retries", () => {
  /** Start times of the attempts, as the handler wrote them. */
  const attemptTimes = (log: string) => readFileSync(log, "utf8").trim().split("\n").map(Number);

  it("a plain failure with retries=2 runs 3 times, each retry after the backoff its logs announce", async () => {
    const log = join(work, "flaky-plain.log");
    const job = await sdk("flaky").run({ input: { log } });
    const ended = await final("flaky", job.id);
    expect(ended).toMatchObject({ status: "FAILED", error: "try again", retries: 2, attempts: 3 });
    const starts = attemptTimes(log);
    expect(starts).toHaveLength(3);
    // "attempt 1 failed; retry 1 of 2 in 517 ms": the delay each retry drew (full jitter under 0.8 s, then 1.2 s).
    const lines = (await api("GET", `/v1/endpoints/${ids.get("flaky")}/logs?job=${job.id}`)).body.lines as Array<{ text: string }>;
    const delays = lines.map((l) => /^attempt (\d) failed; retry (\d) of 2 in (\d+) ms$/.exec(l.text)).filter((m) => m !== null).map((m) => Number(m![3]));
    expect(delays).toHaveLength(2);
    expect(delays[0]).toBeLessThanOrEqual(800);
    expect(delays[1]).toBeLessThanOrEqual(1200);
    for (let i = 0; i < 2; i++) {
      const gap = starts[i + 1]! - starts[i]!;
      // Not before its backoff (a failed attempt ends after it started), nor long after it.
      expect(gap, `retry ${i + 1}: ${gap} ms after the attempt before, backoff ${delays[i]} ms`).toBeGreaterThanOrEqual(delays[i]!);
      expect(gap).toBeLessThan(delays[i]! + 3000);
    }
  }, 120_000);

  it("a NonRetryableError fails the job at once: it runs once", async () => {
    const log = join(work, "flaky-bad.log");
    const job = await sdk("flaky").run({ input: { log, bad: true } });
    const ended = await final("flaky", job.id);
    expect(ended).toMatchObject({ status: "FAILED", error: "the input is bad: retrying cannot help", errorType: "NonRetryableError", attempts: 1 });
    expect(ended.retries).toBeUndefined();
    // Longer than any backoff of this endpoint (1.2 s): no second attempt came.
    await new Promise((r) => setTimeout(r, 2000));
    expect(attemptTimes(log)).toHaveLength(1);
    expect((await sdk("flaky").status(job.id)).status).toBe("FAILED");
  }, 120_000);
});
