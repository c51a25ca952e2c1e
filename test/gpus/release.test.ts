// Releases on a full host: one GPU (an RTX 4090 the fake nvidia-smi describes), held by the previous release's
// worker (workersMin 1). A new release replaces it in place (drains it, starts the new worker on its GPU); a new
// release that fails to start gives the GPU back to the previous one; one whose new endpoint finds every GPU held
// says it waits and then fails for that reason. On two H100s and a 4090, a release whose endpoints together need
// more than the host has goes through: the new workers that proved they start hand their GPUs over together.
// Real service, real process workers.

import { afterAll, beforeAll, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { readInventory } from "../../src/gpus/inventory.js";
import { startService, type Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";
import { emptyProject } from "../fixture-project.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "gpu-release-admin-key";
const RTX = "GPU-fa4e0000-0000-4000-8000-000000000000";
const RTX_4090 = { name: "NVIDIA GeForce RTX 4090", memoryMiB: 24564 };
const H100 = { name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 };

/** A service whose host has these GPUs (as the fake nvidia-smi describes them), in a directory of its own. */
async function gpuHost(prefix: string, gpus: object[], releaseStartTimeoutMs: number): Promise<{ dir: string; service: Service; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${join(repo, "test", "fakes", "gpu")}${delimiter}${process.env.PATH ?? ""}`,
    FAKE_NVIDIA_SMI_GPUS: JSON.stringify(gpus),
  };
  const service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [KEY],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
    releaseAttempts: 1,
    releaseStartTimeoutMs,
    gpus: { read: () => readInventory({ env }), sampleMs: 0 },
  });
  return {
    dir,
    service,
    async close() {
      await service.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** An app's project in `dir`/app (the svc package linked), its sources to write under src/. */
let host: Awaited<ReturnType<typeof gpuHost>>;
let dir: string;
let service: Service;

function writeApp(body: string): void {
  writeFileSync(
    join(dir, "app", "src", "app.mjs"),
    `import { Endpoint } from "svc";\n${body}\nexport const card = Endpoint({ name: "card", gpu: "ADA_24", workers: [1, 1] })(async function card() {\n  return { version: VERSION, cuda: process.env.CUDA_VISIBLE_DEVICES };\n});\n`,
  );
}

async function deploy() {
  const build = await buildProject(join(dir, "app"));
  return service.deploy({ app: build.manifest.app, env: "prod", manifest: build.manifest, artifactPath: build.artifactPath });
}

beforeAll(async () => {
  host = await gpuHost("svc-gpu-release-", [RTX_4090], 30_000);
  ({ dir, service } = host);
  emptyProject(dir, "gpu-release");
}, 60_000);
afterAll(async () => {
  await host?.close();
});

const ask = async (url: string) => (await call(`${url}/runsync`, { key: KEY, body: { input: {} } })).body;

it("a new release on a full host replaces the worker holding the GPU in place; a failing one gives it back", async () => {
  writeApp(`const VERSION = 1;`);
  const [v1] = await deploy();
  expect(await ask(v1!.url)).toMatchObject({ status: "COMPLETED", output: { version: 1, cuda: RTX } });

  // The only GPU is held by version 1's worker (workersMin 1): the release drains it and starts version 2 on it.
  writeApp(`const VERSION = 2;`);
  const [v2] = await deploy();
  expect(await ask(v2!.url)).toMatchObject({ status: "COMPLETED", output: { version: 2, cuda: RTX } });

  // Version 3 cannot start: the release fails, and version 2 gets its GPU back.
  writeApp(`const VERSION = 3;\nthrow new Error("version 3 does not start");`);
  await expect(deploy()).rejects.toThrow(/could not start/);
  const back = await until(
    async () => {
      const r = await ask(v2!.url);
      return r.status === "COMPLETED" && r;
    },
    30_000,
    200,
  );
  expect(back.output).toEqual({ version: 2, cuda: RTX });
}, 120_000);

it("a release whose new GPU endpoint finds every GPU held says it waits for a GPU, then fails for that reason", async () => {
  const full = await gpuHost("svc-gpu-wait-", [RTX_4090], 6000);
  const waitService = full.service;
  try {
    const project = emptyProject(full.dir, "gpu-wait");
    // Each endpoint in a file of its own: adding extra leaves card's code as it was (the release does not replace it).
    const write = (name: string, workers: string) =>
      writeFileSync(
        join(project, "src", `${name}.mjs`),
        `import { Endpoint } from "svc";\nexport const ${name} = Endpoint({ name: "${name}", gpu: "ADA_24", workers: ${workers} })(async function ${name}() { return 1; });\n`,
      );
    const deployNow = async () => {
      const build = await buildProject(project);
      return waitService.deploy({ app: "gpu-wait", env: "prod", manifest: build.manifest, artifactPath: build.artifactPath });
    };
    write("card", "[1, 1]");
    const [held] = await deployNow();
    expect((await call(`${held!.url}/runsync`, { key: KEY, body: { input: {} } })).body.status).toBe("COMPLETED");

    // The only GPU is held by card (workersMin 1), which the release does not replace: extra's new worker waits.
    write("extra", "[0, 1]");
    const deploying = deployNow().then(
      () => undefined,
      (err: Error) => err,
    );
    const releases = `${waitService.url}/v1/apps/gpu-wait/environments/prod/releases`;
    const waiting = await until(
      async () => {
        const starting = (await call(releases, { key: KEY })).body.releases.find((r: { state: string }) => r.state === "starting");
        return starting?.endpoints.find((e: { name: string; waiting?: string }) => e.name === "extra" && e.waiting)?.waiting as string | undefined;
      },
      10_000,
      100,
    );
    expect(waiting).toBe("waiting for a GPU (ADA_24: 1 of 1 in use)");
    // What `svc deploy` prints for it.
    const { releaseEndpointState } = await import("../../src/cli/commands/deploy.js");
    expect(releaseEndpointState({ name: "extra", id: "x", action: "create", state: "starting", attempts: 1, failures: 0, error: null, waiting })).toBe(waiting);
    const failure = await deploying;
    expect(failure?.message).toBe('Endpoint "extra" of the new build could not start');
    // The release failed for that reason (what `svc deploy` prints of it), not for a slow worker.
    const failed = (await call(releases, { key: KEY })).body.releases[0];
    expect(failed).toMatchObject({ state: "failed", error: { endpoint: "extra" } });
    expect(failed.error.message).toMatch(/^the new worker could not start in 6 s: waiting for a GPU \(ADA_24: 1 of 1 in use\)/);
    // card still serves on its GPU.
    expect((await call(`${held!.url}/runsync`, { key: KEY, body: { input: {} } })).body.status).toBe("COMPLETED");
  } finally {
    await full.close();
  }
}, 90_000);

it("a release whose endpoints together need more GPUs than the host has goes through: ready new workers hand their GPUs over together", async () => {
  // Two H100s and a 4090: fallback and hold take an H100 each, pair needs both.
  const together = await gpuHost("svc-gpu-together-", [H100, H100, RTX_4090], 30_000);
  const host = together.service;
  try {
    const project = emptyProject(together.dir, "gpu-together");
    const endpoint = (name: string, gpu: string, extra = "") =>
      `export const ${name} = Endpoint({ name: "${name}", gpu: ${gpu}, ${extra}workers: [0, 1] })(async function ${name}() { return { cuda: process.env.CUDA_VISIBLE_DEVICES }; });\n`;
    // The environment first (its releases are read while the next one starts), then the three GPU endpoints.
    const plain = `export const plain = Endpoint({ name: "plain", workers: [0, 1] })(async function plain() { return 1; });\n`;
    writeFileSync(join(project, "src", "app.mjs"), `import { Endpoint } from "svc";\n${plain}`);
    const first = await buildProject(project);
    await host.deploy({ app: "gpu-together", env: "prod", manifest: first.manifest, artifactPath: first.artifactPath });
    writeFileSync(
      join(project, "src", "app.mjs"),
      `import { Endpoint } from "svc";\n${plain}${endpoint("fallback", '["ADA_80_PRO", "ADA_24"]')}${endpoint("hold", '"ADA_80_PRO"')}${endpoint("pair", '"ADA_80_PRO"', "gpuCount: 2, ")}`,
    );
    const build = await buildProject(project);
    const seen = new Set<string>();
    const releases = `${host.url}/v1/apps/gpu-together/environments/prod/releases`;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const answer = await call(releases, { key: KEY });
        for (const r of answer.body?.releases ?? []) for (const e of r.endpoints) if (e.waiting) seen.add(`${e.name}: ${e.waiting}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const deployed = await host.deploy({ app: "gpu-together", env: "prod", manifest: build.manifest, artifactPath: build.artifactPath });
    watching = false;
    await watch;
    expect((await call(releases, { key: KEY })).body.releases[0].state).toBe("live");
    // pair waited, and said so, until the others' ready workers gave their H100s back together.
    expect([...seen]).toContain("pair: waiting for a GPU (ADA_80_PRO: 2 of 2 in use, 2 needed)");
    const pair = deployed.find((e) => e.name === "pair")!;
    const r = await call(`${pair.url}/runsync`, { key: KEY, body: { input: {} } });
    expect(r.body.status).toBe("COMPLETED");
    expect((r.body.output.cuda as string).split(",")).toHaveLength(2);
  } finally {
    await together.close();
  }
}, 120_000);
