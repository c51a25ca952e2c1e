// Cold start of an endpoint with an expensive initialisation (fixtures/snapshot-app: a constructor that builds a
// large table for ~2 s): a job submitted at zero workers until its result, when the worker is restored from a
// snapshot taken after the constructor (process driver, CRIU) beside the same endpoint without a snapshot, whose
// fresh worker runs the constructor. Same build, same machine, samples interleaved.
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "./http.mjs";

export const title = "expensive init: first result from a restored worker vs a fresh one";

const root = fileURLToPath(new URL("..", import.meta.url));
const SAMPLES = 5;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function endpointOf(work, name, manifest, build) {
  const { startService } = await import(`${root}dist/service/index.js`);
  const { createProcessDriver } = await import(`${root}dist/drivers/process.js`);
  const key = "bench-key";
  const driver = createProcessDriver({ cacheDir: join(work, `cache-${name}`), snapshotDir: join(work, `snapshots-${name}`), envAllow: ["SNAPSHOT_COUNTER"] });
  const service = await startService({ dataDir: join(work, `data-${name}`), driver, apiKeys: [key] });
  const [endpoint] = await service.deploy({ app: `bench-snapshot-${name}`, env: "prod", manifest, artifactPath: build.artifactPath });
  const auth = { authorization: `Bearer ${key}` };
  const atZero = async () => {
    for (;;) {
      const h = JSON.parse((await request(`${endpoint.url}/health`, { headers: auth })).body);
      if (h.workers.idle + h.workers.running + h.workers.initializing === 0) return;
      await sleep(50);
    }
  };
  const coldStart = async () => {
    await atZero();
    const started = performance.now();
    const res = await request(`${endpoint.url}/runsync?wait=120000`, { method: "POST", headers: auth, body: { input: {} } });
    const ms = performance.now() - started;
    if (res.status !== 200 || !res.body.includes("COMPLETED")) throw new Error(`cold start job failed: ${res.status} ${res.body}`);
    return { ms, output: JSON.parse(res.body).output };
  };
  return { coldStart, close: () => service.close() };
}

export async function run() {
  // The service's own dry run: where it says no, the service starts fresh workers, and there is nothing to compare.
  const { checkpointProblem } = await import(`${root}dist/drivers/criu.js`);
  const problem = await checkpointProblem();
  if (problem) {
    return [
      {
        name: "restored vs fresh first result",
        value: "-",
        unit: "",
        baselineName: `not measured: ${problem}`,
        baseline: "-",
        ratio: "-",
        target: "<= 0.3x",
        met: undefined,
      },
    ];
  }
  const { buildProject } = await import(`${root}dist/build/index.js`);
  const work = mkdtempSync(join(tmpdir(), "svc-bench-snapshot-"));
  const previousCounter = process.env.SNAPSHOT_COUNTER;
  process.env.SNAPSHOT_COUNTER = join(work, "constructions.txt");
  let restored;
  let fresh;
  try {
    const project = join(work, "app");
    cpSync(join(root, "fixtures", "snapshot-app"), project, { recursive: true });
    mkdirSync(join(project, "node_modules"));
    symlinkSync(join(root, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
    const build = await buildProject(project);
    const withSnapshot = build.manifest;
    const withoutSnapshot = structuredClone(build.manifest);
    delete withoutSnapshot.resources.model.snapshot;
    restored = await endpointOf(work, "restored", withSnapshot, build);
    fresh = await endpointOf(work, "fresh", withoutSnapshot, build);
    // Warm-ups: the artifact's extraction and the page cache; the snapshotted endpoint's first one takes the image.
    await restored.coldStart();
    await fresh.coldStart();
    const restoredMs = [];
    const freshMs = [];
    for (let i = 0; i < SAMPLES; i++) {
      const r = await restored.coldStart();
      if (r.output.pid !== 1) throw new Error("the snapshotted endpoint's worker was not restored from its image");
      restoredMs.push(r.ms);
      freshMs.push((await fresh.coldStart()).ms);
    }
    const value = median(restoredMs);
    const baseline = median(freshMs);
    return [
      {
        name: `first result, worker restored from a snapshot (median of ${SAMPLES})`,
        value,
        unit: "ms",
        baselineName: "first result, fresh worker running the ~2 s constructor",
        baseline,
        ratio: value / baseline,
        target: "<= 0.3x",
        met: value / baseline <= 0.3,
      },
    ];
  } finally {
    await restored?.close();
    await fresh?.close();
    if (previousCounter === undefined) delete process.env.SNAPSHOT_COUNTER;
    else process.env.SNAPSHOT_COUNTER = previousCounter;
    rmSync(work, { recursive: true, force: true });
  }
}
