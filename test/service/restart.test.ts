// A `svc server` killed with SIGKILL mid-job and started again on the same data directory and port: the worker
// its predecessor left running is adopted (counted, so an endpoint of at most one worker never runs more), its
// death sends its job back to the queue at once (not when the lease lapses), a worker that died while no service
// ran has its job requeued at the restart, and a re-run's /stream holds one attempt, marked as a re-run. Real
// processes throughout: the server, the process workers, the binary's deploy.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { call } from "./helpers.js";
import { freePort, killLeftWorkers, processWorkerPids, startServerProcess, type ServerProcess } from "../server-process.js";

const KEY = "restart-admin-key";

let work: string;
let dataDir: string;
let port: number;
let url: string;
let server: ServerProcess | undefined;

/** `svc server` with process workers on this test's data directory and port (the same after each restart). */
async function startServer(): Promise<void> {
  server = await startServerProcess({ dataDir, port, env: { SVC_API_KEY: KEY } });
}

const workerPids = () => processWorkerPids(dataDir);

const api = (method: string, path: string, body?: unknown) => call(`${url}${path}`, { method, key: KEY, body });

interface Chunk {
  output: { i: number; pid: number };
  attempt?: number;
}

/** Every /stream answer until the job is final and nothing is left, each chunk with the time it was read. */
async function drainStream(endpoint: string, job: string): Promise<Array<Chunk & { at: number }>> {
  const got: Array<Chunk & { at: number }> = [];
  for (;;) {
    const { body } = await api("GET", `/v2/${endpoint}/stream/${job}`);
    const at = Date.now();
    got.push(...(body.stream as Chunk[]).map((c) => ({ ...c, at })));
    if (["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(body.status) && body.stream.length === 0) return got;
  }
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

// The most worker processes of the endpoint (the only one on this data directory) seen at once, sampled every
// 50 ms from deploy to the end: workersMax is 1.
let mostWorkers = 0;
let sampler: NodeJS.Timeout | undefined;
let endpoint: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-restart-"));
  dataDir = join(work, "data");
  const project = copyFixture("restart-app", work);
  port = await freePort();
  url = `http://127.0.0.1:${port}`;
  await startServer();
  sampler = setInterval(() => (mostWorkers = Math.max(mostWorkers, workerPids().length)), 50);
  await deployFixture(project, url, KEY);
  endpoint = (await api("GET", "/v1/apps/restart-app/environments/prod")).body.endpoints[0].id as string;
}, 120_000);

afterAll(async () => {
  clearInterval(sampler);
  await server?.kill();
  killLeftWorkers(dataDir);
  rmSync(work, { recursive: true, force: true });
});

describe("svc server killed and restarted on the same data", () => {
  it("adopts the worker left running, never runs more than workersMax, requeues its job at once when it dies, and /stream shows one attempt", async () => {
    const job = (await api("POST", `/v2/${endpoint}/run`, { input: { n: 60, ms: 200 } })).body.id as string;
    await until("the job to run", async () => ((await api("GET", `/v2/${endpoint}/status/${job}`)).body.status === "IN_PROGRESS" ? true : undefined), 30_000);
    await new Promise((r) => setTimeout(r, 1000));
    const [leftover] = workerPids();
    expect(workerPids()).toEqual([leftover]);
    // A reader follows the first attempt for a while: plain chunks, as the spec shapes them.
    const early = (await api("GET", `/v2/${endpoint}/stream/${job}`)).body.stream as Chunk[];
    expect(early.length).toBeGreaterThan(0);
    expect(early.map((c) => c.output.i)).toEqual(Array.from({ length: early.length }, (_, i) => i + 1));
    expect(early.every((c) => c.attempt === undefined)).toBe(true);

    await server!.kill();
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
    expect(server!.log()).toMatch(/adopted worker w\w+ of endpoint ticker, left running by an earlier run/);

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

    // The reader goes on: the dropped attempt's chunks it had not read are gone; what follows is the attempt that
    // counts, whole (60 chunks from one new worker process), each chunk marked as the job's second attempt.
    const rest = await drainStream(endpoint, job);
    expect(rest.map((c) => c.output.i)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    expect(new Set(rest.map((c) => c.attempt))).toEqual(new Set([2]));
    expect(new Set(rest.map((c) => c.output.pid)).size).toBe(1);
    expect(rest[0]!.output.pid).not.toBe(leftover);
    // Taken again at once: its first chunk came long before a lapsed lease (30 s) would have let it run.
    expect(rest[0]!.at - killedAt).toBeLessThan(8000);
    const done = (await api("GET", `/v2/${endpoint}/status/${job}`)).body;
    expect(done.status).toBe("COMPLETED");
    expect(done.output).toHaveLength(60);
    expect(mostWorkers).toBeLessThanOrEqual(1);
  }, 120_000);

  it("requeues at the restart the job of a worker that died while the service was down", async () => {
    const job = (await api("POST", `/v2/${endpoint}/run`, { input: { n: 30, ms: 200 } })).body.id as string;
    await until("the job to run", async () => ((await api("GET", `/v2/${endpoint}/status/${job}`)).body.status === "IN_PROGRESS" ? true : undefined), 30_000);
    await new Promise((r) => setTimeout(r, 1000));
    const [worker] = workerPids();
    expect(worker).toBeDefined();

    await server!.kill();
    process.kill(worker!, "SIGKILL");
    await until("the worker to be gone", () => (workerPids().length === 0 ? true : undefined), 5000);
    const restartedAt = Date.now();
    await startServer();
    expect(server!.log()).toMatch(/worker w\w+ of endpoint ticker, started by an earlier run of the service, is gone; the jobs it held are queued again/);

    // Run again by a new worker right away, not a lease period (30 s) after the restart: 30 chunks of 200 ms.
    const chunks = await drainStream(endpoint, job);
    expect(Date.now() - restartedAt).toBeLessThan(20_000);
    expect(chunks.map((c) => c.output.i)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(new Set(chunks.map((c) => c.attempt))).toEqual(new Set([2]));
    expect((await api("GET", `/v2/${endpoint}/status/${job}`)).body.status).toBe("COMPLETED");
    expect(mostWorkers).toBeLessThanOrEqual(1);
  }, 120_000);
});
