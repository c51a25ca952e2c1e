// A real `svc server` whose data directory is a small tmpfs (mounted by this test, as root) that fills up while
// jobs run: /run answers 503 with Retry-After and problem+json naming the full storage (never 500), refused jobs
// never run (after space returns), acknowledged jobs all complete exactly once, /health reports the storage, the
// log says it once each way, and the service resumes without a restart. Skipped with a notice where mounting is
// not allowed, except in CI.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { UNSANDBOXED } from "../server-process.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "storage-full-admin-key";
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? "");

let work: string;
let mountPoint: string;
let mounted = false;
let server: ChildProcess | undefined;
let serverLog = "";
let url = "";

function tryMount(dir: string): boolean {
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", "size=12m", "tmpfs", dir], { encoding: "utf8" });
  return r.status === 0;
}

work = mkdtempSync(join(tmpdir(), "svc-storage-full-"));
mountPoint = join(work, "small");
mkdirSync(mountPoint);
mounted = tryMount(mountPoint);
if (!mounted) {
  if (inCi) throw new Error("mounting a tmpfs failed and CI is set: the storage-fault tests must run in CI (as root)");
  process.stderr.write("[svc tests] skipping the full-disk tests: this user cannot mount a tmpfs (run as root)\n");
}

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as any };
}

beforeAll(async () => {
  if (!mounted) return;
  const dataDir = join(mountPoint, "data");
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: KEY };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") && k !== "SVC_API_KEY") delete env[k];
  Object.assign(env, UNSANDBOXED);
  server = spawn(process.execPath, [bin, "server", "--port", "0", "--data-dir", dataDir, "--workers", "process"], { env, stdio: ["ignore", "pipe", "pipe"] });
  server.stderr!.on("data", (d) => (serverLog += d));
  url = await new Promise<string>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${serverLog}`)), 30_000);
    server!.stdout!.on("data", (d) => {
      out += d;
      const line = /^(http:\/\/\S+)\n/.exec(out);
      if (line) {
        clearTimeout(timer);
        resolve(line[1]!);
      }
    });
  });
  await deployFixture(copyFixture("restart-app", work), url, KEY);
}, 120_000);

afterAll(() => {
  server?.kill("SIGKILL");
  if (mounted) spawnSync("umount", ["-l", mountPoint]);
  rmSync(work, { recursive: true, force: true });
});

describe.skipIf(!mounted)("svc server on a filesystem that fills up", () => {
  it("refuses with 503 what it cannot keep, runs only what it acknowledged (once each), and resumes when space returns", async () => {
    const endpoint = (await api("GET", "/v1/apps/restart-app/environments/prod")).body.endpoints[0].id as string;
    const marks = join(work, "runs.txt");
    const statuses: number[] = [];
    // Acknowledged before the disk fills: each runs ~1.5 s, one at a time (the endpoint has one worker).
    const acknowledged: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await api("POST", `/v2/${endpoint}/run`, { input: { n: 6, ms: 250, mark: marks, tag: `ack${i}` } });
      statuses.push(r.status);
      expect(r.status).toBe(200);
      acknowledged.push(r.body.id);
    }

    // Fill the filesystem.
    const filler = join(mountPoint, "filler");
    const fd = openSync(filler, "w");
    const block = Buffer.alloc(64 * 1024, 1);
    try {
      for (;;) writeSync(fd, block);
    } catch (err) {
      expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
    } finally {
      closeSync(fd);
    }

    // ~1 MB inputs while it is full: refused, honestly.
    const pad = "p".repeat(1024 * 1024);
    const refusedTags: string[] = [];
    let sawRefusal = false;
    for (let i = 0; i < 12; i++) {
      const r = await api("POST", `/v2/${endpoint}/run`, { input: { n: 1, ms: 1, mark: marks, tag: `late${i}`, pad } });
      statuses.push(r.status);
      if (r.status === 200) {
        acknowledged.push(r.body.id);
        continue;
      }
      sawRefusal = true;
      refusedTags.push(`late${i}`);
      expect(r.status).toBe(503);
      expect(r.headers.get("content-type")).toBe("application/problem+json");
      expect(r.headers.get("retry-after")).toBe("5");
      expect(r.body.detail).toContain("The service's storage is full");
    }
    expect(sawRefusal).toBe(true);
    // Reads keep working; /health says what is wrong.
    const health = await api("GET", `/v2/${endpoint}/health`);
    expect(health.status).toBe(200);
    expect(health.body.storage).toMatchObject({ ok: false, cause: "full" });
    expect((await api("GET", `/v2/${endpoint}/status/${acknowledged[0]}`)).status).toBe(200);
    // The running jobs' completions cannot be written meanwhile.
    await new Promise((r) => setTimeout(r, 3000));

    rmSync(filler);
    const deadline = Date.now() + 60_000;
    for (const id of acknowledged) {
      for (;;) {
        const r = await api("GET", `/v2/${endpoint}/status/${id}`);
        statuses.push(r.status);
        if (r.body?.status === "COMPLETED") break;
        if (Date.now() > deadline) throw new Error(`job ${id} still ${r.body?.status}`);
        await new Promise((res) => setTimeout(res, 200));
      }
    }
    expect((await api("GET", `/v2/${endpoint}/health`)).body.storage).toMatchObject({ ok: true });

    // Each acknowledged job ran exactly once; no refused one ever ran.
    const runs = readFileSync(marks, "utf8").trim().split("\n");
    for (let i = 0; i < 4; i++) expect(runs.filter((t) => t === `ack${i}`)).toHaveLength(1);
    for (const tag of refusedTags) expect(runs).not.toContain(tag);
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
    // Said once when it began and once when it cleared.
    expect(serverLog.match(/storage refuses writes: The service's storage is full/g)).toHaveLength(1);
    expect(serverLog.match(/storage takes writes again/g)).toHaveLength(1);
    expect(existsSync(filler)).toBe(false);
  }, 120_000);

  it("a data directory it cannot write is a clear error at start", () => {
    const readOnly = join(work, "ro");
    mkdirSync(readOnly);
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", readOnly]).status).toBe(0);
    try {
      const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: KEY };
      for (const k of Object.keys(env)) if (k.startsWith("SVC_") && k !== "SVC_API_KEY") delete env[k];
      const r = spawnSync(process.execPath, [bin, "server", "--port", "0", "--data-dir", readOnly], { env, encoding: "utf8", timeout: 30_000 });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`The service cannot write its data directory ${readOnly}`);
      expect(r.stderr).toMatch(/--data-dir/);
    } finally {
      spawnSync("umount", ["-l", readOnly]);
    }
  }, 60_000);
});
