// The worker runtime end to end: the real service (startService), real process workers (createProcessDriver
// running dist/runtime/worker.js), an artifact bundled by the real esbuild from fixtures/runtime-basic.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { JobsClient, type JobRecord } from "svc/internal";
import { buildTestArtifact, FIXTURE_ENDPOINTS, type TestArtifact } from "./artifact.js";

const KEY = "svc_test_runtime_key_0123456789";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let work: string;
let service: Service;
let driver: WorkerDriver;
let endpoints: Record<string, DeployedEndpoint>;
let artifact: TestArtifact;
const client = (name: string) => new JobsClient(endpoints[name]!.url, KEY);

interface LogLine {
  ts: number;
  workerId: string;
  jobId: string | null;
  stream: string;
  text: string;
}
async function logs(name: string, jobId?: string): Promise<LogLine[]> {
  const response = await fetch(`${service.url}/v1/endpoints/${endpoints[name]!.id}/logs${jobId ? `?job=${jobId}` : ""}`, {
    headers: { authorization: `Bearer ${KEY}` },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { lines: LogLine[] }).lines;
}
async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-runtime-e2e-"));
  const fns = FIXTURE_ENDPOINTS.find((e) => e.name === "fns")!;
  artifact = await buildTestArtifact(join(work, "artifact.tar.gz"), {
    fns: {
      workersMin: 2,
      workersMax: 2,
      maxConcurrency: 3,
      // A function the manifest lists but the bundled handler lacks (a stale or mismatched artifact).
      functions: [
        ...fns.functions.map((f) => ({ name: f.name, module: f.module, export: f.exportName, kind: f.kind })),
        { name: "ghostfn", module: "src/work.ts", export: "ghostfn", kind: "function" },
      ],
    },
    single: { workersMin: 1, workersMax: 1 },
    counter: { workersMin: 1, workersMax: 1 },
  });
  driver = createProcessDriver({ cacheDir: join(work, "cache"), closeGraceMs: 1000 });
  service = await startService({ dataDir: join(work, "data"), driver, apiKeys: [KEY], leaseMs: 2000 });
  const deployed = await service.deploy({ app: "rt", env: "test", manifest: artifact.manifest, artifactPath: artifact.path });
  endpoints = Object.fromEntries(deployed.map((e) => [e.name, e]));
});

afterAll(async () => {
  await service?.close();
  await driver?.close();
  await rm(work, { recursive: true, force: true });
});

