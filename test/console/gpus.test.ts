// The console's GPU views in headless Chromium (Debian's, driven by playwright-core) against a real service whose
// host the fake nvidia-smi (test/fakes/gpu/nvidia-smi) describes: two H100s (ADA_80_PRO) and one RTX 4090
// (ADA_24). fixtures/gpu-app is deployed; its `only` endpoint (ADA_24) holds the 4090 with a long job while a REST
// endpoint asking for ADA_24 waits for it. What a user sees: the GPU list with holders, an endpoint's GPU settings,
// the GPUs its workers hold, and the waiting reason as the service gives it. Screenshots go to
// test-results/console/ (gpu-*.png, narrow-gpu-*.png). Without /usr/bin/chromium: skipped with a notice, except in CI.

import { existsSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { repo, shots, startConsoleService, type ConsoleService } from "./console-service.js";
import { chromiumPresent, openBrowser } from "./chromium.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProject } from "../../src/build/index.js";
import { readInventory } from "../../src/gpus/inventory.js";
import type { DeployedEndpoint, Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";

const FAKE_DIR = join(repo, "test", "fakes", "gpu");
const KEY = "console-gpu-admin-key";
const GPUS = [
  { name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559, usedMiB: 1200, utilization: 37 },
  { name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 },
  { name: "NVIDIA GeForce RTX 4090", memoryMiB: 24564, usedMiB: 20480, utilization: 88 },
];
const RTX = "GPU-fa4e0000-0000-4000-8000-000000000002";
const WAIT_REASON = "waiting for a GPU (ADA_24: 1 of 1 in use)";
/** The fake first on PATH, as the service runs nvidia-smi. */
const fakeEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${FAKE_DIR}${delimiter}${process.env.PATH ?? ""}`,
  FAKE_NVIDIA_SMI_GPUS: JSON.stringify(GPUS),
});

const haveChromium = chromiumPresent();

let consoleService: ConsoleService;
let service: Service;
let browser: Browser;
let page: Page;
const endpoint: Record<string, DeployedEndpoint> = {};
let waiterId: string;
let pidFile: string;
/** The worker of `only` holding the 4090. */
let holderWorker: string;

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

const gpuList = async (): Promise<Array<{ uuid: string; holder: { workerId: string; endpointId: string } | null }>> =>
  (await call(`${service.url}/v1/gpus`, { key: KEY })).body.gpus;
const rtxHolder = async () => (await gpuList()).find((g) => g.uuid === RTX)!.holder;

describe.skipIf(!haveChromium)("the console's GPU views in a browser", () => {
  beforeAll(async () => {
    consoleService = await startConsoleService({
      key: KEY,
      fixture: "gpu-app",
      service: { gpus: { read: () => readInventory({ env: fakeEnv() }), sampleMs: 200 } },
    });
    service = consoleService.service;
    const build = await buildProject(consoleService.app);
    for (const e of await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath }))
      endpoint[e.name] = e;
    // A REST endpoint running `only`'s code on the same one 4090.
    const template = (await call(`${service.url}/v1/templates`, { key: KEY, body: { name: "only code", imageName: `svc://${endpoint.only!.id}` } })).body;
    const waiter = await call(`${service.url}/v1/endpoints`, {
      key: KEY,
      body: { name: "rest-4090", templateId: template.id, gpuTypeIds: ["ADA_24"], workersMax: 1 },
    });
    expect(waiter.status).toBe(201);
    waiterId = waiter.body.id;
    // `only` holds the 4090 with a long job (its worker writes its pid, so the test can kill it later).
    // The deploy's probe workers have let their GPUs go.
    await until(async () => (await gpuList()).every((g) => g.holder === null), 30_000, 100);
    pidFile = join(consoleService.dir, "only-pid");
    await call(`${endpoint.only!.url}/run`, { key: KEY, body: { input: { ms: 120_000, pidFile } } });
    holderWorker = (await until(rtxHolder, 30_000, 100)).workerId;
    await until(() => existsSync(pidFile), 30_000, 50);
    ({ browser, page } = await openBrowser({ width: 1366, height: 800 }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await consoleService?.close();
  });

  it("lists the host's GPUs from the navigation: types, use, and who holds each", async () => {
    await page.goto(`${service.url}/console/`);
    await page.getByLabel("API key").fill(KEY);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Endpoints", level: 1 }).waitFor();
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "GPUs" }).click();
    await page.getByRole("heading", { name: "GPUs", level: 1 }).waitFor();
    await page.getByText("3 GPUs, driver 580.159.04, CUDA 13.0").waitFor();

    const rtx = page.getByRole("article", { name: "GPU 2 NVIDIA GeForce RTX 4090" });
    // Held by `only`'s worker, named with a link to its endpoint.
    const holder = rtx.locator('[data-field="holder"]');
    await holder.getByRole("link", { name: "only" }).waitFor();
    expect(await holder.textContent()).toBe(`worker ${holderWorker} of only (as ADA_24)`);
    expect(await rtx.getByRole("list", { name: "Type ids of GPU 2" }).getByRole("listitem").allTextContents()).toEqual(["ADA_24", "NVIDIA GeForce RTX 4090"]);
    expect(await rtx.locator('[data-field="utilization"]').textContent()).toBe("88 %");
    expect(await rtx.locator('[data-field="memory"]').textContent()).toBe("20.0 of 24.0 GiB used");
    expect(await rtx.getByRole("meter", { name: "GPU 2 utilization" }).getAttribute("value")).toBe("88");

    const h100 = page.getByRole("article", { name: "GPU 0 NVIDIA H100 80GB HBM3" });
    expect(await h100.locator('[data-field="holder"]').textContent()).toBe("free");
    expect(await h100.locator('[data-field="utilization"]').textContent()).toBe("37 %");
    expect(await h100.locator('[data-field="memory"]').textContent()).toBe("1.2 of 79.6 GiB used");
    expect(await page.getByRole("article", { name: "GPU 1 NVIDIA H100 80GB HBM3" }).locator('[data-field="holder"]').textContent()).toBe("free");
    await shot("gpu-list");
  }, 60_000);

  it("shows an endpoint's GPU settings and the GPUs its workers hold, following the holder's link", async () => {
    await page.getByRole("article", { name: "GPU 2 NVIDIA GeForce RTX 4090" }).getByRole("link", { name: "only" }).click();
    await page.getByRole("heading", { name: "only", level: 1 }).waitFor();
    const gpus = page.getByRole("region", { name: "GPUs", exact: true });
    expect(await gpus.getByRole("list", { name: "GPU types in priority order" }).getByRole("listitem").allTextContents()).toEqual(["ADA_24"]);
    // From the endpoint's record, read beside its health.
    await expect.poll(() => gpus.locator('[data-field="gpu-count"]').textContent()).toBe("1");
    const worker = gpus.locator(`[data-worker="${holderWorker}"]`);
    await worker.getByText(`Worker ${holderWorker} as ADA_24`).waitFor();
    await worker.locator('[data-gpu="2"]').getByText("GPU 2 NVIDIA GeForce RTX 4090").waitFor();
    expect(await worker.locator('[data-gpu="2"] [data-field="utilization"]').textContent()).toBe("88 %");
    await worker.getByText(RTX).waitFor();

    // A priority list in its order, and gpuCount, of deployed endpoints too.
    await page.goto(`${service.url}/console/#/endpoints/${endpoint.first!.id}`);
    await page.getByRole("heading", { name: "first", level: 1 }).waitFor();
    expect(await gpus.getByRole("list", { name: "GPU types in priority order" }).getByRole("listitem").allTextContents()).toEqual(["ADA_80_PRO", "ADA_24"]);
    await gpus.getByText("No worker holds a GPU now.").waitFor();
    await page.goto(`${service.url}/console/#/endpoints/${endpoint.pair!.id}`);
    await page.getByRole("heading", { name: "pair", level: 1 }).waitFor();
    await expect.poll(() => gpus.locator('[data-field="gpu-count"]').textContent()).toBe("2");
    // A CPU endpoint has no GPU section.
    await page.goto(`${service.url}/console/#/endpoints/${endpoint.plain!.id}`);
    await page.getByRole("heading", { name: "plain", level: 1 }).waitFor();
    await page
      .getByRole("table", { name: "Status" })
      .getByText(/running, \d+ idle/)
      .waitFor();
    expect(await page.getByRole("region", { name: "GPUs", exact: true }).count()).toBe(0);
  }, 60_000);

  it("says why an endpoint waits, as the service says it, and follows it when the GPU frees", async () => {
    await page.goto(`${service.url}/console/#/endpoints/${waiterId}`);
    await page.getByRole("heading", { name: "rest-4090", level: 1 }).waitFor();
    // A job wants a worker; the one 4090 is `only`'s. Once it runs, its worker holds the GPU for the job and its idle
    // timeout (5 s) after: several of the page's 2 s refreshes.
    const job = (await call(`${service.url}/v2/${waiterId}/run`, { key: KEY, body: { input: { ms: 5_000 } } })).body.id as string;
    const reason = page.locator('[data-status="waiting"] [data-field="wait-reason"]');
    await reason.waitFor();
    expect(await reason.textContent()).toBe(WAIT_REASON);
    expect(await page.locator('[data-status="waiting"]').textContent()).toBe(`WAITING: ${WAIT_REASON}`);
    const gpus = page.getByRole("region", { name: "GPUs", exact: true });
    await gpus.getByText("No worker holds a GPU now.").waitFor();
    await shot("gpu-endpoint-waiting");

    // The holder dies (kill -9): the waiting endpoint's worker gets the 4090, and the page shows it without a reload.
    process.kill(Number(readFileSync(pidFile, "utf8")), "SIGKILL");
    const next = await until(
      async () => {
        const h = await rtxHolder();
        return h?.endpointId === waiterId && h;
      },
      30_000,
      100,
    );
    await gpus.locator(`[data-worker="${next.workerId}"] [data-gpu="2"]`).waitFor();
    await page.locator('[data-status="waiting"]').waitFor({ state: "detached" });
    expect((await call(`${service.url}/v2/${waiterId}/status-sync/${job}?wait=60000`, { key: KEY })).body.status).toBe("COMPLETED");
  }, 90_000);

  it("reads well at 390 px: nothing scrolls sideways and no id wraps one character a line", async () => {
    // `only` wants a second worker while its first (the job retried after the kill) holds the 4090: it waits too.
    await call(`${endpoint.only!.url}/run`, { key: KEY, body: { input: { ms: 30_000 } } });
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      for (const [name, hash, heading] of [
        ["gpu-list", "#/gpus", "GPUs"],
        ["gpu-endpoint", `#/endpoints/${endpoint.only!.id}`, "only"],
      ] as const) {
        await page.goto(`${service.url}/console/${hash}`);
        await page.getByRole("heading", { name: heading, level: 1 }).waitFor();
        if (name === "gpu-list")
          await page
            .getByRole("article", { name: /^GPU 2 / })
            .locator('[data-field="holder"]')
            .getByText(/^worker /)
            .waitFor();
        else await page.getByRole("region", { name: "GPUs", exact: true }).locator("[data-worker]").first().waitFor({ timeout: 30_000 });
        await shot(`narrow-${name}`);
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        expect(width, `${name} is ${width} px wide`).toBeLessThanOrEqual(390);
        // Ids, type ids and card names: a type id stays on one line; a longer id wraps into lines of many characters.
        const cramped = await page.evaluate(() =>
          [...document.querySelectorAll("main .chip, main .mono:not(textarea), main .gpu-name")].flatMap((el) => {
            const r = el.getBoundingClientRect();
            const text = el.textContent ?? "";
            const lines = Math.max(1, Math.round(r.height / parseFloat(getComputedStyle(el).lineHeight)));
            return (el.classList.contains("chip") && lines > 1) || (lines > 1 && text.length / lines < 12)
              ? [`${text}: ${lines} lines in ${Math.round(r.width)} px`]
              : [];
          }),
        );
        expect(cramped, `${name}: cramped ids`).toEqual([]);
      }
    } finally {
      await page.setViewportSize({ width: 1366, height: 800 });
    }
  }, 90_000);
});
