// Cold start with the process driver's pre-booted runtimes: a job submitted to an endpoint at zero workers, until
// its result (a waiting runtime is claimed, loads the handler, registers, takes the job), beside starting a plain
// `node -e "console.log(1)"` to its output, in the same run. The same cold start without the pool is shown too.
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "./http.mjs";

export const title = "cold start: pre-booted process runtime vs node -e";

const root = fileURLToPath(new URL("..", import.meta.url));
const SAMPLES = 9;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function nodeStart() {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", "console.log(1)"], { stdio: ["ignore", "pipe", "ignore"] });
    child.stdout.once("data", () => resolve(performance.now() - started));
    child.once("error", reject);
  });
}

/** Median cold start with `pool` runtimes, and the median `node -e` start measured between its samples. */
async function coldStarts(pool, build, work) {
  const { startService } = await import(`${root}dist/service/index.js`);
  const { createProcessDriver } = await import(`${root}dist/drivers/process.js`);
  const key = "bench-key";
  const driver = createProcessDriver({ cacheDir: join(work, `cache-${pool}`), pool });
  const service = await startService({ dataDir: join(work, `data-${pool}`), driver, apiKeys: [key] });
  try {
    const deployed = await service.deploy({ app: "bench-pool", env: "prod", manifest: build.manifest, artifactPath: build.artifactPath });
    const endpoint = deployed.find((e) => e.name === "first");
    const auth = { authorization: `Bearer ${key}` };
    const atZero = async () => {
      for (;;) {
        const h = JSON.parse((await request(`${endpoint.url}/health`, { headers: auth })).body);
        if (h.workers.idle + h.workers.running + h.workers.initializing === 0 && driver.pooledPids().length === pool) return;
        await sleep(50);
      }
    };
    const samples = [];
    const plain = [];
    for (let i = 0; i <= SAMPLES; i++) {
      await atZero();
      // The pool's runtimes have loaded and wait (a just-refilled one is still booting).
      await sleep(300);
      const started = performance.now();
      const res = await request(`${endpoint.url}/runsync?wait=60000`, { method: "POST", headers: auth, body: { input: {} } });
      const ms = performance.now() - started;
      if (res.status !== 200 || !res.body.includes("COMPLETED")) throw new Error(`cold start job failed: ${res.status} ${res.body}`);
      // The first is a warm-up (the artifact's extraction, the page cache).
      if (i > 0) samples.push(ms);
      // The baseline in the same conditions: between the samples, not in another minute of the machine's life.
      plain.push(await nodeStart());
    }
    return { value: median(samples), baseline: median(plain) };
  } finally {
    await service.close();
  }
}

export async function run() {
  const { buildProject } = await import(`${root}dist/build/index.js`);
  const work = mkdtempSync(join(tmpdir(), "svc-bench-pool-"));
  try {
    const project = join(work, "app");
    cpSync(join(root, "fixtures", "pool-app"), project, { recursive: true });
    mkdirSync(join(project, "node_modules"));
    symlinkSync(join(root, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
    const build = await buildProject(project);
    const pooled = await coldStarts(2, build, work);
    const unpooled = await coldStarts(0, build, work);
    const baselineName = "node -e console.log(1) to its output (between the samples)";
    return [
      {
        name: `cold start with the pool, job to result (median of ${SAMPLES})`,
        ...pooled,
        unit: "ms",
        baselineName,
        ratio: pooled.value / pooled.baseline,
        target: "<= 0.5x",
        met: pooled.value / pooled.baseline <= 0.5,
      },
      {
        name: `cold start without the pool (median of ${SAMPLES})`,
        ...unpooled,
        unit: "ms",
        baselineName,
        ratio: unpooled.value / unpooled.baseline,
        target: "",
        met: undefined,
      },
    ];
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
