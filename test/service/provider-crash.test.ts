// A provider worker (fixtures/provider-worker) through kill -9 of the service: the job it runs keeps its lease
// (the service keeps it per worker and job, in the job's row), its pings renew it after the restart, and its
// result is recorded once, on the first attempt. Needs the compiled service (npx tsc -p tsconfig.build.json).

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, expect, it } from "vitest";
import { call, until } from "./helpers.js";
import { providerWorkerEnv } from "../../src/drivers/provider-env.js";

const service = new URL("./fixtures/child-service.mjs", import.meta.url).pathname;
const worker = join(import.meta.dirname, "../../fixtures/provider-worker/provider-worker.py");
const ADMIN_KEY = "provider-crash-admin-key";
let dir: string;
const children = new Set<ChildProcess>();

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startService(port: number) {
  const child = spawn(process.execPath, [service], {
    env: {
      ...process.env,
      DATA_DIR: join(dir, "data"),
      ARTIFACT: join(dir, "artifact.tar.gz"),
      ADMIN_KEY,
      LEASE_MS: "10000",
      HEARTBEAT_MS: "1000",
      PORT: String(port),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`child service exited early (${code})`)));
  });
  return { child, info: JSON.parse(line) as { url: string; endpointId: string; endpointUrl: string; workers: Array<{ id: string; key: string }> } };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "svc-provider-crash-"));
  writeFileSync(join(dir, "artifact.tar.gz"), "artifact");
});
afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

// The lease (10 s) outlives the restart even on a loaded machine: the worker's pings renew it on the new process.
it("a provider worker's job survives kill -9 of the service: its result after the restart is recorded, once", async () => {
  const port = await freePort();
  const first = await startService(port);
  const keys = first.info.workers[0]!;
  const lines: string[] = [];
  const child = spawn("python3", [worker], {
    env: {
      PATH: process.env.PATH,
      ...providerWorkerEnv({ apiUrl: first.info.url, workerId: keys.id, endpointId: first.info.endpointId, workerToken: keys.key, pingIntervalMs: 1000 }),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.add(child);
  createInterface({ input: child.stdout! }).on("line", (l) => lines.push(l));
  const submitted = await call(`${first.info.endpointUrl}/run`, { key: ADMIN_KEY, body: { input: { mode: "sleep", seconds: 6, value: "survived" } } });
  const id = submitted.body.id as string;
  await until(() => lines.includes(`taken ${id}`), 15_000);

  first.child.kill("SIGKILL");
  await new Promise((r) => first.child.once("exit", r));
  const second = await startService(port);
  expect(second.info.url).toBe(first.info.url);

  const record = await until(async () => {
    const r = await call(`${second.info.endpointUrl}/status/${id}`, { key: ADMIN_KEY });
    return r.body?.status === "COMPLETED" ? r.body : undefined;
  }, 30_000);
  expect(record).toMatchObject({ output: { value: "survived", worker: keys.id }, attempts: 1 });
  // The worker prints its line once its post is answered, which may come after the record reads COMPLETED.
  await until(() => lines.includes(`posted ${id} 200`), 10_000);
  expect(lines.filter((l) => l.startsWith("taken "))).toEqual([`taken ${id}`]);
}, 60_000);
