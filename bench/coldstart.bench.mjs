// Cold start with Docker workers: a job submitted to an endpoint at zero workers, until its result (the service
// starts a container from the local worker image, the runtime extracts the mounted artifact, registers, takes
// the job), beside a plain `docker run --rm <same image> node -e "console.log(1)"` timed in the same run. Then
// the same with the driver's pool: a pre-booted container is claimed instead (docs/cold-start.md).
// Skips (one row saying so) when no Docker engine answers.
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "./http.mjs";

export const title = "cold start: Docker worker from zero (fresh and pre-booted) vs plain docker run";

const root = fileURLToPath(new URL("..", import.meta.url));
const SAMPLES = 5;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** `docker run --rm image node -e ...` with the docker CLI; through the engine API when there is no CLI. */
async function plainRun(docker, image) {
  const started = performance.now();
  const cli = await new Promise((resolve) => {
    const child = spawn("docker", ["run", "--rm", image, "node", "-e", "console.log(1)"], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("error", () => resolve(undefined));
    child.on("close", (code) => resolve(code === 0 && out.trim() === "1" ? "ok" : `exit ${code}`));
  });
  if (cli === "ok") return performance.now() - started;
  if (cli !== undefined) throw new Error(`docker run failed: ${cli}`);
  const t = performance.now();
  const container = await docker.createContainer({ Image: image, Cmd: ["node", "-e", "console.log(1)"], HostConfig: { AutoRemove: true } });
  await container.start();
  await container.wait();
  return performance.now() - t;
}

/**
 * Median cold start (job to result from zero workers) of the endpoint on `driver`, and the median plain
 * `docker run` measured between its samples. With a pool, each sample waits for the pool to be full again.
 */
async function coldStarts(driver, poolSize, build, work, docker, image, samples) {
  const { startService } = await import(`${root}dist/service/index.js`);
  const key = "bench-key";
  const service = await startService({ dataDir: join(work, `data-${driver.session}`), driver, apiKeys: [key] });
  try {
    const auth = { authorization: `Bearer ${key}` };
    const [endpoint] = await service.deploy({ app: "bench-coldstart", env: "prod", manifest: build.manifest, artifactPath: build.artifactPath });
    const coldStart = async () => {
      for (;;) {
        const h = JSON.parse((await request(`${endpoint.url}/health`, { headers: auth })).body);
        if (h.workers.idle + h.workers.running + h.workers.initializing === 0 && driver.pooledContainers().length === poolSize) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      // Its container gone too, not only deregistered.
      await new Promise((r) => setTimeout(r, 500));
      const started = performance.now();
      const res = await request(`${endpoint.url}/runsync?wait=60000`, { method: "POST", headers: auth, body: { input: { n: 1, ms: 0 } } });
      const ms = performance.now() - started;
      if (res.status !== 200 || !res.body.includes("COMPLETED")) throw new Error(`cold start job failed: ${res.status} ${res.body}`);
      return ms;
    };
    // Warm-up: the engine's caches, the session network and its forwarder, the page cache for node.
    await plainRun(docker, image);
    await coldStart();
    const cold = [];
    const plain = [];
    for (let i = 0; i < samples; i++) {
      plain.push(await plainRun(docker, image));
      cold.push(await coldStart());
    }
    return { value: median(cold), baseline: median(plain) };
  } finally {
    await service.close();
  }
}

export async function run() {
  const { dockerAvailable } = await import(`${root}dist/drivers/docker-engine.js`);
  const { default: Docker } = await import("dockerode");
  const docker = new Docker();
  if (!(await dockerAvailable(docker))) {
    return [
      {
        name: "cold start (docker)",
        value: "skipped",
        unit: "",
        baselineName: "no Docker engine (scripts/ensure-docker.sh)",
        baseline: "-",
        ratio: "-",
        target: "<= 2x",
        met: undefined,
      },
    ];
  }
  const { buildProject } = await import(`${root}dist/build/index.js`);
  const { createDockerDriver } = await import(`${root}dist/drivers/docker.js`);
  const { cleanupStale } = await import(`${root}dist/drivers/docker-host.js`);
  const { workerImageName } = await import(`${root}dist/drivers/image-names.js`);

  const work = mkdtempSync(join(tmpdir(), "svc-bench-coldstart-"));
  const drivers = [];
  try {
    // An endpoint that idles out after 1 s: each sample starts from zero workers (a deploy's release leaves one
    // worker up, warm).
    const project = join(work, "app");
    cpSync(join(root, "fixtures", "swarm-app"), project, { recursive: true });
    mkdirSync(join(project, "node_modules"));
    symlinkSync(join(root, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "bench-coldstart", private: true, type: "module" }));
    const build = await buildProject(project);
    const fresh = createDockerDriver({ docker, networkScope: "session", volumeLifetime: "session" });
    drivers.push(fresh);
    // The image build is a one-off, not part of a cold start.
    await fresh.prepare(["cpu"]);
    const image = workerImageName("cpu");
    const unpooled = await coldStarts(fresh, 0, build, work, docker, image, SAMPLES);
    // The same with one pre-booted container kept ready (docs/cold-start.md).
    const pool = createDockerDriver({ docker, networkScope: "session", volumeLifetime: "session", pool: 1 });
    drivers.push(pool);
    const pooled = await coldStarts(pool, 1, build, work, docker, image, SAMPLES);
    // As `svc server` runs it: one network per app/environment, the pool on its own; a claim moves the container.
    const moving = createDockerDriver({ docker, networkScope: "app-env", volumeLifetime: "session", pool: 1 });
    drivers.push(moving);
    const moved = await coldStarts(moving, 1, build, work, docker, image, SAMPLES);
    const baselineName = "docker run --rm node -e (same image), between the samples";
    return [
      {
        name: `cold start, job to result (median of ${SAMPLES})`,
        ...unpooled,
        unit: "ms",
        baselineName,
        ratio: unpooled.value / unpooled.baseline,
        target: "<= 2x",
        met: unpooled.value / unpooled.baseline <= 2,
      },
      {
        name: `cold start from a pre-booted container (median of ${SAMPLES})`,
        ...pooled,
        unit: "ms",
        baselineName,
        ratio: pooled.value / pooled.baseline,
        target: "<= 0.5x",
        met: pooled.value / pooled.baseline <= 0.5,
      },
      {
        name: `the same, moved to its app/env network at the claim (median of ${SAMPLES})`,
        ...moved,
        unit: "ms",
        baselineName,
        ratio: moved.value / moved.baseline,
        target: "<= 0.5x",
        met: moved.value / moved.baseline <= 0.5,
      },
    ];
  } finally {
    for (const driver of drivers) {
      await driver.close();
      await cleanupStale({ "svc.session": driver.session }, { docker }).catch(() => undefined);
    }
    rmSync(work, { recursive: true, force: true });
  }
}
