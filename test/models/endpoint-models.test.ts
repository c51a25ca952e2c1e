// Endpoints that name models, end to end: a real build of fixtures/models-app (two endpoints naming one model),
// the process driver, and a fake Hugging Face hub (test/fakes/hf-hub.ts). The host fetches the model once
// before the workers start, and each worker's Python finds it with huggingface_hub's own offline lookups in the
// cache the service filled; a REST endpoint naming a model the hub does not have waits, says why, and keeps its
// job queued until the model can be fetched.

import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";
import { emptyProject } from "../fixture-project.js";
import { type FakeHub, sha256, startFakeHub } from "../fakes/hf-hub.js";
import { huggingfaceHubPython } from "./python-hf.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "models-admin-key";
const COMMIT = "d".repeat(40);
const weights = randomBytes(2 * 1024 * 1024);
const py = huggingfaceHubPython();
let dir: string;
let hub: FakeHub;
let service: Service;
let first: DeployedEndpoint;
let second: DeployedEndpoint;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-models-e2e-"));
  hub = await startFakeHub();
  hub.add("acme/tiny", COMMIT, [
    { name: "config.json", content: Buffer.from('{"model_type":"gpt2"}') },
    { name: "model.safetensors", content: weights, lfs: true },
  ]);
  cpSync(join(repo, "fixtures", "models-app"), join(dir, "app"), { recursive: true });
  const build = await buildProject(join(dir, "app"));
  service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [KEY],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
    models: { hub: hub.url, retryMs: 300 },
  });
  const deployed = await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath });
  first = deployed.find((e) => e.name === "first")!;
  second = deployed.find((e) => e.name === "second")!;
}, 120_000);
afterAll(async () => {
  await service?.close();
  await hub?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it("fetches a model two endpoints name once, and each worker's huggingface_hub finds it offline in the service's cache", async (ctx) => {
  if (!py.python) return ctx.skip(py.problem);
  const cache = join(dir, "data", "models");
  for (const endpoint of [first, second]) {
    const r = await call(`${endpoint.url}/runsync`, { key: KEY, body: { input: { python: py.python } } });
    expect(r.body.status).toBe("COMPLETED");
    expect(r.body.output).toMatchObject({
      folder: join(cache, "hub", "models--acme--tiny", "snapshots", COMMIT),
      files: ["config.json", "model.safetensors"],
      sha256: sha256(weights),
      env: { HF_HOME: cache, HF_HUB_CACHE: join(cache, "hub"), HF_HUB_OFFLINE: "1" },
    });
  }
  // Once per host, whichever endpoint asked first: one listing, one download of each file.
  expect(hub.requests.filter((r) => r.path.includes("/revision/"))).toHaveLength(1);
  expect(hub.requests.filter((r) => r.method === "GET" && r.path.endsWith("/model.safetensors"))).toHaveLength(1);
  const models = (await call(`${service.url}/v1/models`, { key: KEY })).body;
  expect(models).toMatchObject({ hub: hub.url, models: [{ model: "acme/tiny@main", state: "ready", commit: COMMIT }] });
}, 90_000);

it("an endpoint whose model cannot be fetched waits with the reason, its job queued, and runs it once the hub has the model", async (ctx) => {
  if (!py.python) return ctx.skip(py.problem);
  const template = (await call(`${service.url}/v1/templates`, { key: KEY, body: { name: "first-code", imageName: `svc://${first.id}` } })).body;
  const created = await call(`${service.url}/v1/endpoints`, {
    key: KEY,
    body: { name: "later", templateId: template.id, computeType: "CPU", workersMax: 1, idleTimeout: 1, models: ["acme/later@main"] },
  });
  expect(created.status).toBe(201);
  expect(created.body.models).toEqual(["acme/later@main"]);
  const bad = await call(`${service.url}/v1/endpoints`, { key: KEY, body: { name: "bad", templateId: template.id, models: ["not a model"] } });
  expect(bad.status).toBe(422);
  expect(bad.body.errors.join("\n")).toContain('"not a model" is not a model: write it as org/name@revision');
  const id = created.body.id as string;
  const job = (await call(`${service.url}/v2/${id}/run`, { key: KEY, body: { input: { python: py.python } } })).body;
  const waiting = await until(async () => {
    const e = (await call(`${service.url}/v1/endpoints/${id}`, { key: KEY })).body;
    return e.status === "WAITING" && e.statusReason?.includes("cannot be fetched") && e;
  });
  expect(waiting.statusReason).toMatch(
    /^model acme\/later@main cannot be fetched from http:\/\/127\.0\.0\.1:\d+: the hub has no revision acme\/later@main \(404\); trying again in \d+ s/,
  );
  expect((await call(`${service.url}/v2/${id}/status/${job.id}`, { key: KEY })).body.status).toBe("IN_QUEUE");
  hub.add("acme/later", "e".repeat(40), [{ name: "model.safetensors", content: weights, lfs: true }]);
  // The copy of first's code looks up acme/tiny, which the cache holds: what matters is that the job runs.
  const done = await until(
    async () => {
      const s = (await call(`${service.url}/v2/${id}/status/${job.id}`, { key: KEY })).body;
      return s.status === "COMPLETED" && s;
    },
    60_000,
    200,
  );
  expect(done.output.sha256).toBe(sha256(weights));
  expect((await call(`${service.url}/v1/endpoints/${id}`, { key: KEY })).body).toMatchObject({ status: "READY", statusReason: null });
}, 120_000);

it("a release whose endpoint names a model still downloading waits for it past its start timeout, saying how far it is, then goes live", async () => {
  const own = mkdtempSync(join(tmpdir(), "svc-models-release-"));
  const slowHub = await startFakeHub();
  slowHub.add("acme/slow", "f".repeat(40), [{ name: "model.safetensors", content: weights, lfs: true }]);
  // 2 MB at 300 kB/s: about 7 s, longer than the release's 3 s start timeout; the worker then has 3 s to start.
  slowHub.throttle(300 * 1024);
  const releasing = await startService({
    dataDir: join(own, "data"),
    apiKeys: [KEY],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(own, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
    releaseAttempts: 1,
    releaseStartTimeoutMs: 3000,
    models: { hub: slowHub.url, retryMs: 300 },
  });
  try {
    const project = emptyProject(own, "slow-model");
    const deployNow = async () => {
      const build = await buildProject(project);
      return releasing.deploy({ app: "slow-model", env: "prod", manifest: build.manifest, artifactPath: build.artifactPath });
    };
    // The environment's first release; the next one adds an endpoint naming the model.
    writeFileSync(join(project, "src", "plain.mjs"), `import { Endpoint } from "svc";\nexport const plain = Endpoint({ name: "plain" })(async () => 1);\n`);
    await deployNow();
    writeFileSync(
      join(project, "src", "slow.mjs"),
      `import { Endpoint } from "svc";\nexport const slow = Endpoint({ name: "slow", models: ["acme/slow"], workers: [1, 1] })(async function slow() {\n  return { cache: process.env.HF_HUB_CACHE };\n});\n`,
    );
    const deploying = deployNow();
    deploying.catch(() => undefined /* awaited below; a failed assertion before must not leave it unhandled */);
    const releases = `${releasing.url}/v1/apps/slow-model/environments/prod/releases`;
    // What the release says of its endpoint meanwhile (and `svc deploy` prints): how far the download is.
    const waits: string[] = [];
    const seen = await until(
      async () => {
        // (Not found until the deploy has made the environment.)
        const starting = (await call(releases, { key: KEY })).body.releases?.find((r: { state: string }) => r.state === "starting");
        const waiting = starting?.endpoints.find((e: { name: string; waiting?: string }) => e.name === "slow")?.waiting as string | undefined;
        if (waiting) waits.push(waiting);
        return waits.length >= 2 && waits[0] !== waits.at(-1) ? waits : undefined;
      },
      15_000,
      200,
    );
    expect(seen[0]).toMatch(/^fetching model acme\/slow@main: (looking it up on http:\/\/127\.0\.0\.1:\d+|[\d.]+ of 2\.1 MB)$/);
    expect(seen.at(-1)).toMatch(/^fetching model acme\/slow@main: [\d.]+ of 2\.1 MB$/);
    // The download took longer than the start timeout: the release went live all the same.
    const endpoint = (await deploying).find((e) => e.name === "slow");
    const r = await call(`${endpoint!.url}/runsync`, { key: KEY, body: { input: {} } });
    expect(r.body).toMatchObject({ status: "COMPLETED", output: { cache: join(own, "data", "models", "hub") } });
    expect((await call(releases, { key: KEY })).body.releases[0]).toMatchObject({ state: "live" });
  } finally {
    await releasing.close();
    await slowHub.close();
    rmSync(own, { recursive: true, force: true });
  }
}, 90_000);
