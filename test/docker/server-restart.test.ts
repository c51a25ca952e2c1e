// `svc server --workers docker` killed with SIGKILL mid-job and started again on the same data directory and
// port: the containers the killed run left (their forwarder died with it) are removed at start, and the job they
// held goes back to the queue at once, to be run by a new container, not when its lease lapses (30 s).
import { afterAll, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { describeDocker, docker, engineUp } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "docker-restart-admin-key";
const app = `docker-restart-${Date.now().toString(36)}`;

let work: string | undefined;
let server: ChildProcess | undefined;
let serverLog = "";

afterAll(async () => {
  server?.kill("SIGKILL");
  if (engineUp) await cleanupStale({ [LABELS.app]: app }, { docker }).catch(() => undefined);
  if (work) {
    // The server's artifacts staged for its containers (svc server's session is derived from its data directory,
    // so that a restart adopts them): killed, it never removed them.
    const session = `srv${createHash("sha256").update(join(work, "data")).digest("hex").slice(0, 12)}`;
    rmSync(join(tmpdir(), `svc-worker-artifacts-${session}`), { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

async function startServer(port: number, dataDir: string): Promise<void> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: KEY };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") && k !== "SVC_API_KEY") delete env[k];
  server = spawn(process.execPath, [bin, "server", "--port", String(port), "--data-dir", dataDir, "--workers", "docker"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  server.stderr!.on("data", (d) => (serverLog += d));
  await new Promise<void>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${serverLog}`)), 60_000);
    server!.stdout!.on("data", (d) => {
      out += d;
      if (out.includes("\n")) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

const appContainers = async () => (await docker.listContainers({ all: true, filters: { label: [`${LABELS.app}=${app}`] } })).map((c) => c.Id);
const runningContainers = async () => (await docker.listContainers({ filters: { label: [`${LABELS.app}=${app}`] } })).length;

describeDocker("svc server --workers docker after a SIGKILL", () => {
  it("removes the containers the killed run left and requeues their job at once", async () => {
    work = mkdtempSync(join(tmpdir(), "svc-docker-restart-"));
    const dataDir = join(work, "data");
    const project = join(work, "app");
    cpSync(join(repo, "fixtures", "restart-app"), project, { recursive: true });
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: app, private: true, type: "module" }));
    mkdirSync(join(project, "node_modules"));
    symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    await startServer(port, dataDir);
    const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
    for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
    const deployed = spawnSync(process.execPath, [bin, "deploy", "--env", "prod", "--json"], {
      cwd: project,
      env: { ...base, SVC_API_URL: url, SVC_API_KEY: KEY },
      encoding: "utf8",
      timeout: 180_000,
    });
    expect(deployed.status, deployed.stderr).toBe(0);
    const endpoint = (JSON.parse(deployed.stdout) as { endpoints: Array<{ id: string }> }).endpoints[0]!.id;
    const call = async (method: string, path: string, body?: unknown) =>
      (await (
        await fetch(`${url}${path}`, {
          method,
          headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        })
      ).json()) as any;

    const job = (await call("POST", `/v2/${endpoint}/run`, { input: { n: 50, ms: 200 } })).id as string;
    for (let i = 0; (await call("GET", `/v2/${endpoint}/status/${job}`)).status !== "IN_PROGRESS"; i++) {
      if (i > 600) throw new Error("the job never started");
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 1000));
    const before = await appContainers();
    expect(before.length).toBeGreaterThan(0);
    // The endpoint runs at most one worker: never more containers at once, across the crash and the restart.
    let mostRunning = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        mostRunning = Math.max(mostRunning, await runningContainers());
        await new Promise((r) => setTimeout(r, 100));
      }
    })();

    server!.kill("SIGKILL");
    await new Promise((r) => server!.once("exit", r));
    serverLog = "";
    const restartedAt = Date.now();
    await startServer(port, dataDir);
    expect(serverLog).toMatch(/removed worker container \S+ left by an earlier run of the service/);
    const after = await appContainers();
    for (const id of before) expect(after).not.toContain(id);

    let done: any;
    for (;;) {
      done = await call("GET", `/v2/${endpoint}/status/${job}`);
      if (done.status === "COMPLETED") break;
      if (Date.now() - restartedAt > 60_000) throw new Error(`job still ${done.status}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    // Run again from the start by a new container, long before the 30 s lease of the dead one would lapse:
    // 50 chunks of 200 ms take 10 s.
    expect(Date.now() - restartedAt).toBeLessThan(28_000);
    sampling = false;
    await sampler;
    expect(mostRunning).toBe(1);
    // One attempt's chunks, marked as the job's second attempt (the first one's went with its requeue).
    const stream = await call("GET", `/v2/${endpoint}/stream/${job}`);
    expect(stream.stream.map((c: { output: { i: number } }) => c.output.i)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(new Set(stream.stream.map((c: { attempt?: number }) => c.attempt))).toEqual(new Set([2]));
  }, 240_000);
});