describe("running jobs", () => {
  it("runs async and sync functions, named by the job's function field", async () => {
    const added = await client("fns").runsync<{ sum: number }>({ a: 2, b: 40 }, { function: "add" });
    expect(added).toMatchObject({ status: "COMPLETED", output: { sum: 42 } });
    expect(typeof added.executionTime).toBe("number");
    expect(await client("fns").runsync({ text: "shout" }, { function: "upper" })).toMatchObject({ status: "COMPLETED", output: "SHOUT" });
  });

  it("lets a single-function endpoint omit the function name", async () => {
    expect(await client("single").runsync({ hello: "world" })).toMatchObject({ status: "COMPLETED", output: { echo: { hello: "world" } } });
  });

  it("fails a job whose handler throws, with the error's message", async () => {
    const record = await client("fns").runsync({ message: "out of range" }, { function: "fail" });
    expect(record.status).toBe("FAILED");
    expect(String(record.error)).toMatch(/out of range/);
    // The job's own log says so too, with where it was thrown.
    const failed = await until("the failure in the job's log", async () => {
      const l = (await logs("fns", record.id)).find((x) => x.text.includes("failed:"));
      return l?.text;
    });
    // Source-mapped: the line of the fixture's TypeScript that threw, not of the bundle.
    expect(failed).toMatch(new RegExp(`^\\[svc-runtime\\] job ${record.id} failed: RangeError: out of range \\(at fail2 \\(.*/src/work\\.ts:25:\\d+\\)\\)$`));
  });

  it("fails a job naming a function the handler does not serve, clearly", async () => {
    const record = await client("fns").runsync({}, { function: "ghostfn" });
    expect(record.status).toBe("FAILED");
    expect(String(record.error)).toMatch(/Endpoint "fns" has no function "ghostfn"; it serves: add, upper, fail/);
  });

  it("streams generator values while the job runs, and aggregates them as the output", async () => {
    const fns = client("fns");
    const { id } = await fns.run({ count: 5, delayMs: 400 }, { function: "count" });
    // /stream hands out the chunks not yet read; collect them as they come.
    const received: Array<{ i: number; status: string }> = [];
    for (let status = "IN_QUEUE"; !["COMPLETED", "FAILED"].includes(status); await sleep(100)) {
      const s = await fns.stream<{ i: number }>(id);
      status = s.status;
      for (const c of s.stream) received.push({ i: c.output.i, status });
    }
    expect(received.map((r) => r.i)).toEqual([0, 1, 2, 3, 4]);
    // Chunks arrived while the job was still running, not in one lump at the end.
    expect(received.filter((r) => r.status === "IN_PROGRESS").length).toBeGreaterThanOrEqual(3);
    const final = await fns.status<Array<{ i: number }>>(id);
    expect(final.status).toBe("COMPLETED");
    expect(final.output!.map((v) => v.i)).toEqual([0, 1, 2, 3, 4]);
  });

  it("keeps every chunk of a fast generator, in order", async () => {
    const fns = client("fns");
    const { id } = await fns.run({ count: 5000, delayMs: 0 }, { function: "count" });
    const received: number[] = [];
    for (let status = "IN_QUEUE"; !["COMPLETED", "FAILED"].includes(status); ) {
      const s = await fns.stream<{ i: number }>(id);
      status = s.status;
      for (const c of s.stream) received.push(c.output.i);
      if (s.stream.length === 0) await sleep(50);
    }
    expect(received).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(((await fns.status(id)).output as unknown[]).length).toBe(5000);
  });

  it("keeps one class instance per worker", async () => {
    const counter = client("counter");
    const hits: Array<JobRecord<{ n: number; pid: number }>> = [];
    for (let i = 0; i < 3; i++) hits.push(await counter.runsync<{ n: number; pid: number }>({}, { function: "hit" }));
    const ns = hits.map((h) => h.output!.n);
    expect(ns[1]).toBe(ns[0]! + 1);
    expect(ns[2]).toBe(ns[0]! + 2);
    expect(new Set(hits.map((h) => h.output!.pid)).size).toBe(1);
    // A method calling a sibling through connect() runs in-process, on the same instance.
    const twice = await counter.runsync<{ n: number }>({}, { function: "hitTwice" });
    expect(twice.output!.n).toBe(ns[2]! + 2);
  });

  it("runs maxConcurrency jobs at once on each worker", async () => {
    const fns = client("fns");
    const ids = await Promise.all([1, 2, 3, 4, 5, 6].map((i) => fns.run({ ms: 1500, tag: `c${i}` }, { function: "nap" })));
    const records = await Promise.all(ids.map(({ id }) => fns.waitFor<{ start: number; end: number; pid: number }>(id, 30_000)));
    for (const r of records) expect(r.status).toBe("COMPLETED");
    const outputs = records.map((r) => r.output!);
    // Two workers with concurrency 3: all six overlap, three on each.
    expect(Math.max(...outputs.map((o) => o.start))).toBeLessThan(Math.min(...outputs.map((o) => o.end)));
    const perPid = new Map<number, number>();
    for (const o of outputs) perPid.set(o.pid, (perPid.get(o.pid) ?? 0) + 1);
    expect([...perPid.values()].sort()).toEqual([3, 3]);
  });

  it("survives a job's stray rejection and throwing timer, and reports them against the job", async () => {
    const fns = client("fns");
    const record = await fns.runsync<{ pid: number }>({}, { function: "stray" });
    expect(record.status).toBe("COMPLETED");
    const pid = record.output!.pid;
    const lines = await until("the stray errors in the job's log", async () => {
      const l = (await logs("fns", record.id)).map((x) => x.text).join("\n");
      return /unobserved rejection/.test(l) && /stray timer error/.test(l) ? l : undefined;
    });
    expect(lines).toMatch(/unhandled rejection: \(job [^)]+\) Error: unobserved rejection/);
    await sleep(200);
    expect(alive(pid)).toBe(true);
  });

  it("attributes handler console output to its job", async () => {
    const record = await client("fns").runsync({ words: ["alpha", "beta"] }, { function: "say" });
    expect(record.status).toBe("COMPLETED");
    const lines = await until("the job's log lines", async () => {
      const l = await logs("fns", record.id);
      return l.length >= 3 ? l : undefined;
    });
    expect(lines.map((l) => `${l.stream}:${l.text}`)).toEqual(expect.arrayContaining(["stdout:alpha", "stdout:beta", "stderr:done saying 2"]));
    expect(lines.every((l) => l.jobId === record.id)).toBe(true);
  });
});

describe("stopping jobs", () => {
  it("cancel aborts a running job's signal", async () => {
    const fns = client("fns");
    const { id } = await fns.run({ ms: 30_000, tag: "cancel-me" }, { function: "nap" });
    await until("the job to start", async () => (await logs("fns", id)).some((l) => l.text.includes("cancel-me start")));
    const cancelled = Date.now();
    expect(await fns.cancel(id)).toMatchObject({ status: "CANCELLED" });
    await until("the abort to reach the handler", async () => (await logs("fns", id)).some((l) => l.text.includes("cancel-me end aborted=true")), 5000);
    expect(Date.now() - cancelled).toBeLessThan(5000);
    expect((await fns.status(id)).status).toBe("CANCELLED");
  });

  it("cancel stops a streaming generator that ignores its signal", async () => {
    const fns = client("fns");
    const { id } = await fns.run({ ms: 100 }, { function: "ticker" });
    let chunks = 0;
    await until("some ticks", async () => (chunks += (await fns.stream(id)).stream.length) >= 3);
    await fns.cancel(id);
    await sleep(300);
    const ticksAfterCancel = (await logs("fns", id)).filter((l) => l.text.startsWith("tick")).length;
    await fns.stream(id);
    await sleep(800);
    // At most the tick already underway when return() was called; nothing streams any more.
    expect((await logs("fns", id)).filter((l) => l.text.startsWith("tick")).length).toBeLessThanOrEqual(ticksAfterCancel + 1);
    expect((await fns.stream(id)).stream).toEqual([]);
    expect((await fns.status(id)).status).toBe("CANCELLED");
  });

  it("an execution timeout ends the job TIMED_OUT and aborts it in the worker too", async () => {
    const fns = client("fns");
    const { id } = await fns.run({ ms: 30_000, tag: "slowpoke" }, { function: "nap", policy: { executionTimeout: 1000 } });
    const record = await fns.waitFor(id, 20_000);
    expect(record.status).toBe("TIMED_OUT");
    await until("the local abort", async () => (await logs("fns", id)).some((l) => l.text.includes("slowpoke end aborted=true")), 5000);
  });
});

