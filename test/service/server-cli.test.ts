// `svc server` as a user runs it (compiled: node bin/svc.js): prints its URL, generates and keeps an admin key
// when SVC_API_KEY is not set (only its hash goes into the SQLite file), accepts SVC_API_KEY otherwise, and
// stops cleanly on SIGTERM.

import { afterAll, beforeAll, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { call } from "./helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
let dir: string;
const children = new Set<ChildProcess>();

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "svc-server-cli-"));
});
afterAll(async () => {
  for (const child of children) {
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  }
  rmSync(dir, { recursive: true, force: true });
});

async function startServer(env: Record<string, string>): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const base = { ...process.env };
  delete base.SVC_API_KEY;
  delete base.SVC_DATA_DIR;
  const child = spawn(process.execPath, [join(repo, "bin", "svc.js"), "server", "--port", "0", "--data-dir", join(dir, "data"), "--workers", "none"], {
    cwd: dir,
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  let stderr = "";
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`svc server exited (${code}): ${stderr}`)));
  });
  return { child, url, stderr: () => stderr };
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.once("exit", (code) => resolve(code));
    child.kill("SIGTERM");
  });
}

it("generates an admin key on first start, keeps it in <dataDir>/admin-key (0600) and stores only its hash", async () => {
  const first = await startServer({});
  expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  const keyFile = join(dir, "data", "admin-key");
  expect(statSync(keyFile).mode & 0o777).toBe(0o600);
  expect(first.stderr()).toContain(keyFile);
  const key = readFileSync(keyFile, "utf8").trim();
  const ok = await call(`${first.url}/v1/apps/none/environments/none`, { key });
  expect(ok.status).toBe(404); // authenticated: the app just does not exist
  expect((await call(`${first.url}/v1/apps/none/environments/none`, { key: "wrong" })).status).toBe(401);
  expect(await stop(first.child)).toBe(0);
  for (const f of readdirSync(join(dir, "data")).filter((f) => f.startsWith("svc.sqlite"))) {
    expect(readFileSync(join(dir, "data", f)).includes(Buffer.from(key))).toBe(false);
  }

  // Second start: same key from the file; SVC_API_KEY is accepted as well when set.
  const second = await startServer({ SVC_API_KEY: "from-the-environment" });
  expect((await call(`${second.url}/v1/apps/none/environments/none`, { key: "from-the-environment" })).status).toBe(404);
  expect(readFileSync(keyFile, "utf8").trim()).toBe(key);
  expect(await stop(second.child)).toBe(0);
  expect(second.stderr()).toMatch(/SIGTERM: stopping/);
}, 30_000);

it("refuses a second service on the same data directory while the first lives, and takes over after it crashed", async () => {
  const first = await startServer({});
  const second = spawn(process.execPath, [join(repo, "bin", "svc.js"), "server", "--port", "0", "--data-dir", join(dir, "data"), "--workers", "none"], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  second.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise((resolve) => second.once("exit", resolve));
  expect(code).toBe(1);
  expect(stderr).toContain(`The data directory ${join(dir, "data")} is in use by another svc service (pid ${first.child.pid})`);
  expect(stderr).toContain("--data-dir");
  // The first one was not disturbed.
  expect((await fetch(`${first.url}/openapi.json`)).status).toBe(200);

  // Crashed (no cleanup): the lock names a dead process, and the next start takes it over.
  first.child.kill("SIGKILL");
  await new Promise((r) => first.child.once("exit", r));
  const again = await startServer({});
  expect((await fetch(`${again.url}/openapi.json`)).status).toBe(200);
  expect(await stop(again.child)).toBe(0);
  expect(readdirSync(join(dir, "data"))).not.toContain("service.pid");
}, 60_000);

it("a start that cannot listen says why and what to do, and leaves no data directory it created", async () => {
  const { createServer } = await import("node:net");
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  const port = (taken.address() as { port: number }).port;
  const run = (dataDir: string, args: string[]) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const env = { ...process.env };
      delete env.SVC_API_KEY;
      const child = spawn(process.execPath, [join(repo, "bin", "svc.js"), "server", "--data-dir", dataDir, "--workers", "none", ...args], {
        cwd: dir,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
      child.once("exit", (code) => resolve({ code, stderr }));
    });
  try {
    const fresh = join(dir, "fresh-data");
    const busy = await run(fresh, ["--port", String(port)]);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toContain(`error: Port ${port} is already in use`);
    expect(busy.stderr).toContain("--port");
    expect(() => statSync(fresh)).toThrow();
    const nowhere = await run(fresh, ["--port", "0", "--host", "10.254.254.254"]);
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr).toContain("error: Cannot listen on 10.254.254.254: no such address on this machine");
    expect(nowhere.stderr).not.toMatch(/internal error|\n\s+at /);
    expect(() => statSync(fresh)).toThrow();
    // A data directory that already held a service's data keeps it.
    const kept = await run(join(dir, "data"), ["--port", String(port)]);
    expect(kept.code).toBe(1);
    expect(readdirSync(join(dir, "data"))).toContain("admin-key");
  } finally {
    taken.close();
  }
});

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
it.runIf(isRoot && existsSync("/usr/bin/bwrap"))(
  "a data directory sandboxed workers could not reach is refused at start, naming the directory that blocks them and the fix",
  async () => {
    // Another user's directory that others may not search: root passes it, a sandbox's user namespace does not.
    const parent = mkdtempSync(join(tmpdir(), "svc-unreachable-"));
    chownSync(parent, 65534, 65534);
    chmodSync(parent, 0o700);
    try {
      const env = { ...process.env };
      delete env.SVC_API_KEY;
      const child = spawn(process.execPath, [join(repo, "bin", "svc.js"), "server", "--data-dir", join(parent, "data"), "--port", "0", "--sandbox", "bwrap"], {
        cwd: dir,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      expect(code).toBe(1);
      expect(stderr).toContain(`Sandboxed workers cannot reach ${join(parent, "data", "artifact-cache")}: ${parent} belongs to another user`);
      expect(stderr).toContain(`chmod o+x ${parent}`);
      expect(stderr).not.toMatch(/\n\s+at /);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  },
  60_000,
);
