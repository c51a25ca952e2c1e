// What a job's life looks like to its client, with real processes throughout: a `svc server` (process workers,
// the runtime from dist/: compile first; no sandbox, so the test sees the files its handlers write),
// fixtures/jobs-app deployed by the binary, and the job API's official client (runpod-sdk) reading /status.
// Progress a handler reports is seen while it runs and survives the server being killed and started again on the
// same data; a job whose ttl runs out in the queue never starts; a plain failure is retried after its backoff, a
// NonRetryableError is not.
import runpodSdk from "runpod-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { call } from "./helpers.js";
import { freePort, processWorkerPids, startServerProcess, type ServerProcess } from "../server-process.js";

const KEY = "job-semantics-admin-key";

let work: string;
let dataDir: string;
let url: string;
let port: number;
let server: ServerProcess | undefined;
const ids = new Map<string, string>();
type SdkEndpoint = ReturnType<ReturnType<typeof runpodSdk>["endpoint"]>;
const sdk = (name: string): SdkEndpoint => runpodSdk(KEY, { baseUrl: `${url}/v2` }).endpoint(ids.get(name)!)!;

/** `svc server` with process workers, unsandboxed (the test reads files its handlers write), on this test's data directory and port. */
async function startServer(): Promise<void> {
  server = await startServerProcess({ dataDir, port, env: { SVC_API_KEY: KEY }, args: ["--sandbox", "none"] });
}

const workerPids = () => processWorkerPids(dataDir);

const api = (method: string, path: string, body?: unknown) => call(`${url}${path}`, { method, key: KEY, body });

async function until<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${server?.log() ?? ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const FINAL = ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"];
const final = (name: string, id: string) =>
  until(
    `job ${id} to end`,
    async () => {
      const record = await sdk(name).status(id);
      return FINAL.includes(record.status) ? record : undefined;
    },
    60_000,
  );

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-job-semantics-"));
  dataDir = join(work, "data");
  const project = copyFixture("jobs-app", work);
  port = await freePort();
  url = `http://127.0.0.1:${port}`;
  await startServer();
  await deployFixture(project, url, KEY);
  for (const e of (await api("GET", "/v1/apps/jobs-app/environments/prod")).body.endpoints as Array<{ name: string; id: string }>) ids.set(e.name, e.id);
}, 120_000);

afterAll(async () => {
  await server?.kill();
  for (const pid of workerPids()) process.kill(pid, "SIGKILL");
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("progress", () => {
  it("is seen through /status by the official client while the job runs, and is still there after the server is killed and started again", async () => {
    const gate = join(work, "progress-gate");
    const job = await sdk("progress").run({ input: { steps: 6, stepMs: 400, gate } });
    // Read as the client reads it: the record's output while IN_PROGRESS, the latest step each time.
    const seen: number[] = [];
    await until(
      "the last step",
      async () => {
        const record = await sdk("progress").status(job.id);
        expect(record.status === "IN_QUEUE" || record.status === "IN_PROGRESS").toBe(true);
        const step = (record.output as { step?: number } | undefined)?.step;
        if (record.status === "IN_PROGRESS" && step !== undefined) {
          expect(record.output).toEqual({ step, of: 6 });
          if (seen.at(-1) !== step) seen.push(step);
        }
        return step === 6;
      },
      60_000,
    );
    // Several values as they came, never going back.
    expect(seen.length).toBeGreaterThanOrEqual(3);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);

    // The handler now waits for the gate without reporting more: what the restarted server shows is what it kept.
    await new Promise((r) => setTimeout(r, 500));
    await server!.kill();
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
    const delays = lines
      .map((l) => /^attempt (\d) failed; retry (\d) of 2 in (\d+) ms$/.exec(l.text))
      .filter((m) => m !== null)
      .map((m) => Number(m![3]));
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
