// The console's Usage page in headless Chromium against a real service running real workers (the process driver,
// fixtures/console-app): a known load of JOBS jobs on one endpoint through the job API, its worker left to idle
// out so its whole life is accounted; then `GET /v1/usage` with the same key, and the page's totals (overall and
// per endpoint) equal the route's numbers, for the last 24 hours and the last 7 days, at 1440 and 390 px with no
// sideways scrolling. Screenshots go to test-results/console/usage-*.png.

import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deployOverHttp } from "./deploy-over-http.js";
import { shots, startConsoleService, type ConsoleService } from "./console-service.js";
import { chromiumPresent, horizontalOverflow, openBrowser, signIn } from "./chromium.js";
import type { Service } from "../../src/service/index.js";
import { formatSeconds, totalsByEndpoint, type Usage } from "../../console/usage-data.js";
import { call, until } from "../service/helpers.js";

const ADMIN = "console-usage-admin-key";
const JOBS = 3;
const haveChromium = chromiumPresent();

let consoleService: ConsoleService;
let service: Service;
let browser: Browser;
let page: Page;
let echoId: string;
let endpointIds: string[];

const ENV_URL = () => `${service.url}/v1/apps/console-app/environments/prod`;

/** Whether no endpoint of the app has a worker (all of them idled out, or never started). */
async function noWorkers(): Promise<boolean> {
  for (const id of endpointIds) {
    const w = (await call(`${service.url}/v2/${id}/health`, { key: ADMIN })).body.workers as Record<string, number>;
    if (w.idle + w.running + w.initializing > 0) return false;
  }
  return true;
}

async function usageOf(window: "24h" | "7d"): Promise<Usage> {
  const from = Date.now() - (window === "24h" ? 24 : 7 * 24) * 3_600_000;
  const r = await call(`${service.url}/v1/usage?from=${from}`, { key: ADMIN });
  expect(r.status, r.text).toBe(200);
  return r.body as Usage;
}

/** What the page shows once the window asked for is loaded: the overall totals and each endpoint's row. */
async function shown(window: "24h" | "7d") {
  const loaded = page.locator(`[data-loaded="${window}"]`);
  await loaded.waitFor();
  const value = async (scope: ReturnType<Page["locator"]>, field: string) => {
    const data = scope.locator(`data[data-field="${field}"]`).first();
    return { value: Number(await data.getAttribute("value")), text: ((await data.textContent()) ?? "").trim() };
  };
  const summary = loaded.locator('[data-summary="usage"]');
  const rows: Record<string, { workerSeconds: { value: number; text: string }; jobs: { value: number; text: string } }> = {};
  const table = page.getByRole("table", { name: "Usage by endpoint" });
  for (const row of await table.locator("tbody tr").all()) {
    rows[(await row.getAttribute("data-endpoint"))!] = { workerSeconds: await value(row, "workerSeconds"), jobs: await value(row, "jobs") };
  }
  return { workerSeconds: await value(summary, "workerSeconds"), jobs: await value(summary, "jobs"), rows };
}

/** The page's numbers are the route's: totals, and per endpoint the route's hourly rows added up. */
function expectSame(page: Awaited<ReturnType<typeof shown>>, route: Usage): void {
  expect(page.workerSeconds.value).toBe(route.totals.workerSeconds);
  expect(page.workerSeconds.text).toBe(formatSeconds(route.totals.workerSeconds));
  expect(page.jobs.value).toBe(route.totals.jobs);
  const perEndpoint = totalsByEndpoint(route.hours);
  expect(Object.keys(page.rows).sort()).toEqual(perEndpoint.map((e) => e.endpointId).sort());
  for (const e of perEndpoint) {
    const routeSeconds = route.hours.filter((h) => h.endpointId === e.endpointId).reduce((s, h) => s + h.workerSeconds, 0);
    expect(page.rows[e.endpointId]!.workerSeconds.value).toBeCloseTo(routeSeconds, 6);
    expect(page.rows[e.endpointId]!.workerSeconds.text).toBe(formatSeconds(routeSeconds));
    expect(page.rows[e.endpointId]!.jobs.value).toBe(route.hours.filter((h) => h.endpointId === e.endpointId).reduce((n, h) => n + h.jobs, 0));
  }
}

describe.skipIf(!haveChromium)("the console's Usage page in a browser", () => {
  beforeAll(async () => {
    consoleService = await startConsoleService({ key: ADMIN });
    service = consoleService.service;
    const app = consoleService.app;
    await deployOverHttp(service.url, ADMIN, app, "prod");
    const env = (await call(ENV_URL(), { key: ADMIN })).body as { endpoints: Array<{ id: string; name: string }> };
    endpointIds = env.endpoints.map((e) => e.id);
    echoId = env.endpoints.find((e) => e.name === "echo")!.id;

    // The known load, through the job API, on one endpoint.
    for (let i = 0; i < JOBS; i++) {
      const r = await call(`${service.url}/v2/${echoId}/runsync`, { key: ADMIN, body: { input: { i } } });
      expect(r.status, r.text).toBe(200);
      expect(r.body.status).toBe("COMPLETED");
    }
    // Every worker idles out (idleTimeout 5 s): each life is accounted in full and the numbers hold still.
    await until(noWorkers, 60_000, 200);

    ({ browser, page } = await openBrowser());
    await signIn(page, service.url, ADMIN);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await consoleService?.close();
  });

  it("the route counts the known load: JOBS jobs on the endpoint, and its worker's time", async () => {
    const usage = await usageOf("24h");
    expect(usage.totals.jobs).toBe(JOBS);
    const echo = usage.hours.filter((h) => h.endpointId === echoId);
    expect(echo.reduce((n, h) => n + h.jobs, 0)).toBe(JOBS);
    expect(echo.reduce((s, h) => s + h.workerSeconds, 0)).toBeGreaterThan(0);
  }, 30_000);

  it("shows the route's totals and per-endpoint numbers for the last 24 hours and the last 7 days", async () => {
    await page.getByRole("link", { name: "Usage" }).click();
    await page.getByRole("heading", { name: "Usage", level: 1 }).waitFor();
    const day = await shown("24h");
    expectSame(day, await usageOf("24h"));
    expect(day.jobs.value).toBe(JOBS);
    expect(day.rows[echoId]!.jobs.value).toBe(JOBS);
    expect(await page.getByRole("link", { name: "echo" }).count()).toBeGreaterThan(0);
    expect(await page.getByRole("table", { name: "Usage by hour" }).locator("tbody tr").count()).toBeGreaterThan(0);
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(shots, "usage-1440.png"), fullPage: true });

    await page.getByRole("button", { name: "Last 7 days" }).click();
    const week = await shown("7d");
    expectSame(week, await usageOf("7d"));
    expect(week.jobs.value).toBe(JOBS);
    expect(await page.getByRole("button", { name: "Last 7 days" }).getAttribute("aria-pressed")).toBe("true");
  }, 60_000);

  it("fits a 390 px phone: nothing scrolls sideways, the tables scroll in their own box", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(`${service.url}/console/#/usage`);
      await page.reload();
      expectSame(await shown("24h"), await usageOf("24h"));
      expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
      await page.screenshot({ path: join(shots, "usage-390.png"), fullPage: true });
    } finally {
      await page.setViewportSize({ width: 1440, height: 900 });
    }
  }, 60_000);
});