describe("losing and stopping workers", () => {
  it("a job whose worker is SIGKILLed is retried on another worker and completes", async () => {
    const fns = client("fns");
    const { id } = await fns.run({ ms: 2500, tag: "victim" }, { function: "nap" });
    const startLine = await until("the job to start", async () => (await logs("fns", id)).find((l) => l.text.includes("victim start pid=")));
    const pid = Number(/pid=(\d+)/.exec(startLine.text)![1]);
    process.kill(pid, "SIGKILL");
    const record = await fns.waitFor<{ pid: number }>(id, 30_000);
    expect(record.status).toBe("COMPLETED");
    expect(record.output!.pid).not.toBe(pid);
    expect(alive(pid)).toBe(false);
  });

  it("SIGTERM drains: the held job finishes, then the worker exits", async () => {
    const fns = client("fns");
    // Let the scaler replace the worker killed above first.
    await until("two workers", async () => (await fns.health()).workers.idle + (await fns.health()).workers.running >= 2);
    const { id } = await fns.run({ ms: 1500, tag: "graceful" }, { function: "nap" });
    const startLine = await until("the job to start", async () => (await logs("fns", id)).find((l) => l.text.includes("graceful start pid=")));
    const pid = Number(/pid=(\d+)/.exec(startLine.text)![1]);
    process.kill(pid, "SIGTERM");
    const record = await fns.waitFor<{ pid: number; aborted: boolean }>(id, 20_000);
    expect(record.status).toBe("COMPLETED");
    expect(record.output).toMatchObject({ pid, aborted: false });
    const completedAt = Date.now();
    await until("the drained worker to exit", async () => !alive(pid), 10_000);
    expect(Date.now() - completedAt).toBeLessThan(3000);
  });

  it("a drain from the service (rolling release) lets the held job finish before the worker exits", async () => {
    const fns = client("fns");
    await until("two workers", async () => {
      const h = await fns.health();
      return h.workers.idle + h.workers.running >= 2;
    });
    const { id } = await fns.run({ ms: 2500, tag: "rolling" }, { function: "nap" });
    const startLine = await until("the job to start", async () => (await logs("fns", id)).find((l) => l.text.includes("rolling start pid=")));
    const pid = Number(/pid=(\d+)/.exec(startLine.text)![1]);
    // A changed configuration is a new revision: the service drains the old workers.
    const manifest = structuredClone(artifact.manifest);
    manifest.resources.fns!.env = { RELEASE: "2" };
    await service.deploy({ app: "rt", env: "test", manifest, artifactPath: artifact.path });
    const record = await fns.waitFor<{ pid: number; aborted: boolean }>(id, 30_000);
    expect(record.status).toBe("COMPLETED");
    expect(record.output).toMatchObject({ pid, aborted: false });
    await until("the drained worker to exit", async () => !alive(pid), 15_000);
    const workerLines = await logs("fns");
    expect(workerLines.some((l) => l.text.includes("draining (the service asked)"))).toBe(true);
  });

  it("SIGTERM hands back a job that cannot finish within the stop grace; another worker completes it", async () => {
    const fns = client("fns");
    const manifest = structuredClone(artifact.manifest);
    manifest.resources.fns!.env = { SVC_STOP_GRACE_MS: "500" };
    await service.deploy({ app: "rt", env: "test", manifest, artifactPath: artifact.path });
    const { id } = await fns.run({ ms: 4000, tag: "handback" }, { function: "nap" });
    const startLine = await until("the job to start", async () => (await logs("fns", id)).find((l) => l.text.includes("handback start pid=")));
    const pid = Number(/pid=(\d+)/.exec(startLine.text)![1]);
    const signalled = Date.now();
    process.kill(pid, "SIGTERM");
    await until("the stopped worker to exit", async () => !alive(pid), 10_000);
    expect(Date.now() - signalled).toBeLessThan(3000);
    const record = await fns.waitFor<{ pid: number; aborted: boolean }>(id, 30_000);
    expect(record.status).toBe("COMPLETED");
    expect(record.output!.pid).not.toBe(pid);
    expect(record.output!.aborted).toBe(false);
    expect((await logs("fns", id)).some((l) => l.text.includes("handback end aborted=true"))).toBe(true);
  });
});
