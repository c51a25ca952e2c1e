// The job API measured through a real service and process workers, beside plain loopback HTTP in the same run:
// the workload both job benches run (jobs.bench.mjs on SQLite, postgres.bench.mjs on PostgreSQL).
import { mkdtempSync, rmSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { request, startPlainServer, percentile } from "./http.mjs";

const run_ = promisify(execFile);

const root = fileURLToPath(new URL("..", import.meta.url));
const { buildProject } = await import(`${root}dist/build/index.js`);
const { startService } = await import(`${root}dist/service/index.js`);
const { createProcessDriver } = await import(`${root}dist/drivers/process.js`);

/** /runsync latency and /run throughput through a real service on `storeUrl` (else SQLite), beside plain loopback. */
export async function measureJobApi({ storeUrl } = {}) {
  const work = mkdtempSync(join(tmpdir(), "svc-bench-jobs-"));
  const project = join(work, "app");
  cpSync(join(root, "fixtures", "bench-trivial"), project, { recursive: true });
  const build = await buildProject(project, {});
  const key = "bench-key";
  const service = await startService({ dataDir: join(work, "data"), storeUrl, driver: createProcessDriver(), apiKeys: [key] });
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

    // Throughput: 16 concurrent clients, in a process of their own (bench/load-client.mjs), submit through /run
    // while the workers drain the queue; the same client sends the same requests to the plain server first. Three
    // such rounds, medians of each rate: the host's speed drifts within a run (the plain baseline alone moved by 45%
    // between runs), and one round measured at a slow moment said more about the moment than about the service.
    const JOBS = 6000;
    const CLIENTS = 16;
    const ROUNDS = 3;
    const plainRates = [];
    const acceptRates = [];
    const doneRates = [];
    for (let round = 0; round < ROUNDS; round++) {
      const before = JSON.parse((await request(`${base}/health`, { headers: auth })).body).jobs.completed;
      const plan = {
        targets: [
          { name: "plain", url: `${plain.url}/run`, method: "POST", body: { input: { i: "{i}" } } },
          { name: "run", url: `${base}/run`, method: "POST", headers: auth, body: { input: { i: "{i}" } } },
        ],
        total: JOBS,
        concurrency: CLIENTS,
      };
      const client = run_(process.execPath, [join(root, "bench", "load-client.mjs"), JSON.stringify(plan)], { maxBuffer: 1 << 20 });
      // Meanwhile: when did the last of those jobs complete?
      let completed = 0;
      let doneAt = Date.now();
      for (const deadline = Date.now() + 180_000; Date.now() < deadline; ) {
        const health = JSON.parse((await request(`${base}/health`, { headers: auth })).body);
        completed = health.jobs.completed - before;
        doneAt = Date.now();
        if (completed >= JOBS) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      const measured = JSON.parse((await client).stdout);
      plainRates.push(measured.plain.rps);
      acceptRates.push(measured.run.rps);
      doneRates.push((completed / (doneAt - measured.run.startedAt)) * 1000);
    }

    const p50 = percentile(runsync, 50);
    const b50 = percentile(baseline, 50);
    const p99 = percentile(runsync, 99);
    const b99 = percentile(baseline, 99);
    const acceptRate = percentile(acceptRates, 50);
    const doneRate = percentile(doneRates, 50);
    const plainRate = percentile(plainRates, 50);
    return { p50, b50, p99, b99, acceptRate, doneRate, plainRate, clients: CLIENTS };
  } finally {
    await plain.close();
    await service.close();
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * What metrics cost on /run throughput: two services on SQLite with process workers, one with metrics on (the
 * default) and one with them off (SVC_METRICS=off), each measured in rounds taken in turn (on, off, on, ...) by
 * the same load client, their order turning each round; the medians of each. The /run path with metrics on observes one HTTP histogram sample per
 * request and, when the job ends, its delay, execution and final-status series.
 */
export async function measureMetricsCost({ jobs = 4000, clients = 16, rounds = 7 } = {}) {
  const work = mkdtempSync(join(tmpdir(), "svc-bench-metrics-"));
  const project = join(work, "app");
  cpSync(join(root, "fixtures", "bench-trivial"), project, { recursive: true });
  const build = await buildProject(project, {});
  const key = "bench-key";
  const auth = { authorization: `Bearer ${key}` };
  const services = {};
  try {
    for (const [name, metrics] of [
      ["on", true],
      ["off", false],
    ]) {
      const service = await startService({ dataDir: join(work, `data-${name}`), driver: createProcessDriver(), apiKeys: [key], metrics });
      services[name] = { service, rates: [] };
      const [endpoint] = await service.deploy({ app: build.manifest.app, env: "bench", manifest: build.manifest, artifactPath: build.artifactPath });
      services[name].base = endpoint.url;
      for (let i = 0; i < 50; i++) await request(`${endpoint.url}/runsync`, { method: "POST", headers: auth, body: { input: { i } } });
    }
    for (let round = 0; round < rounds; round++) {
      // The order turns each round: the first of a pair meets the machine as the pair before left it.
      for (const name of round % 2 === 0 ? ["on", "off"] : ["off", "on"]) {
        const { base, rates } = services[name];
        const before = JSON.parse((await request(`${base}/health`, { headers: auth })).body).jobs.completed;
        const plan = {
          targets: [{ name: "run", url: `${base}/run`, method: "POST", headers: auth, body: { input: { i: "{i}" } } }],
          total: jobs,
          concurrency: clients,
        };
        const measured = JSON.parse(
          (await run_(process.execPath, [join(root, "bench", "load-client.mjs"), JSON.stringify(plan)], { maxBuffer: 1 << 20 })).stdout,
        );
        rates.push(measured.run.rps);
        // The queue drained before the next round, so no round pays for the one before.
        for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
          const health = JSON.parse((await request(`${base}/health`, { headers: auth })).body);
          if (health.jobs.completed - before >= jobs) break;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    }
    const on = percentile(services.on.rates, 50);
    const off = percentile(services.off.rates, 50);
    // The ratio is the median of the rounds' own ratios, as in the peer rows: a round where the machine was busy
    // for both services then counts as one round, not as a low rate on one side only.
    const ratios = services.on.rates.map((r, i) => r / services.off.rates[i]);
    return { on, off, ratio: percentile(ratios, 50), clients, rounds, spread: [Math.min(...ratios), Math.max(...ratios)] };
  } finally {
    for (const s of Object.values(services)) await s.service.close();
    rmSync(work, { recursive: true, force: true });
  }
}
