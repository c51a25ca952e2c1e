// Durability: the service runs in a child process and is SIGKILLed while jobs are queued, in progress and being
// submitted. After a restart on the same data dir, every acknowledged job completes, and its result is recorded
// exactly once. Needs the compiled service (npx tsc -p tsconfig.build.json).

import { afterAll, beforeAll, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { call, ProtocolWorker, until } from "./helpers.js";

const fixture = new URL("./fixtures/child-service.mjs", import.meta.url).pathname;
const ADMIN_KEY = "crash-admin-key";
let dir: string;
const children = new Set<ChildProcess>();

interface ChildInfo {
  url: string;
  endpointId: string;
  endpointUrl: string;
  workers: Array<{ id: string; key: string }>;
}

async function startChild(): Promise<{ child: ChildProcess; info: ChildInfo }> {
  const child = spawn(process.execPath, [fixture], {
    // A restarted service keeps a running job's lease one lease period: long enough for the worker to reconnect on
    // a loaded machine.
    env: { ...process.env, DATA_DIR: join(dir, "data"), ARTIFACT: join(dir, "artifact.tar.gz"), ADMIN_KEY, LEASE_MS: "2000" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`child service exited early (${code})`)));
  });
  return { child, info: JSON.parse(line) as ChildInfo };
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once("exit", () => r()));
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "svc-crash-test-"));
  writeFileSync(join(dir, "artifact.tar.gz"), "artifact");
});
afterAll(async () => {
  for (const child of children) {
    child.kill("SIGKILL");
    await exited(child);
  }
  rmSync(dir, { recursive: true, force: true });
});

it("keeps every acknowledged job through kill -9 and records each result exactly once", async () => {
  const first = await startChild();
  const inputOf = new Map<string, number>();
  const accepted = new Map<string, number>();
  const countAccepted = (results: Array<{ jobId: string; accepted: boolean }>) => {
    for (const r of results) if (r.accepted) accepted.set(r.jobId, (accepted.get(r.jobId) ?? 0) + 1);
  };
  const submit = async (url: string, i: number) => {
    const r = await call(`${url}/run`, { key: ADMIN_KEY, body: { input: { i } } });
    if (r.status === 200) inputOf.set(r.body.id, i);
  };

  // Queued jobs.
  await Promise.all(Array.from({ length: 40 }, (_, i) => submit(first.info.endpointUrl, i)));
  expect(inputOf.size).toBe(40);

  // In progress: one worker takes five, finishes two, holds three.
  const before = new ProtocolWorker(first.info.url, first.info.workers[0]!.id, first.info.workers[0]!.key);
  await before.register();
  const held = await before.take(5, 1000);
  expect(held).toHaveLength(5);
  countAccepted(await before.done(held.slice(0, 2).map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: { i: j.input.i } }))));

  // Submissions in flight when the service dies: only the acknowledged ones count.
  const burst = Array.from({ length: 150 }, (_, i) => submit(first.info.endpointUrl, 1000 + i).catch(() => undefined));
  await new Promise((r) => setTimeout(r, 30));
  first.child.kill("SIGKILL");
  await Promise.all(burst);
  await exited(first.child);
  expect(inputOf.size).toBeGreaterThanOrEqual(40);

  // Restart on the same data dir; the workers reconnect to the new address with the same tokens.
  const second = await startChild();
  expect(second.info.endpointId).toBe(first.info.endpointId);
  const workers = second.info.workers.map((w) => new ProtocolWorker(second.info.url, w.id, w.key));
  for (const w of workers) await w.register();

  // A worker that survived the restart may still complete a job it held: its lease is in the file.
  countAccepted(await workers[0]!.done([{ jobId: held[2]!.id, lease: held[2]!.lease, status: "COMPLETED", output: { i: held[2]!.input.i } }]));
  expect(accepted.get(held[2]!.id)).toBe(1);

  // The other held jobs are never heartbeated: their leases lapse and other attempts run them.
  let stop = false;
  const loops = workers.map(async (w) => {
    while (!stop) {
      const jobs = await w.take(4, 200);
      if (jobs.length > 0)
        countAccepted(await w.done(jobs.map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: { i: j.input.i } }))));
    }
  });
  try {
    await until(
      async () => {
        for (const id of inputOf.keys()) {
          const r = await call(`${second.info.endpointUrl}/status/${id}`, { key: ADMIN_KEY });
          if (r.body.status !== "COMPLETED") return false;
        }
        return true;
      },
      30_000,
      100,
    );
  } finally {
    stop = true;
    await Promise.all(loops);
  }

  // The stale leases of the jobs held before the crash are refused now.
  const stale = await workers[0]!.done(held.slice(3).map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: "stale" })));
  expect(stale.every((r) => !r.accepted)).toBe(true);

  for (const [id, i] of inputOf) {
    const r = await call(`${second.info.endpointUrl}/status/${id}`, { key: ADMIN_KEY });
    expect(r.body).toMatchObject({ id, status: "COMPLETED", output: { i } });
    expect(accepted.get(id)).toBe(1);
  }
  const health = await call(`${second.info.endpointUrl}/health`, { key: ADMIN_KEY });
  expect(health.body.jobs.inQueue).toBe(0);
  expect(health.body.jobs.inProgress).toBe(0);

  second.child.kill("SIGTERM");
  await exited(second.child);
  expect(second.child.exitCode).toBe(0);
}, 90_000);
