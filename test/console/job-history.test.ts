// The console keeps what a user needs to debug: a failed job whose result expired (the job API's /status answers
// 404 for it) opens from its history record (status, times, attempts, worker, error) with no action the job API
// would refuse; the endpoint page lists every failure of the last hour with its error, expired or not; a job's
// page offers only the actions that apply to it. In headless Chromium against a real service and process workers.

import type { Browser, Page } from "playwright-core";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deployOverHttp } from "./deploy-over-http.js";
import { shots, startConsoleService, type ConsoleService } from "./console-service.js";
import { chromiumPresent, openBrowser, signIn } from "./chromium.js";
import { call, until } from "../service/helpers.js";

const ADMIN = "console-history-admin-key";

describe.skipIf(!chromiumPresent())("a failed job after its result expired, in the console", () => {
  let consoleService: ConsoleService;
  let browser: Browser;
  let page: Page;
  let url: string;
  let echoId: string;
  let expired: string;
  let live: string;

  /** A job of echo that fails with `message`, to its end (retries included). */
  async function failed(message: string): Promise<string> {
    const id = (await call(`${url}/v2/${echoId}/run`, { key: ADMIN, body: { input: { fail: message } } })).body.id as string;
    await until(async () => (await call(`${url}/v2/${echoId}/status/${id}`, { key: ADMIN })).body.status === "FAILED", 60_000, 100);
    return id;
  }

  beforeAll(async () => {
    consoleService = await startConsoleService({ key: ADMIN, service: { retentionSweepMs: 200 } });
    url = consoleService.service.url;
    await deployOverHttp(url, ADMIN, consoleService.app, "prod");
    const env = (await call(`${url}/v1/apps/console-app/environments/prod`, { key: ADMIN })).body;
    echoId = env.endpoints.find((e: { name: string }) => e.name === "echo").id;
    expired = await failed("boom, long ago");
    // Its result kept 300 ms more (the /status ttl query), then swept: /status answers 404.
    await call(`${url}/v2/${echoId}/status/${expired}?ttl=300`, { key: ADMIN });
    await until(async () => (await call(`${url}/v2/${echoId}/status/${expired}`, { key: ADMIN })).status === 404, 10_000, 100);
    live = await failed("boom, just now");
    ({ browser, page } = await openBrowser());
    await signIn(page, url, ADMIN);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await consoleService?.close();
  });

  it("lists every failure of the last hour with its error, the expired one marked", async () => {
    await page.goto(`${url}/console/#/endpoints/${echoId}`);
    const failures = page.getByRole("table", { name: "Failures" });
    await failures.waitFor();
    await failures.locator(`tr[data-job="${expired}"]`).waitFor();
    expect(await failures.locator(`tr[data-job="${expired}"] [data-field="error"]`).textContent()).toBe("boom, long ago");
    expect(await failures.locator(`tr[data-job="${expired}"]`).textContent()).toContain("result expired");
    expect(await failures.locator(`tr[data-job="${live}"] [data-field="error"]`).textContent()).toBe("boom, just now");
    // The recent jobs list has both too.
    const recent = page.getByRole("table", { name: "Recent jobs" });
    expect(await recent.locator(`tr[data-job="${expired}"]`).textContent()).toContain("(result expired)");
    await page.locator('[data-section="failures"]').screenshot({ path: join(shots, "failures.png") });
  }, 60_000);

  it("opens the expired job from its history record: its error and timeline, no input or output, no action", async () => {
    await page.goto(`${url}/console/#/endpoints/${echoId}/jobs/${expired}`);
    const detail = page.locator(`[data-job-detail="${expired}"][data-history="true"]`);
    await detail.waitFor();
    expect(await detail.locator('[data-field="result-expired"]').textContent()).toMatch(
      /^Its result expired .+: its input, output and stream are no longer kept\. This record is kept until .+\.$/,
    );
    expect(await detail.locator(".error-text").textContent()).toBe("boom, long ago");
    expect(await detail.locator('[data-field="attempts"]').textContent()).toMatch(/^\d+$/);
    expect(await detail.locator('[data-field="worker"]').textContent()).toMatch(/^w/);
    expect(await detail.getByRole("heading", { name: /^Job / }).textContent()).toContain("FAILED");
    expect(await page.getByRole("button", { name: "Retry job" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Cancel job" }).count()).toBe(0);
    await detail.screenshot({ path: join(shots, "job-history.png") });
  }, 60_000);

  it("offers Retry on a failed job whose result is still kept, and no Cancel", async () => {
    await page.goto(`${url}/console/#/endpoints/${echoId}/jobs/${live}`);
    await page.locator(`[data-job-detail="${live}"]`).getByRole("heading", { name: /^Job / }).getByText("FAILED").waitFor();
    expect(await page.locator(`[data-job-detail="${live}"]`).getAttribute("data-history")).toBeNull();
    expect(await page.getByRole("button", { name: "Retry job" }).count()).toBe(1);
    expect(await page.getByRole("button", { name: "Cancel job" }).count()).toBe(0);
  }, 60_000);
});
