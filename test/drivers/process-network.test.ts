// Sandboxed process workers in a network namespace of their own, connected by pasta: a handler that tries a
// listener on the host's 127.0.0.1 gets no connection, while its jobs (the worker's calls to the job API on the
// host's loopback) complete. The same handler with the host's network connects: the namespace is what stops it.
// Skipped, naming why, where bubblewrap or pasta is missing; in CI (CI set), where .ci/run installs both, a sandbox
// that cannot have a network of its own fails instead: the skip would hide the defence missing.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { resolveSandbox, type Sandbox } from "../../src/drivers/sandbox/index.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";
import { startServerProcess } from "../server-process.js";
import { deployFixture } from "../fixture-project.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "process-network-admin-key";

const sandbox = (() => {
  try {
    const s = resolveSandbox({ setting: "bwrap" });
    if (s.kind !== "bwrap") return "no sandbox";
    if (s.network.kind !== "pasta") return `no network namespace: ${s.network.why}`;
    s.dispose();
    return undefined;
  } catch (err) {
    return String(err);
  }
})();
if (sandbox) console.warn(`process network tests skipped: ${sandbox}`);
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? "");

it.runIf(inCi && existsSync("/usr/bin/bwrap") && existsSync("/usr/bin/pasta"))(
  "in CI, with bubblewrap and pasta installed, sandboxed workers get a network of their own",
  () => {
    expect(sandbox).toBeUndefined();
  },
);

let dir: string;
let listener: Server;
let port: number;
const accepted: number[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-process-network-"));
  cpSync(join(repo, "fixtures", "network-probe-app"), join(dir, "app"), { recursive: true });
  mkdirSync(join(dir, "app", "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(dir, "app", "node_modules", "svc"), "dir");
  // A service of the host's that only local processes should reach (a database, an admin port).
  listener = createServer((socket) => {
    accepted.push(Date.now());
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  port = (listener.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise((resolve) => listener?.close(resolve));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function knock(network: "auto" | "host"): Promise<{ status: string; output?: { reached: string } }> {
  const s = resolveSandbox({ setting: "bwrap", network }) as Sandbox;
  const driver = createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, `cache-${network}`), sandbox: s });
  let service: Service | undefined;
  try {
    service = await startService({ dataDir: join(dir, `data-${network}`), apiKeys: [KEY], driver });
    const b = await buildProject(join(dir, "app"));
    const endpoint: DeployedEndpoint = (await service.deploy({ app: b.manifest.app, env: "test", manifest: b.manifest, artifactPath: b.artifactPath }))[0]!;
    return (await call(`${endpoint.url}/runsync`, { key: KEY, body: { input: { port } } })).body;
  } finally {
    await service?.close();
    s.dispose();
  }
}

describe.skipIf(sandbox !== undefined)("a sandboxed worker's network", () => {
  it("keeps the host's loopback out of reach while the worker's jobs complete through the job API", async () => {
    const before = accepted.length;
    const r = await knock("auto");
    expect(r.status).toBe("COMPLETED");
    expect(r.output!.reached).toBe("ECONNREFUSED");
    expect(accepted.length).toBe(before);
  }, 120_000);

  it("pre-booted workers too: the first connected at its claim, the next while it waited in the pool; both off the host's loopback", async () => {
    const s = resolveSandbox({ setting: "bwrap" }) as Sandbox;
    const driver = createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache-pool"), sandbox: s, pool: 1 });
    let service: Service | undefined;
    try {
      service = await startService({ dataDir: join(dir, "data-pool"), apiKeys: [KEY], driver });
      const b = await buildProject(join(dir, "app"));
      const before = accepted.length;
      // Two environments: two endpoints, two workers, each from the pool.
      for (const env of ["first", "second"]) {
        const [endpoint] = await service.deploy({ app: b.manifest.app, env, manifest: b.manifest, artifactPath: b.artifactPath });
        const r = await call(`${endpoint!.url}/runsync`, { key: KEY, body: { input: { port } } });
        expect(r.body).toMatchObject({ status: "COMPLETED", output: { reached: "ECONNREFUSED" } });
        // The refill boots after the claim: give it the time to boot and connect before the next endpoint's worker.
        await new Promise((resolve) => setTimeout(resolve, 1500));
      }
      expect(accepted.length).toBe(before);
      expect(driver.pooledPids().length).toBe(1);
    } finally {
      await service?.close();
      s.dispose();
    }
  }, 120_000);

  it("a worker's pasta outliving a killed service is stopped by the next one once the worker is gone", async () => {
    const dataDir = join(dir, "data-killed");
    const first = await startServerProcess({ dataDir, env: { SVC_API_KEY: KEY, SVC_SANDBOX: "bwrap" } });
    let second: Awaited<ReturnType<typeof startServerProcess>> | undefined;
    try {
      await deployFixture(join(dir, "app"), first.url, KEY);
      const endpoint = (await call(`${first.url}/v1/apps/network-probe-app/environments/prod`, { key: KEY })).body.endpoints[0].id as string;
      const knock = await call(`${first.url}/v2/${endpoint}/runsync`, { key: KEY, body: { input: { port } } });
      expect(knock.body).toMatchObject({ status: "COMPLETED", output: { reached: "ECONNREFUSED" } });
      // The worker's record names its pasta.
      const records = readdirSync(join(dataDir, "workers")).map((f) => JSON.parse(readFileSync(join(dataDir, "workers", f), "utf8")));
      expect(records).toHaveLength(1);
      const { pid, pasta } = records[0] as { pid: number; pasta: number };
      expect(readFileSync(`/proc/${pasta}/comm`, "utf8")).toMatch(/^pass?t/);
      // The service dies without a word, then its worker: nothing stops the pasta...
      await first.kill();
      process.kill(pid, "SIGKILL");
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(existsSync(`/proc/${pasta}`)).toBe(true);
      // ...until a service starts on the data directory and finds the worker gone.
      second = await startServerProcess({ dataDir, env: { SVC_API_KEY: KEY, SVC_SANDBOX: "bwrap" } });
      await until(async () => !existsSync(`/proc/${pasta}`) || undefined, 10_000);
    } finally {
      await second?.stop();
      await first.kill().catch(() => undefined /* already killed */);
    }
  }, 120_000);

  it("reaches it with the host's network (what the namespace stops)", async () => {
    const r = await knock("host");
    expect(r).toMatchObject({ status: "COMPLETED", output: { reached: "connected" } });
  }, 120_000);
});
