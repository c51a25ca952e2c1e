// What the process workers' sandbox (bubblewrap: namespaces, seccomp, cgroup limits) costs: a cold start from the
// pool, a cold start without one, and a warm /runsync, each sandboxed beside the same unsandboxed. The two services
// run side by side and their samples alternate, so both see the same machine. Target: the sandbox adds at most 25%
// to a cold start from the pool.
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "./http.mjs";

export const title = "process workers: sandboxed (bubblewrap) vs not";

const root = fileURLToPath(new URL("..", import.meta.url));
const SAMPLES = 9;
const WARM_SAMPLES = 41;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const KEY = "bench-key";
const auth = { authorization: `Bearer ${KEY}` };

async function startOne(name, sandbox, pool, build, work) {
  const { startService } = await import(`${root}dist/service/index.js`);
  const { createProcessDriver } = await import(`${root}dist/drivers/process.js`);
  const driver = createProcessDriver({ cacheDir: join(work, `cache-${name}`), pool, sandbox });
  const service = await startService({ dataDir: join(work, `data-${name}`), driver, apiKeys: [KEY] });
  const deployed = await service.deploy({ app: "bench-sandbox", env: "prod", manifest: build.manifest, artifactPath: build.artifactPath });
  const endpoint = deployed.find((e) => e.name === "first");
  return { driver, service, endpoint, pool };
}

async function atZero({ endpoint, driver, pool }) {
  for (;;) {
    const h = JSON.parse((await request(`${endpoint.url}/health`, { headers: auth })).body);
    if (h.workers.idle + h.workers.running + h.workers.initializing === 0 && driver.pooledPids().length === pool) return;
    await sleep(50);
  }
}

async function runsync(one) {
  const started = performance.now();
  const res = await request(`${one.endpoint.url}/runsync?wait=60000`, { method: "POST", headers: auth, body: { input: {} } });
  const ms = performance.now() - started;
  if (res.status !== 200 || !res.body.includes("COMPLETED")) throw new Error(`job failed: ${res.status} ${res.body}`);
  return ms;
}

/** Median cold starts of the two, sampled alternately; the first of each is a warm-up (extraction, page cache). */
async function coldStarts(a, b) {
  const samples = [[], []];
  for (let i = 0; i <= SAMPLES; i++) {
    for (const [k, one] of [a, b].entries()) {
      await atZero(one);
      // The pool's runtimes have loaded and wait (a just-refilled one is still booting).
      await sleep(300);
      const ms = await runsync(one);
      if (i > 0) samples[k].push(ms);
    }
  }
  return samples.map(median);
}

/** Median /runsync of a warm worker (its endpoint keeps it for 1 s idle: the calls follow each other). */
async function warm(a, b) {
  const samples = [[], []];
  for (const [k, one] of [a, b].entries()) {
    await runsync(one);
    for (let i = 0; i < WARM_SAMPLES; i++) samples[k].push(await runsync(one));
  }
  return samples.map(median);
}

export async function run() {
  const { resolveSandbox } = await import(`${root}dist/drivers/sandbox/index.js`);
  let sandbox;
  try {
    sandbox = resolveSandbox({ setting: "bwrap" });
  } catch (err) {
    return [
      {
        name: "(skipped: no sandbox here)",
        value: "-",
        unit: "",
        baselineName: String(err.message).slice(0, 80),
        baseline: "-",
        ratio: "-",
        target: "",
        met: undefined,
      },
    ];
  }
  sandbox.dispose();
  const { buildProject } = await import(`${root}dist/build/index.js`);
  const work = mkdtempSync(join(tmpdir(), "svc-bench-sandbox-"));
  const started = [];
  try {
    const project = join(work, "app");
    cpSync(join(root, "fixtures", "pool-app"), project, { recursive: true });
    mkdirSync(join(project, "node_modules"));
    symlinkSync(join(root, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
    const build = await buildProject(project);
    const rows = [];
    const baselineName = "the same, unsandboxed (alternating samples)";
    for (const pool of [1, 0]) {
      const boxed = await startOne(`bwrap-${pool}`, "bwrap", pool, build, work);
      started.push(boxed);
      const plain = await startOne(`none-${pool}`, "none", pool, build, work);
      started.push(plain);
      const [value, baseline] = await coldStarts(boxed, plain);
      const ratio = value / baseline;
      rows.push(
        pool
          ? {
              name: `cold start from the pool, sandboxed, job to result (median of ${SAMPLES})`,
              value,
              baseline,
              unit: "ms",
              baselineName,
              ratio,
              target: "<= 1.25x",
              met: ratio <= 1.25,
            }
          : {
              name: `cold start without the pool, sandboxed (median of ${SAMPLES})`,
              value,
              baseline,
              unit: "ms",
              baselineName,
              ratio,
              target: "",
              met: undefined,
            },
      );
      if (pool) {
        const [w, wBase] = await warm(boxed, plain);
        rows.push({
          name: `/runsync p50 on a warm worker, sandboxed (${WARM_SAMPLES} calls)`,
          value: w,
          baseline: wBase,
          unit: "ms",
          baselineName,
          ratio: w / wBase,
          target: "",
          met: undefined,
        });
      }
      for (const one of started.splice(0)) await one.service.close();
    }
    return rows;
  } finally {
    for (const one of started) await one.service.close().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }
}
