// Endpoints whose workers keep dying, on a real `svc server` with sandboxed process workers, deployed with the
// `svc` binary: one whose code SIGKILLs its worker as it loads, one whose jobs kill theirs. Their restarts back off
// (each wait twice the one before), their health, their record's statusReason and `svc doctor` say they are
// crash-looping, the metrics count the deaths by reason, and a completed job ends the crash loop.

import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startServerProcess, type ServerProcess } from "../server-process.js";
import { call, until } from "./helpers.js";
import { pathWithFailingCriu } from "../cli-output.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "crash-loop-server-admin-key";
let work: string;
let server: ServerProcess;
const endpoints: Record<string, { id: string; url: string }> = {};

function svc(args: string[]) {
  const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  return spawnSync(process.execPath, [join(repo, "bin", "svc.js"), ...args], {
    cwd: join(work, "app"),
    env: { ...base, SVC_API_URL: server.url, SVC_API_KEY: KEY, ...(args[0] === "doctor" ? { PATH: pathWithFailingCriu() } : {}) },
    encoding: "utf8",
    timeout: 120_000,
  });
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-crash-loop-server-"));
  cpSync(join(repo, "fixtures", "crash-loop-app"), join(work, "app"), { recursive: true });
  mkdirSync(join(work, "app", "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(work, "app", "node_modules", "svc"), "dir");
  server = await startServerProcess({ dataDir: join(work, "data"), env: { SVC_API_KEY: KEY } });
  const volume = await call(`${server.url}/v2/network-volumes`, { key: KEY, body: { name: "crash-loop-vol", size: 10, dataCenter: "local" } });
  expect(volume.status, JSON.stringify(volume.body)).toBe(201);
  const deployed = svc(["deploy", "--env", "prod", "--json"]);
  expect(deployed.status, deployed.stderr).toBe(0);
  for (const e of JSON.parse(deployed.stdout).endpoints) endpoints[e.name] = e;
}, 180_000);
afterAll(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** When each of the endpoint's workers died, from its log. */
async function deaths(endpointId: string): Promise<number[]> {
  const r = await call(`${server.url}/v1/endpoints/${endpointId}/logs`, { key: KEY });
  return (r.body.lines as Array<{ ts: number; text: string }>).filter((l) => /worker exited unexpectedly/.test(l.text)).map((l) => l.ts);
}

it("backs off the restarts of workers that die as they start, and says so in health, the record, doctor and metrics", async () => {
  const { id, url } = endpoints["dies-at-start"]!;
  // The first worker dies in a job that leaves its successors dying as they start; the job waits for them.
  expect((await call(`${url}/run`, { key: KEY, body: { input: { grow: true } } })).status).toBe(200);

  // Five deaths: each start waits twice as long as the one before (0.5 s, 1 s, 2 s, 4 s after a death).
  const times = await until(
    async () => {
      const t = await deaths(id);
      return t.length >= 5 ? t : undefined;
    },
    30_000,
    250,
  );
  const gaps = times.slice(1, 5).map((t, i) => t - times[i]!);
  gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(500 * 2 ** i));
  expect(gaps[3]!).toBeGreaterThan(gaps[0]! + 3000);

  const health = await call(`${url}/health`, { key: KEY });
  expect(health.body.crashLoop).toMatchObject({
    windowMs: 120_000,
    lastDeath: { reason: "sigkill", message: "killed (SIGKILL: out of memory, or killed from outside)" },
  });
  expect(health.body.crashLoop.deaths).toBeGreaterThanOrEqual(5);
  expect(health.body.jobs.inQueue + health.body.jobs.inProgress).toBe(1);
  expect(health.body.workers.idle + health.body.workers.running).toBe(0);

  const record = await call(`${server.url}/v1/endpoints/${id}`, { key: KEY });
  expect(record.status).toBe(200);
  expect(record.body.statusReason).toMatch(
    /^workers keep dying: \d+ in 2 min, last: killed \(SIGKILL: out of memory, or killed from outside\); (next start in \d+ s|the next worker may start now)$/,
  );
  expect(record.body.crashLoop.deaths).toBeGreaterThanOrEqual(5);

  const doctor = svc(["doctor", "--json"]);
  expect(doctor.stdout, doctor.stderr).toMatch(/^\{/);
  const findings = JSON.parse(doctor.stdout).findings as Array<{ check: string; level: string; detail: string; fix?: string }>;
  const loops = findings.filter((f) => f.check === "crash loops");
  expect(loops).toHaveLength(1);
  expect(loops[0]).toMatchObject({ level: "warn" });
  expect(loops[0]!.detail).toContain(`endpoint dies-at-start (${id}, crash-loop-app/prod): workers keep dying`);
  expect(loops[0]!.fix).toContain("svc logs dies-at-start --app crash-loop-app --env prod");

  const metrics = await call(`${server.url}/metrics`, { key: KEY });
  const counted = new RegExp(`svc_worker_deaths_total\\{endpoint="${id}",reason="sigkill"\\} (\\d+)`).exec(String(metrics.body));
  expect(Number(counted?.[1])).toBeGreaterThanOrEqual(5);
}, 150_000);

it("shows workers killed by their jobs as crash-looping until a job completes", async () => {
  const { id, url } = endpoints["dies-at-job"]!;
  // A job whose worker dies is run again twice (three deaths), then fails.
  const deadly = await call(`${url}/run`, { key: KEY, body: { input: { die: true } } });
  expect(deadly.status).toBe(200);
  const loop = await until(async () => (await call(`${url}/health`, { key: KEY })).body.crashLoop, 60_000, 250);
  expect(loop).toMatchObject({ deaths: 3, lastDeath: { reason: "sigkill" } });
  expect((await call(`${url}/status/${deadly.body.id}`, { key: KEY })).body.status).toBe("FAILED");
  expect((await call(`${server.url}/v1/endpoints/${id}`, { key: KEY })).body.statusReason).toMatch(/^workers keep dying: 3 in 2 min/);

  const fine = await call(`${url}/runsync`, { key: KEY, body: { input: {} } });
  expect(fine.body).toMatchObject({ status: "COMPLETED", output: { ok: true } });
  expect((await call(`${url}/health`, { key: KEY })).body.crashLoop).toBeUndefined();
  const record = (await call(`${server.url}/v1/endpoints/${id}`, { key: KEY })).body;
  expect(record.crashLoop).toBeUndefined();
  expect(record.statusReason).toBeNull();
}, 120_000);
