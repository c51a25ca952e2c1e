// The job API: /runsync latency and /run throughput through the real service, SQLite file and process
// workers, each beside plain loopback HTTP measured in the same run.
import { mkdtempSync, rmSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request, startPlainServer, percentile, pool } from "./http.mjs";

export const title = "job API: /runsync latency, /run throughput";

const root = fileURLToPath(new URL("..", import.meta.url));
const { buildProject } = await import(`${root}dist/build/index.js`);
const { startService } = await import(`${root}dist/service/index.js`);
const { createProcessDriver } = await import(`${root}dist/drivers/process.js`);

export async function run() {
  const work = mkdtempSync(join(tmpdir(), "svc-bench-jobs-"));
  const project = join(work, "app");
  cpSync(join(root, "fixtures", "bench-trivial"), project, { recursive: true });
  const build = await buildProject(project, {});
  const key = "bench-key";
  const service = await startService({ dataDir: join(work, "data"), driver: createProcessDriver(), apiKeys: [key] });
  const plain = await startPlainServer();
  const auth = { authorization: `Bearer ${key}` };
  try {
    const [endpoint] = await service.deploy({ app: build.manifest.app, env: "bench", manifest: build.manifest, artifactPath: build.artifactPath });
    const base = endpoint.url;

    // Warm up: workers started and registered, connections open.
    for (let i = 0; i < 50; i++) await request(`${base}/runsync`, { method: "POST", headers: auth, body: { input: { i } } });

    const N = 400;
    const baseline = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      for (let k = 0; k < 3; k++) await request(`${plain.url}/x`, { method: "POST", body: { input: { i } } });
      baseline.push(performance.now() - t);
    }
    const runsync = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      const res = await request(`${base}/runsync`, { method: "POST", headers: auth, body: { input: { i } } });
      if (res.status !== 200 || !res.body.includes("COMPLETED")) throw new Error(`runsync failed: ${res.status} ${res.body}`);
      runsync.push(performance.now() - t);
    }

    // Throughput: concurrent clients submit through /run while the workers drain the queue.
    const JOBS = 6000;
    const CLIENTS = 16;
    const plainMs = await pool(JOBS, CLIENTS, (i) => request(`${plain.url}/run`, { method: "POST", body: { input: { i } } }));
    const before = (JSON.parse((await request(`${base}/health`, { headers: auth })).body)).jobs.completed;
    const started = performance.now();
    const acceptMs = await pool(JOBS, CLIENTS, async (i) => {
      const res = await request(`${base}/run`, { method: "POST", headers: auth, body: { input: { i } } });
      if (res.status !== 200) throw new Error(`run failed: ${res.status} ${res.body}`);
    });
    let completed = 0;
    for (;;) {
      const health = JSON.parse((await request(`${base}/health`, { headers: auth })).body);
      completed = health.jobs.completed - before;
      if (completed >= JOBS || performance.now() - started > 120_000) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const doneMs = performance.now() - started;

    const p50 = percentile(runsync, 50);
    const b50 = percentile(baseline, 50);
    const p99 = percentile(runsync, 99);
    const b99 = percentile(baseline, 99);
    const acceptRate = (JOBS / acceptMs) * 1000;
    const doneRate = (completed / doneMs) * 1000;
    const plainRate = (JOBS / plainMs) * 1000;
    return [
      { name: "/runsync p50", value: p50, unit: "ms", baselineName: "3 plain loopback round trips p50", baseline: b50, ratio: p50 / b50, target: "<= 5x", met: p50 / b50 <= 5 },
      { name: "/runsync p99", value: p99, unit: "ms", baselineName: "3 plain loopback round trips p99", baseline: b99, ratio: p99 / b99, target: "", met: undefined },
      { name: `/run accepted (${CLIENTS} clients)`, value: acceptRate, unit: "jobs/s", baselineName: "plain loopback requests/s", baseline: plainRate, ratio: acceptRate / plainRate, target: ">= 3000 jobs/s", met: acceptRate >= 3000 },
      { name: "/run completed end to end (2 workers)", value: doneRate, unit: "jobs/s", baselineName: "plain loopback requests/s", baseline: plainRate, ratio: doneRate / plainRate, target: ">= 3000 jobs/s", met: doneRate >= 3000 },
    ];
  } finally {
    await plain.close();
    await service.close();
    rmSync(work, { recursive: true, force: true });
  }
}
