// A `svc server` killed with SIGKILL while a GPU worker runs, and started again on the same data: the worker it
// adopts keeps its GPU, so no new worker is put on it; the work beyond it waits until it ends. Real processes: the
// server (with the fake nvidia-smi of test/fakes/gpu first on its PATH: two H100s and one RTX 4090), the process
// workers of fixtures/gpu-app, the binary's deploy.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { call } from "../service/helpers.js";
import { freePort, startServerProcess, UNSANDBOXED, type ServerProcess } from "../server-process.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "gpu-restart-admin-key";
const RTX = "GPU-fa4e0000-0000-4000-8000-000000000002";
const GPUS = [
  { name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 },
  { name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 },
  { name: "NVIDIA GeForce RTX 4090", memoryMiB: 24564 },
];

let work: string;
let dataDir: string;
let url: string;
let port: number;
let server: ServerProcess | undefined;
const workerPids: number[] = [];

async function startServer(): Promise<void> {
  const env = {
    SVC_API_KEY: KEY,
    PATH: `${join(repo, "test", "fakes", "gpu")}${delimiter}${process.env.PATH ?? ""}`,
    FAKE_NVIDIA_SMI_GPUS: JSON.stringify(GPUS),
  };
  // The handler writes its pid to a file of this test's and the test signals it: the worker runs unsandboxed.
  server = await startServerProcess({ dataDir, port, env: { ...env, ...UNSANDBOXED } });
}

const api = (method: string, path: string, body?: unknown) => call(`${url}${path}`, { method, key: KEY, body });

async function until<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${server?.log() ?? ""}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const holderOf = async (uuid: string) =>
  ((await api("GET", "/v1/gpus")).body.gpus as Array<{ uuid: string; holder: { workerId: string } | null }>).find((g) => g.uuid === uuid)!.holder;

let only: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-gpu-restart-"));
  dataDir = join(work, "data");
  const project = copyFixture("gpu-app", work);
  port = await freePort();
  url = `http://127.0.0.1:${port}`;
  await startServer();
  await deployFixture(project, url, KEY).catch((err: Error) => {
    throw new Error(`${err.message}\n${server?.log() ?? ""}`);
  });
  const endpoints = (await api("GET", "/v1/apps/gpu-app/environments/prod")).body.endpoints as Array<{ id: string; name: string }>;
  only = endpoints.find((e) => e.name === "only")!.id;
}, 180_000);

afterAll(async () => {
  await server?.kill();
  for (const pid of workerPids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  rmSync(work, { recursive: true, force: true });
});

describe("svc server restarted while a GPU worker runs", () => {
  it("the adopted worker keeps its GPU: the next worker waits for it instead of sharing it, and gets it once it ends", async () => {
    await until("the release's workers to idle out", async () => (await holderOf(RTX)) === null, 30_000);
    const pidFile = join(work, "pid");
    const first = (await api("POST", `/v2/${only}/run`, { input: { ms: 60_000, pidFile } })).body.id as string;
    await until("the job's worker to start", () => existsSync(pidFile), 30_000);
    const pid = Number(readFileSync(pidFile, "utf8"));
    workerPids.push(pid);
    const holder = (await holderOf(RTX))!;

    await server!.kill();
    await startServer();
    expect(await holderOf(RTX)).toEqual(expect.objectContaining({ workerId: holder.workerId, endpointId: only }));

    // A second job wants a second worker: it waits for the 4090 the adopted worker holds.
    const second = (await api("POST", `/v2/${only}/run`, { input: {} })).body.id as string;
    const waiting = await until("the second worker to wait", async () => (await api("GET", `/v2/${only}/health`)).body.throttledReason, 30_000);
    expect(waiting).toBe("waiting for a GPU (ADA_24: 1 of 1 in use)");
    expect(await holderOf(RTX)).toEqual(expect.objectContaining({ workerId: holder.workerId }));

    // The adopted worker ends (its long job cancelled first, so it does not run again): a new worker gets its GPU
    // and runs the waiting job.
    expect((await api("POST", `/v2/${only}/cancel/${first}`)).status).toBe(200);
    process.kill(pid, "SIGKILL");
    const done = (await api("GET", `/v2/${only}/status-sync/${second}?wait=30000`)).body;
    expect(done).toMatchObject({ status: "COMPLETED", output: { cuda: RTX } });
    expect(done.output.pid).not.toBe(pid);
  }, 120_000);
});
