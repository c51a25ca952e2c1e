// A host with no GPU (nvidia-smi lists none) running its workers itself: a GPU endpoint deployed there runs on the
// CPU, and the service says so where a user looks: its log at start, the deploy's answer (which `svc deploy` prints
// as a warning), GET /v1/gpus, and the endpoint's page in the console. Real service, real process workers.

import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { readInventory } from "../../src/gpus/inventory.js";
import { startService, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";
import { chromiumPresent, openBrowser, signIn } from "../console/chromium.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "no-gpu-admin-key";
const fakeEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${join(repo, "test", "fakes", "gpu")}${delimiter}${process.env.PATH ?? ""}`,
  FAKE_NVIDIA_SMI_GPUS: "[]",
});

let dir: string;
let service: Service;
const logged: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-no-gpu-"));
  const project = join(dir, "app");
  mkdirSync(join(project, "src"), { recursive: true });
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "no-gpu", private: true, type: "module" }));
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  writeFileSync(
    join(project, "src", "app.mjs"),
    `import { Endpoint } from "svc";\nexport const render = Endpoint({ name: "render", gpu: "ADA_24", workers: [0, 1] })(async function render() { return { cuda: process.env.CUDA_VISIBLE_DEVICES ?? null }; });\nexport const plain = Endpoint({ name: "plain", workers: [0, 1] })(async function plain() { return 1; });\n`,
  );
  service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [KEY],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    gpus: { read: () => readInventory({ env: fakeEnv() }), sampleMs: 0 },
    log: (message: string) => void logged.push(message),
  });
}, 60_000);
afterAll(async () => {
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it("says at start, at deploy, in /v1/gpus and on the endpoint page that GPU endpoints run on its CPU", async () => {
  expect(logged).toContain("no GPU on this host (no nvidia-smi on PATH, or it lists none): the workers of GPU endpoints run on its CPU");

  // The deploy, as `svc deploy` makes it over HTTP: upload, then activate; the answer carries the warning.
  const build = await buildProject(join(dir, "app"));
  const bytes = readFileSync(build.artifactPath);
  const sha = createHash("sha256").update(bytes).digest("hex");
  const auth = { authorization: `Bearer ${KEY}` };
  expect((await fetch(`${service.url}/v1/apps/no-gpu/builds`, { method: "POST", headers: { ...auth, "x-svc-sha256": sha }, body: bytes })).status).toBeLessThan(
    300,
  );
  expect((await call(`${service.url}/v1/apps/no-gpu/environments/prod`, { key: KEY, method: "PUT" })).status).toBeLessThan(300);
  const warning = "This service's host has no GPU: the workers of render run on its CPU (svc doctor and GET /v1/gpus say what it found)";
  const plan = await call(`${service.url}/v1/apps/no-gpu/environments/prod/plan`, { key: KEY, body: { build: sha } });
  expect(plan.body.warnings).toEqual([warning]);
  const activated = await call(`${service.url}/v1/apps/no-gpu/environments/prod/activate`, { key: KEY, body: { build: sha, confirmRemove: [] } });
  expect(activated.status).toBe(200);
  expect(activated.body.warnings).toEqual([warning]);

  const gpus = await call(`${service.url}/v1/gpus`, { key: KEY });
  expect(gpus.body).toMatchObject({ gpus: [], assigning: false, workersOnHost: true });
  // It runs, on the CPU: no GPU made visible to it.
  const render = activated.body.endpoints.find((e: { name: string }) => e.name === "render");
  const r = await call(`${service.url}/v2/${render.id}/runsync`, { key: KEY, body: { input: {} } });
  expect(r.body).toMatchObject({ status: "COMPLETED" });

  if (!chromiumPresent()) return;
  const { browser, page } = await openBrowser();
  try {
    await signIn(page, service.url, KEY);
    await page.goto(`${service.url}/console/#/endpoints/${render.id}`);
    const notice = page.locator('[data-field="no-gpus"]');
    await notice.waitFor();
    expect(await notice.textContent()).toBe("This service's host has no GPU: this GPU endpoint's workers run on its CPU.");
    // A CPU endpoint's page says nothing of it.
    const plain = activated.body.endpoints.find((e: { name: string }) => e.name === "plain");
    await page.goto(`${service.url}/console/#/endpoints/${plain.id}`);
    await page.getByRole("heading", { name: "plain", level: 1 }).waitFor();
    expect(await page.locator('[data-field="no-gpus"]').count()).toBe(0);
  } finally {
    await browser.close();
  }
}, 120_000);
