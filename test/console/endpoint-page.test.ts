// An endpoint shown whole in headless Chromium against a real service (fixtures/console-app built and deployed
// through the public API, process workers): its URL and a curl that works as pasted, its settings, its workers,
// its releases with a rollback, a job's own page, "Try it" from a sensible example, a finished stream's chunks,
// and the layout at 1440 px and 390 px. Screenshots go to test-results/console/.

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { deployOverHttp } from "./deploy-over-http.js";
import { shots, startConsoleService, type ConsoleService } from "./console-service.js";
import { chromiumPresent, openBrowser, signIn, horizontalOverflow } from "./chromium.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";

const ADMIN = "console-endpoint-admin-key";
const haveChromium = chromiumPresent();

let consoleService: ConsoleService;
let service: Service;
let browser: Browser;
let page: Page;
let echoId: string;
let tickerId: string;
let greeterId: string;
const builds: string[] = [];

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

async function open(hash: string, heading: string): Promise<void> {
  await page.goto(`${service.url}/console/${hash}`);
  await page.getByRole("heading", { name: heading, level: 1 }).waitFor();
}

/** Whether the page scrolls sideways (what a phone user would have to do to read it). */
const pageOverflow = () => horizontalOverflow(page);

async function submitAndWait(endpointId: string, input: unknown): Promise<string> {
  const id = (await call(`${service.url}/v2/${endpointId}/run`, { key: ADMIN, body: { input } })).body.id as string;
  await until(async () => (await call(`${service.url}/v2/${endpointId}/status/${id}`, { key: ADMIN })).body.status === "COMPLETED", 60_000, 100);
  return id;
}

