// `svc dev` keeps a pre-booted worker runtime by default: a cold start in a dev session is served by a runtime
// that was waiting (Node and the svc runtime loaded) before the job came, and that sees its endpoint's
// environment. The binary, as users run it, on fixtures/pool-app.
import { afterAll, beforeAll, expect, it } from "vitest";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { firstJsonOnStdout } from "../cli-output.js";
import { processAlive } from "svc/internal";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");

interface Ready {
  url: string;
  apiKey: string;
  endpoints: Array<{ name: string; id: string; url: string }>;
}

let work: string;
let dev: ChildProcessWithoutNullStreams;
let ready: Ready;
let stderr = "";

/** The runtimes `svc dev` started that wait for a claim (children of it with SVC_POOLED=1). */
function pooledOf(parent: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent && readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes("SVC_POOLED=1")) pids.push(Number(entry));
    } catch {
      // the process ended meanwhile
    }
  }
  return pids;
}

async function until<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms:\n${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function call(url: string, body?: unknown) {
  const res = await fetch(url, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${ready.apiKey}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await res.json()) as Record<string, any>;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-dev-pool-"));
  const project = join(work, "app");
  cpSync(join(repo, "fixtures", "pool-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  const env = { ...process.env, CI: "true" };
  for (const key of Object.keys(env)) if (key.startsWith("SVC_")) delete env[key];
  // Unsandboxed: the runtimes are found as dev's children and named by the pid they report (a sandboxed one is
  // PID 1 of its namespace; test/drivers/process-sandbox.test.ts covers the sandboxed pool).
  dev = spawn(process.execPath, [bin, "dev", "--port", "0", "--json", "--no-watch", "--sandbox", "none"], { cwd: project, env });
  dev.stderr.on("data", (d) => (stderr += d.toString()));
  ready = await firstJsonOnStdout<Ready>(dev, "svc dev", 90_000, () => stderr);
}, 120_000);

afterAll(() => {
  if (dev && dev.exitCode === null) dev.kill("SIGKILL");
  if (work) rmSync(work, { recursive: true, force: true });
});

it("serves a cold start from the runtime it keeps pre-booted by default", async () => {
  const first = ready.endpoints.find((e) => e.name === "first")!;
  await until(async () => {
    const h = (await call(`${first.url}/health`)).workers;
    return h.idle + h.running + h.initializing === 0;
  }, 30_000);
  const pooled = await until(() => (pooledOf(dev.pid!).length === 1 ? pooledOf(dev.pid!) : undefined), 30_000);
  const r = await call(`${first.url}/runsync`, { input: {} });
  expect(r.status).toBe("COMPLETED");
  expect(pooled).toContain(r.output.pid);
  expect(r.output).toMatchObject({ flag: "first", pooled: null });
  // Refilled with another runtime; all of them gone when the session stops.
  const refilled = await until(() => pooledOf(dev.pid!).find((pid) => pid !== r.output.pid), 30_000);
  const exited = new Promise((resolve) => dev.once("exit", resolve));
  dev.kill("SIGINT");
  await exited;
  expect(processAlive(refilled)).toBe(false);
}, 120_000);
