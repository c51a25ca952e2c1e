// Cold start on Docker Swarm: a job submitted to an endpoint at zero workers, until its result (the service
// creates a Swarm service from the local worker image, the swarm schedules its task, the runtime downloads the
// artifact over HTTP, registers and takes the job), beside `docker service create` of the same image running a
// plain HTTP server, timed to its first answer, in the same run. Makes a single-node swarm when the engine is not
// in one (and leaves it after); skips (one row saying so) when no Docker engine answers.
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "./http.mjs";

export const title = "cold start: Swarm worker from zero vs docker service create";

const root = fileURLToPath(new URL("..", import.meta.url));
const SAMPLES = 5;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

async function until(what, fn, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** `docker service create` of `image` running an HTTP server on the host network: ms to its first answer. */
async function plainService(docker, image, session) {
  const port = await freePort();
  const started = performance.now();
  const created = await docker.createService({
    Name: `svc-bench-plain-${port}`,
    Labels: { "svc.managed": "true", "svc.session": session },
    TaskTemplate: {
      ContainerSpec: {
        Image: image,
        Command: ["node", "-e", `require("http").createServer((q, s) => s.end("1")).listen(${port}, "127.0.0.1")`],
        Labels: { "svc.session": session },
      },
      RestartPolicy: { Condition: "none" },
      Networks: [{ Target: "host" }],
    },
    Mode: { Replicated: { Replicas: 1 } },
  });
  await until(
    "the plain service's answer",
    () =>
      fetch(`http://127.0.0.1:${port}/`).then(
        (r) => r.ok,
        () => false,
      ),
    60_000,
  );
  const ms = performance.now() - started;
  await docker.getService(created.id ?? created.ID).remove();
  return ms;
}

export async function run() {
  const { dockerAvailable } = await import(`${root}dist/drivers/docker-engine.js`);
  const { default: Docker } = await import("dockerode");
  const docker = new Docker();
  if (!(await dockerAvailable(docker))) {
    return [
      {
        name: "cold start (swarm)",
        value: "skipped",
        unit: "",
        baselineName: "no Docker engine (scripts/ensure-docker.sh)",
        baseline: "-",
        ratio: "-",
        target: "<= 1.5x",
        met: undefined,
      },
    ];
  }
  const { buildProject } = await import(`${root}dist/build/index.js`);
  const { startService } = await import(`${root}dist/service/index.js`);
  const { createSwarmDriver } = await import(`${root}dist/drivers/swarm.js`);
  const { ensureWorkerImage } = await import(`${root}dist/drivers/images.js`);

  const state = spawnSync("docker", ["info", "--format", "{{.Swarm.LocalNodeState}}"], { encoding: "utf8" }).stdout.trim();
  const madeSwarm = state !== "active";
  if (madeSwarm) execFileSync("docker", ["swarm", "init", "--advertise-addr", "127.0.0.1"], { stdio: "ignore" });
  const work = mkdtempSync(join(tmpdir(), "svc-bench-swarm-"));
  const session = `bench${Date.now().toString(36)}`;
  const key = "bench-key";
  const driver = createSwarmDriver({ docker, session });
  let service;
  try {
    const project = join(work, "app");
    cpSync(join(root, "fixtures", "swarm-app"), project, { recursive: true });
    mkdirSync(join(project, "node_modules"));
    symlinkSync(join(root, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "bench-swarm", private: true, type: "module" }));
    const build = await buildProject(project);
    // Named by its sha256, as an uploaded build is: workers on the swarm fetch it by that name.
    const sha = createHash("sha256").update(readFileSync(build.artifactPath)).digest("hex");
    const artifactPath = join(work, `${sha}.tar.gz`);
    copyFileSync(build.artifactPath, artifactPath);
    // The image build is a one-off, not part of a cold start.
    const image = (await ensureWorkerImage(docker, "cpu")).name;
    service = await startService({ dataDir: join(work, "data"), driver, apiKeys: [key] });
    const auth = { authorization: `Bearer ${key}` };
    const services = async () => (await docker.listServices({ filters: { label: [`svc.session=${session}`] } })).length;
    const [endpoint] = await service.deploy({ app: "bench-swarm", env: "prod", manifest: build.manifest, artifactPath });
    const coldStart = async () => {
      // At zero: the release's worker (or the last sample's) idled out (1 s) and was removed.
      await until("zero worker services", async () => (await services()) === 0, 120_000);
      const started = performance.now();
      const res = await request(`${endpoint.url}/runsync?wait=120000`, { method: "POST", headers: auth, body: { input: { n: 1, ms: 0 } } });
      const ms = performance.now() - started;
      if (res.status !== 200 || !res.body.includes("COMPLETED")) throw new Error(`cold start job failed: ${res.status} ${res.body}`);
      return ms;
    };

    // Warm-up: the engine's caches and the page cache for node.
    await plainService(docker, image, session);
    await coldStart();
    const cold = [];
    const plain = [];
    for (let i = 0; i < SAMPLES; i++) {
      plain.push(await plainService(docker, image, session));
      cold.push(await coldStart());
    }
    const value = median(cold);
    const baseline = median(plain);
    const ratio = value / baseline;
    return [
      {
        name: `cold start on Swarm, job to result (median of ${SAMPLES})`,
        value,
        unit: "ms",
        baselineName: "docker service create to first HTTP answer (same image)",
        baseline,
        ratio,
        target: "<= 1.5x",
        met: ratio <= 1.5,
      },
    ];
  } finally {
    await service?.close();
    await driver.close();
    for (const s of await docker.listServices({ filters: { label: [`svc.session=${session}`] } }).catch(() => []))
      await docker
        .getService(s.ID)
        .remove()
        .catch(() => undefined);
    if (madeSwarm) spawnSync("docker", ["swarm", "leave", "--force"], { stdio: "ignore" });
    rmSync(work, { recursive: true, force: true });
  }
}
