// A load-balanced endpoint's page in headless Chromium after known traffic (three 200s, a 418, a 504 for a worker
// that did not answer within executionTimeout): its charts are requests with their errors, latency, cold starts and
// workers, and say the route's numbers; its status names requests, not jobs; its settings leave out what applies to
// jobs only (retries, the job form, the jobs table). At 1440 px and 390 px, nothing scrolls sideways.
// Screenshots go to test-results/console/.

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chartSpecs, type MetricsSeries } from "../../console/charts-data.js";
import { useLbApp } from "../lb/harness.js";
import { chromiumPresent, horizontalOverflow, openBrowser, signIn } from "./chromium.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const shots = join(repo, "test-results", "console");

describe.skipIf(!chromiumPresent())("a load-balanced endpoint's page", () => {
  const lb = useLbApp({ workersMin: 1, workersMax: 1, executionTimeoutMs: 1000 });
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    for (const id of ["a", "b", "c"]) expect((await fetch(`${lb.base}/items/${id}`, { headers: lb.auth })).status).toBe(200);
    expect((await fetch(`${lb.base}/teapot`, { headers: lb.auth })).status).toBe(418);
    expect((await fetch(`${lb.base}/slow?ms=3000`, { headers: lb.auth })).status).toBe(504);
    mkdirSync(shots, { recursive: true });
    ({ browser, page } = await openBrowser());
    await signIn(page, lb.app.service.url, lb.app.key);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
  });

  const series = async (): Promise<MetricsSeries> =>
    (await fetch(`${lb.app.service.url}/v1/endpoints/${lb.endpointId}/metrics?window=1h`, { headers: lb.auth })).json() as Promise<MetricsSeries>;

  it.each([1440, 390])(
    "at %i px: charts of requests, errors and latency; a status of requests; no job fields",
    async (width) => {
      await page.setViewportSize({ width, height: width === 390 ? 844 : 900 });
      await page.goto(`${lb.app.service.url}/console/#/endpoints/${lb.endpointId}`);
      await page.reload();
      await page.getByRole("heading", { name: "api", level: 1 }).waitFor();
      const charts = page.getByRole("region", { name: "Charts", exact: true });
      // On a machine loaded by other tests the first series read can take longer than the locator default (20 s).
      await charts.locator('.chart-grid[data-loaded="1h"]').waitFor({ timeout: 45_000 });
      const keys = await charts.locator("[data-chart]").evaluateAll((figures) => figures.map((f) => f.getAttribute("data-chart")));
      expect(keys).toEqual(["requests", "latency", "cold-starts", "workers"]);
      const summary = async (key: string) => ((await charts.locator(`[data-chart="${key}"] .chart-summary`).textContent()) ?? "").trim();
      expect(await summary("requests")).toBe("5 requests in the last hour; 1 load-balanced answer with an error (5xx).");
      const expected = Object.fromEntries(chartSpecs(await series()).map((c) => [c.key, c.summary]));
      expect(await summary("latency")).toBe(expected.latency);
      expect(expected.latency).toMatch(/^Latency: p50 .+, p95 .+ over the last hour\.$/);

      const status = page.getByRole("table", { name: "Status" });
      expect(await status.locator("th").allTextContents()).toEqual(["Workers now", "Waiting for a worker", "In flight", "Cold starts"]);
      expect(await page.locator('[data-field="lb-requests"]').textContent()).toMatch(/^4 requests answered by its workers, 1 failed/);
      expect(await page.locator('[data-field="retries"]').count()).toBe(0);
      expect(await page.locator('[data-field="concurrency"]').evaluate((dd) => dd.previousElementSibling?.textContent)).toBe("Requests per worker");
      // No job form and no jobs table: it has no job API.
      expect(await page.getByRole("heading", { name: "Try it" }).count()).toBe(0);
      expect(await page.getByRole("heading", { name: "Endpoint logs" }).count()).toBe(1);
      expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
      await page.screenshot({ path: join(shots, `lb-endpoint-${width}.png`), fullPage: true });
    },
    120_000,
  );
});