describe.skipIf(!haveChromium)("an endpoint's page in a browser", () => {
  beforeAll(async () => {
    consoleService = await startConsoleService({ key: ADMIN });
    service = consoleService.service;
    const app = consoleService.app;
    // echo names a secret (set first: a release naming an unset secret is refused) and a scaling policy.
    const source = join(app, "src", "app.mjs");
    writeFileSync(
      source,
      readFileSync(source, "utf8").replace(
        'Endpoint({ name: "echo", workers: [0, 1], idleTimeout: 5 })',
        'Endpoint({ name: "echo", workers: [0, 1], idleTimeout: 5, secrets: ["ECHO_TOKEN"], scaler: { type: "QUEUE_DELAY", value: 2 } })',
      ),
    );
    expect((await call(`${service.url}/v1/secrets/ECHO_TOKEN`, { key: ADMIN, method: "PUT", body: { value: "s3cret-value" } })).status).toBeLessThan(300);
    builds.push(await deployOverHttp(service.url, ADMIN, app, "prod"));
    // A second build (a changed greeting): the environment has a release to roll back from.
    const greeter = join(app, "src", "greeter.ts");
    writeFileSync(greeter, readFileSync(greeter, "utf8").replace("`hello ${input.name}`", "`hi ${input.name}`"));
    builds.push(await deployOverHttp(service.url, ADMIN, app, "prod"));
    const env = (await call(`${service.url}/v1/apps/console-app/environments/prod`, { key: ADMIN })).body;
    const idOf = (name: string) => env.endpoints.find((e: { name: string }) => e.name === name).id as string;
    [echoId, tickerId, greeterId] = [idOf("echo"), idOf("ticker"), idOf("greeter")];
    ({ browser, page } = await openBrowser());
    await signIn(page, service.url, ADMIN);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await consoleService?.close();
  });

  it("shows the endpoint's URL and a curl that answers as pasted, with the CLI's key variable", async () => {
    await open(`#/endpoints/${echoId}`, "echo");
    const access = page.getByRole("region", { name: "Call it" });
    expect(await access.locator('[data-field="url"]').textContent()).toBe(`${service.url}/v2/${echoId}`);
    const curl = (await access.getByLabel("curl command").textContent())!;
    expect(curl).toContain("$SVC_API_KEY");
    expect(curl).not.toContain(ADMIN);
    // Pasted into a shell with the key in the environment, it gets the job's answer.
    // (Not execFileSync: the service answering it runs in this process.)
    const { stdout } = await promisify(execFile)("sh", ["-c", curl], { env: { ...process.env, SVC_API_KEY: ADMIN }, encoding: "utf8", timeout: 60_000 });
    const answer = JSON.parse(stdout);
    expect(answer).toMatchObject({ status: "COMPLETED", output: { echoed: { prompt: expect.stringMatching(/\S/) } } });
  }, 90_000);

  it("shows its settings: GPU types, workers, timeouts, scaling, retries and the secrets it names", async () => {
    await open(`#/endpoints/${echoId}`, "echo");
    const settings = page.getByRole("region", { name: "Settings" });
    const field = (name: string) => settings.locator(`[data-field="${name}"]`).textContent();
    expect(await field("compute")).toBe("CPU");
    expect(await field("workers")).toBe("min 0, max 1");
    expect(await field("idle-timeout")).toBe("5 s");
    expect(await field("execution-timeout")).toMatch(/\d/);
    expect(await field("scaling")).toContain("QUEUE_DELAY 2");
    expect(await field("retries")).toMatch(/^\d+$/);
    expect(await field("secrets")).toBe("ECHO_TOKEN");
    // The value never reaches the page.
    expect(await page.locator("body").textContent()).not.toContain("s3cret-value");
    await page.getByRole("region", { name: "Charts" }).waitFor();
  }, 60_000);

  it("lists its workers with their state, since when, and GPU", async () => {
    await submitAndWait(echoId, { hello: "workers" });
    await open(`#/endpoints/${echoId}`, "echo");
    const table = page.getByRole("table", { name: "Workers" });
    const row = table.locator("tbody tr").first();
    await row.waitFor();
    expect(await row.locator("td").nth(0).textContent()).toMatch(/idle|running|initializing/);
    expect(await row.locator("time").count()).toBe(1);
    expect(await table.locator("thead th").allTextContents()).toEqual(["Worker", "State", "Since", "GPU"]);
  }, 90_000);

  it("lists the environment's releases and rolls back to the previous build", async () => {
    await open(`#/endpoints/${greeterId}`, "greeter");
    const table = page.getByRole("table", { name: "Releases" });
    await table.locator(`tr[data-build="${builds[1]}"]`).getByText("running").waitFor();
    expect(await table.locator("tbody tr").count()).toBe(2);
    await shot("endpoint-releases");
    await table.getByRole("button", { name: `Roll back to build ${builds[0]!.slice(0, 12)}` }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByText("start new workers on that build first").waitFor();
    await dialog.getByRole("button", { name: "Roll back" }).click();
    await until(async () => (await call(`${service.url}/v1/apps/console-app/environments/prod`, { key: ADMIN })).body.build === builds[0], 60_000, 200);
    await table.locator("tbody tr").first().getByText("rollback").waitFor();
    await table.locator("tbody tr").first().getByText("running").waitFor({ timeout: 30_000 });
  }, 120_000);

  it("gives a job a page of its own that loads directly: input, output, timeline, worker, attempts, logs", async () => {
    const jobId = await submitAndWait(echoId, { hello: "job page" });
    await open(`#/endpoints/${echoId}/jobs/${jobId}`, "echo");
    const job = page.locator(`[data-job-detail="${jobId}"]`);
    await job
      .getByRole("heading", { name: new RegExp(`Job ${jobId}`) })
      .getByText("COMPLETED")
      .waitFor();
    await job.getByLabel("Job input").getByText('"job page"').waitFor();
    await job.getByLabel("Job output").getByText('"echoed"').waitFor();
    const timeline = job.getByLabel("Timeline");
    await timeline.locator('[data-field="ended"] time').waitFor();
    expect(await timeline.locator('[data-field="started"] time').count()).toBe(1);
    expect(await timeline.locator('[data-field="submitted"] time').count()).toBe(1);
    const worker = (await timeline.locator('[data-field="worker"]').textContent())!.trim();
    expect(worker).toMatch(/\S{4,}/);
    expect(await job.getByText("Attempts").count()).toBe(1);
    await job.getByLabel("Logs of this job output").getByText('echo says {"hello":"job page"}').waitFor();
    // In view without scrolling for it, and the list marks it.
    const box = (await job.boundingBox())!;
    expect(box.y).toBeLessThan(900);
    expect(box.y + 40).toBeGreaterThan(0);
    expect(await page.locator(`tr[data-job="${jobId}"] a`).getAttribute("aria-current")).toBe("true");
    await shot("job-page");
  }, 90_000);

  it("starts Try it from a sensible example of the function's input, never an empty string", async () => {
    await open(`#/endpoints/${greeterId}`, "greeter");
    const body = page.getByLabel("Request body (JSON: {input, policy?, webhook?})");
    await page.getByLabel("Function").selectOption("hello");
    expect(JSON.parse(await body.inputValue())).toEqual({ input: { name: "Ada", times: 1 }, function: "hello" });
    await open(`#/endpoints/${echoId}`, "echo");
    const echoBody = JSON.parse(await page.getByLabel("Request body (JSON: {input, policy?, webhook?})").inputValue());
    expect(echoBody.input.prompt).toMatch(/\S/);
  }, 60_000);

  it("shows a finished streaming job's chunks even when its stream was read elsewhere", async () => {
    const jobId = (await call(`${service.url}/v2/${tickerId}/run`, { key: ADMIN, body: { input: { count: 3, delayMs: 50 } } })).body.id as string;
    // Another client reads the stream to its end first (/stream hands each chunk out once).
    await until(
      async () => {
        const s = (await call(`${service.url}/v2/${tickerId}/stream/${jobId}`, { key: ADMIN })).body;
        return s.status === "COMPLETED" && s.stream.length === 0;
      },
      60_000,
      50,
    );
    await open(`#/endpoints/${tickerId}/jobs/${jobId}`, "ticker");
    const chunks = page.getByRole("list", { name: "Stream chunks" });
    await chunks.getByText('{"tick":3}').waitFor();
    expect(await chunks.locator("li").allTextContents()).toEqual(['{"tick":1}', '{"tick":2}', '{"tick":3}']);
    expect(await page.getByText("No chunks streamed yet.").count()).toBe(0);
  }, 90_000);

  for (const [width, height] of [
    [1440, 900],
    [390, 844],
  ] as const) {
    it(`at ${width} px: nothing scrolls sideways, ids stay on a line, and a job clicked far down the list opens in view`, async () => {
      // Enough jobs that the last one is far below the top of the page.
      for (let i = 0; i < 20; i++) await call(`${service.url}/v2/${echoId}/run`, { key: ADMIN, body: { input: { n: i } } });
      await until(async () => (await call(`${service.url}/v2/${echoId}/health`, { key: ADMIN })).body.jobs.inQueue === 0, 60_000, 200);
      await page.setViewportSize({ width, height });
      try {
        await open(`#/endpoints/${echoId}`, "echo");
        const table = page.getByRole("table", { name: "Recent jobs" });
        await until(async () => (await table.locator("tbody tr").count()) >= 20, 30_000, 200);
        expect(await pageOverflow(), "the endpoint page scrolls sideways").toBeLessThanOrEqual(0);
        await shot(`endpoint-${width}`);
        const link = table.locator("tbody tr").last().locator("a");
        // A job id is one line, not a column of characters.
        const idBox = (await link.boundingBox())!;
        const lineHeight = await link.evaluate((el) => parseFloat(getComputedStyle(el).lineHeight) || 20);
        expect(idBox.height).toBeLessThan(lineHeight * 1.5);
        // No id anywhere on the page squeezed into a column (a line of fewer than 12 characters).
        const cramped = await page.evaluate(() =>
          [...document.querySelectorAll("main .mono:not(textarea):not(pre)")].flatMap((el) => {
            const r = el.getBoundingClientRect();
            const text = el.textContent ?? "";
            const lines = Math.max(1, Math.round(r.height / parseFloat(getComputedStyle(el).lineHeight)));
            return lines > 1 && text.length / lines < 12 ? [`${text}: ${lines} lines in ${Math.round(r.width)} px`] : [];
          }),
        );
        expect(cramped).toEqual([]);
        // A table wider than the screen scrolls inside its box instead of being cut or widening the page.
        const wrap = await table.evaluate((el) => {
          const box = el.parentElement!;
          return { overflowX: getComputedStyle(box).overflowX, tableWidth: el.scrollWidth, boxWidth: box.clientWidth };
        });
        if (wrap.tableWidth > wrap.boxWidth) expect(wrap.overflowX).toBe("auto");
        const jobId = (await link.textContent())!.trim();
        await link.scrollIntoViewIfNeeded();
        await link.click();
        const detail = page.locator(`[data-job-detail="${jobId}"]`);
        await detail.getByText("COMPLETED").first().waitFor();
        await page.waitForTimeout(300);
        const box = (await detail.boundingBox())!;
        expect(box.y, `the job detail starts ${box.y} px from the top of a ${height} px window`).toBeGreaterThanOrEqual(-1);
        expect(box.y).toBeLessThan(height - 100);
        expect(page.url()).toContain(`#/endpoints/${echoId}/jobs/${jobId}`);
        expect(await pageOverflow(), "the job view scrolls sideways").toBeLessThanOrEqual(0);
        await page.screenshot({ path: join(shots, `job-detail-${width}.png`) });
      } finally {
        await page.setViewportSize({ width: 1440, height: 900 });
      }
    }, 120_000);
  }
});
