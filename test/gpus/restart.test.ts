// A `svc server` killed with SIGKILL while a GPU worker runs, and started again on the same data: the worker it
// adopts keeps its GPU, so no new worker is put on it; the work beyond it waits until it ends. Real processes: the
// server (with the fake nvidia-smi of test/fakes/gpu first on its PATH: two H100s and one RTX 4090), the process
// workers of fixtures/gpu-app, the binary's deploy.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UNSANDBOXED } from "../server-process.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
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
let server: ChildProcess | undefined;
let serverLog = "";
const workerPids: number[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port: p } = probe.address() as { port: number };
      probe.close(() => resolve(p));
    });
  });
}

async function startServer(): Promise<void> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: KEY, PATH: `${join(repo, "test", "fakes", "gpu")}${delimiter}${process.env.PATH ?? ""}`, FAKE_NVIDIA_SMI_GPUS: JSON.stringify(GPUS) };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") && k !== "SVC_API_KEY") delete env[k];
  // The handler writes its pid to a file of this test's and the test signals it: the worker runs unsandboxed.
  Object.assign(env, UNSANDBOXED);
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
    await new Promise((r) => setTimeout(r, 100));
  }
}

const holderOf = async (uuid: string) => ((await api("GET", "/v1/gpus")).body.gpus as Array<{ uuid: string; holder: { workerId: string } | null }>).find((g) => g.uuid === uuid)!.holder;

let only: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-gpu-restart-"));
  dataDir = join(work, "data");
  const project = join(work, "gpu-app");
  cpSync(join(repo, "fixtures", "gpu-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  port = await freePort();
  url = `http://127.0.0.1:${port}`;
  await startServer();
  const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  const deployed = spawnSync(process.execPath, [bin, "deploy", "--env", "prod", "--json"], { cwd: project, env: { ...base, SVC_API_URL: url, SVC_API_KEY: KEY }, encoding: "utf8", timeout: 120_000 });
  if (deployed.status !== 0) throw new Error(`deploy failed:\n${deployed.stderr}\n${serverLog}`);
  const endpoints = (await api("GET", "/v1/apps/gpu-app/environments/prod")).body.endpoints as Array<{ id: string; name: string }>;
  only = endpoints.find((e) => e.name === "only")!.id;
}, 180_000);

afterAll(async () => {
  server?.kill("SIGKILL");
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

    server!.kill("SIGKILL");
    await new Promise((r) => server!.once("exit", r));
    serverLog = "";
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
