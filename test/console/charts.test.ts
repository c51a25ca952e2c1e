// The console's charts in headless Chromium against a real service after a known load: N jobs on one endpoint
// through the job API, some failing, and a few on a second endpoint. The API routes behind the charts
// (`/v1/endpoints/{id}/metrics`, `/v1/metrics`) count that load; each chart is drawn (a canvas with pixels of its
// series) and its text summary says the same numbers as the route, for the last hour and the last day, on the
// endpoint page and on the home page (all endpoints), at 1440 px and at 390 px with no sideways scrolling.
// Screenshots go to test-results/console/.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { execFileSync } from "node:child_process";
import type { Browser, Page } from "playwright-core";
import { chromiumPresent, openBrowser, signIn, horizontalOverflow } from "./chromium.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type Service } from "../../src/service/index.js";
import type { WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch } from "../../src/drivers/types.js";
import { chartSpecs, formatDuration, type ChartKey, type MetricsSeries } from "../../console/charts-data.js";
import { call, manifest, ProtocolWorker, resource, until } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const shots = join(repo, "test-results", "console");
const ADMIN = "console-charts-admin-key";
const haveChromium = chromiumPresent();

/** The known load: N jobs on the charted endpoint, FAILING of them failing; OTHER jobs on a second endpoint. */
const N = 12;
const FAILING = 3;
const OTHER = 2;
const RUN_MS = 120;
const CHARTS: ChartKey[] = ["requests", "delay", "execution", "cold-starts", "queue", "workers"];

/**
 * Workers that register over the worker protocol when started and run jobs until stopped: each takes RUN_MS and
 * fails when its input says so. Nothing else of a real worker matters to the charts.
 */
class JobRunningDriver implements WorkerDriver {
  readonly name = "process" as const;
  private readonly stops: Array<() => Promise<void>> = [];

  async start(launch: WorkerLaunch): Promise<WorkerHandle> {
    let exit!: (e: WorkerExit) => void;
    const exited = new Promise<WorkerExit>((resolve) => (exit = resolve));
    const worker = new ProtocolWorker(launch.apiUrl, launch.workerId, launch.workerToken);
    let stopped = false;
    const loop = (async () => {
      await worker.register();
      while (!stopped) {
        const jobs = await worker.take(1, 300);
        for (const job of jobs) {
          await new Promise((r) => setTimeout(r, RUN_MS));
          await worker.done([
            job.input?.fail
              ? { jobId: job.id, lease: job.lease, status: "FAILED", error: { message: "asked to fail" } }
              : { jobId: job.id, lease: job.lease, status: "COMPLETED", output: { ok: true } },
          ]);
        }
      }
    })().catch(() => undefined);
    const stop = async () => {
      stopped = true;
      await loop;
      exit({ code: 0, signal: null });
    };
    this.stops.push(stop);
    return { workerId: launch.workerId, exited, stop: async () => (await stop(), exited), kill: () => void stop() };
  }

  async close(): Promise<void> {
    await Promise.all(this.stops.map((s) => s()));
  }
}

let dir: string;
let service: Service;
let browser: Browser;
let page: Page;
let chartedId: string;
let otherId: string;

const series = async (path: string, window: "1h" | "1d"): Promise<MetricsSeries> => {
  const r = await call(`${service.url}${path}?window=${window}`, { key: ADMIN });
  expect(r.status, r.text).toBe(200);
  return r.body as MetricsSeries;
};

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

/** Whether the page scrolls sideways (what a phone user would have to do to read it). */
const pageOverflow = () => horizontalOverflow(page);

/** Each chart's summary as the page shows it, once the window asked for is loaded. */
async function summaries(region: string, window: "1h" | "1d"): Promise<Record<string, string>> {
  const charts = page.getByRole("region", { name: region, exact: true });
  // On a machine loaded by other tests the first series read can take longer than the locator default (20 s).
  await charts.locator(`.chart-grid[data-loaded="${window}"]`).waitFor({ timeout: 45_000 });
  const out: Record<string, string> = {};
  for (const key of CHARTS) out[key] = ((await charts.locator(`[data-chart="${key}"] .chart-summary`).textContent()) ?? "").trim();
  return out;
}

/** Per chart: its canvas's size and how many of its pixels are painted, and how many in its first series' colour. */
async function drawn(region: string): Promise<Record<string, { width: number; painted: number; series: number }>> {
  return page.getByRole("region", { name: region, exact: true }).evaluate((section) => {
    const out: Record<string, { width: number; painted: number; series: number }> = {};
    for (const figure of section.querySelectorAll<HTMLElement>("[data-chart]")) {
      const canvas = figure.querySelector("canvas");
      if (!canvas) continue;
      const { data } = canvas.getContext("2d")!.getImageData(0, 0, canvas.width, canvas.height);
      let painted = 0;
      let series = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3]! > 0) painted++;
        // #0b5cad, the first series' colour (antialiased edges aside).
        if (Math.abs(data[i]! - 11) < 24 && Math.abs(data[i + 1]! - 92) < 24 && Math.abs(data[i + 2]! - 173) < 24 && data[i + 3]! > 128) series++;
      }
      out[figure.dataset.chart!] = { width: canvas.getBoundingClientRect().width, painted, series };
    }
    return out;
  });
}

/** The page's summaries say what the route's numbers say, chart by chart. */
function expectSame(shown: Record<string, string>, route: MetricsSeries): void {
  const expected = Object.fromEntries(chartSpecs(route).map((c) => [c.key, c.summary]));
  expect(shown).toEqual(expected);
}

describe.skipIf(!haveChromium)("the console's charts in a browser", () => {
  beforeAll(async () => {
    execFileSync(process.execPath, ["scripts/build-console.mjs"], { cwd: repo, stdio: "pipe" });
    mkdirSync(shots, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), "svc-console-charts-"));
    const artifact = join(dir, "artifact.tar.gz");
    writeFileSync(artifact, "not really a tarball; the service only hashes it");
    service = await startService({
      dataDir: join(dir, "data"),
      apiKeys: [ADMIN],
      driver: new JobRunningDriver(),
      leaseMs: 3000,
      heartbeatMs: 500,
      metricsSampleMs: 100,
    });
    // No retries: a failed job is final. A short idle timeout: the release's probe goes, so the load cold-starts.
    const endpoints = await service.deploy({
      app: "charts",
      env: "prod",
      manifest: manifest(
        { charted: resource({ workersMax: 1, retries: 0, idleTimeout: 1 }), other: resource({ workersMax: 1, retries: 0, idleTimeout: 1 }) },
        "charts",
      ),
      artifactPath: join(dir, "artifact.tar.gz"),
    });
    [chartedId, otherId] = [endpoints.find((e) => e.name === "charted")!.id, endpoints.find((e) => e.name === "other")!.id];
    const workers = async (id: string) => (await call(`${service.url}/v2/${id}/health`, { key: ADMIN })).body.workers as Record<string, number>;
    const none = async (id: string) => {
      const w = await workers(id);
      return w.idle + w.running + w.initializing === 0;
    };
    await until(async () => (await none(chartedId)) && (await none(otherId)), 30_000, 100);

    // The load, through the job API.
    const ids: Array<[string, string]> = [];
    for (let i = 0; i < N; i++) {
      const r = await call(`${service.url}/v2/${chartedId}/run`, { key: ADMIN, body: { input: { i, fail: i < FAILING } } });
      expect(r.status).toBe(200);
      ids.push([chartedId, r.body.id]);
    }
    for (let i = 0; i < OTHER; i++) ids.push([otherId, (await call(`${service.url}/v2/${otherId}/run`, { key: ADMIN, body: { input: { i } } })).body.id]);
    await until(
      async () => {
        for (const [e, id] of ids)
          if (!["COMPLETED", "FAILED"].includes((await call(`${service.url}/v2/${e}/status/${id}`, { key: ADMIN })).body.status)) return false;
        return true;
      },
      60_000,
      100,
    );
    // The workers idle out: every number behind the charts holds still from here on.
    await until(async () => (await none(chartedId)) && (await none(otherId)), 30_000, 100);
    await until(
      async () => {
        const { totals } = await series("/v1/metrics", "1h");
        return totals.queueDepth === 0 && totals.workers !== null && Object.values(totals.workers).every((n) => n === 0);
      },
      10_000,
      100,
    );

    ({ browser, page } = await openBrowser());
    await signIn(page, service.url, ADMIN);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await service?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the routes count the known load: N requests, the failed ones, a cold start; all endpoints add up", async () => {
    const hour = await series(`/v1/endpoints/${chartedId}/metrics`, "1h");
    expect(hour.totals).toMatchObject({ requests: N, jobs: { COMPLETED: N - FAILING, FAILED: FAILING, CANCELLED: 0, TIMED_OUT: 0 }, queueDepth: 0 });
    expect(hour.totals.coldStarts).toBeGreaterThanOrEqual(1);
    // The jobs queued behind one worker: the deepest sample saw most of them waiting.
    expect(hour.totals.queueDepthMax).toBeGreaterThanOrEqual(N / 2);
    expect(hour.points.reduce((n, p) => n + p.requests, 0)).toBe(N);
    // Each job ran RUN_MS (buckets are within about 5%).
    expect(hour.totals.executionMs.p50!).toBeGreaterThanOrEqual(RUN_MS * 0.95);
    const day = await series(`/v1/endpoints/${chartedId}/metrics`, "1d");
    expect(day.totals).toMatchObject({ requests: N, coldStarts: hour.totals.coldStarts, jobs: hour.totals.jobs });
    const all = await series("/v1/metrics", "1h");
    expect(all.totals.requests).toBe(N + OTHER);
    expect(all.totals.jobs.COMPLETED).toBe(N - FAILING + OTHER);
    expect((all as MetricsSeries & { endpointIds: string[] }).endpointIds).toEqual([chartedId, otherId].sort());
    // Another user's key adds up its own endpoints: none of these.
    const bob = await service.mintKey({ scopes: ["admin"], userId: "bob" });
    const bobs = await call(`${service.url}/v1/metrics?window=1h`, { key: bob.key });
    expect(bobs.body).toMatchObject({ endpointIds: [], totals: { requests: 0, queueDepth: null } });
    expect((await call(`${service.url}/v1/metrics?window=1w`, { key: ADMIN })).status).toBe(400);
  }, 30_000);

  it("draws the endpoint's charts, and their summaries say the route's numbers for the last hour and the last day", async () => {
    await page.goto(`${service.url}/console/#/endpoints/${chartedId}`);
    await page.getByRole("heading", { name: "charted", level: 1 }).waitFor();
    const shown = await summaries("Charts", "1h");
    expectSame(shown, await series(`/v1/endpoints/${chartedId}/metrics`, "1h"));
    expect(shown.requests).toBe(`${N} requests in the last hour; ${N - FAILING} completed, ${FAILING} failed.`);
    const hour = await series(`/v1/endpoints/${chartedId}/metrics`, "1h");
    expect(shown.execution).toContain(`p95 ${formatDuration(hour.totals.executionMs.p95!)}`);
    expect(shown["cold-starts"]).toMatch(new RegExp(`^${hour.totals.coldStarts} cold starts? in the last hour\\.$`));
    const pixels = await drawn("Charts");
    expect(Object.keys(pixels).sort()).toEqual([...CHARTS].sort());
    for (const key of CHARTS) expect(pixels[key]!.painted, key).toBeGreaterThan(500);
    // The requests line itself, not just the axes.
    expect(pixels.requests!.series).toBeGreaterThan(20);
    await page.getByRole("region", { name: "Charts", exact: true }).scrollIntoViewIfNeeded();
    await shot("charts-endpoint-1440");

    await page.getByRole("button", { name: "Last day" }).click();
    const day = await summaries("Charts", "1d");
    expectSame(day, await series(`/v1/endpoints/${chartedId}/metrics`, "1d"));
    expect(day.requests).toBe(`${N} requests in the last day; ${N - FAILING} completed, ${FAILING} failed.`);
    expect(await page.getByRole("button", { name: "Last day" }).getAttribute("aria-pressed")).toBe("true");
    expect((await drawn("Charts")).requests!.painted).toBeGreaterThan(500);
  }, 150_000);

  it("shows all endpoints added up on the home page", async () => {
    await page.goto(`${service.url}/console/#/endpoints`);
    await page.getByRole("heading", { name: "Endpoints", level: 1 }).waitFor();
    const shown = await summaries("All endpoints", "1h");
    expectSame(shown, await series("/v1/metrics", "1h"));
    expect(shown.requests).toBe(`${N + OTHER} requests in the last hour; ${N - FAILING + OTHER} completed, ${FAILING} failed.`);
    const pixels = await drawn("All endpoints");
    for (const key of CHARTS) expect(pixels[key]!.painted, key).toBeGreaterThan(500);
    await shot("charts-home-1440");
  }, 150_000);

  it("fits a 390 px phone: the charts follow the width, nothing scrolls sideways", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      for (const [hash, region, name] of [
        [`#/endpoints/${chartedId}`, "Charts", "charts-endpoint-390"],
        ["#/endpoints", "All endpoints", "charts-home-390"],
      ] as const) {
        await page.goto(`${service.url}/console/${hash}`);
        await page.reload();
        await summaries(region, "1h");
        const pixels = await drawn(region);
        for (const key of CHARTS) {
          expect(pixels[key]!.width, key).toBeGreaterThan(200);
          expect(pixels[key]!.width, key).toBeLessThanOrEqual(390);
          expect(pixels[key]!.painted, key).toBeGreaterThan(200);
        }
        expect(await pageOverflow()).toBeLessThanOrEqual(0);
        await shot(name);
        await page.getByRole("region", { name: region, exact: true }).screenshot({ path: join(shots, `${name}-region.png`) });
      }
    } finally {
      await page.setViewportSize({ width: 1440, height: 900 });
    }
  }, 150_000);
});

describe.skipIf(!haveChromium)("the console's charts when the service keeps no metrics (SVC_METRICS=off)", () => {
  let offDir: string;
  let off: Service;
  let offBrowser: Browser;
  let offPage: Page;
  let endpointId: string;

  beforeAll(async () => {
    execFileSync(process.execPath, ["scripts/build-console.mjs"], { cwd: repo, stdio: "pipe" });
    offDir = mkdtempSync(join(tmpdir(), "svc-console-charts-off-"));
    writeFileSync(join(offDir, "artifact.tar.gz"), "not really a tarball; the service only hashes it");
    off = await startService({ dataDir: join(offDir, "data"), apiKeys: [ADMIN], driver: new JobRunningDriver(), metrics: false });
    const [endpoint] = await off.deploy({
      app: "quiet",
      env: "prod",
      manifest: manifest({ quiet: resource() }, "quiet"),
      artifactPath: join(offDir, "artifact.tar.gz"),
    });
    endpointId = endpoint!.id;
    ({ browser: offBrowser, page: offPage } = await openBrowser());
    await signIn(offPage, off.url, ADMIN);
  }, 150_000);

  afterAll(async () => {
    await offBrowser?.close();
    await off?.close();
    if (offDir) rmSync(offDir, { recursive: true, force: true });
  });

  it("say so calmly, with how to turn them on, instead of an error, on the home page and on an endpoint's page", async () => {
    expect((await call(`${off.url}/v1/metrics?window=1h`, { key: ADMIN })).status).toBe(404);
    for (const [hash, region] of [
      ["#/endpoints", "All endpoints"],
      [`#/endpoints/${endpointId}`, "Charts"],
    ] as const) {
      await offPage.goto(`${off.url}/console/${hash}`);
      const charts = offPage.getByRole("region", { name: region, exact: true });
      const notice = charts.getByRole("status");
      await notice.waitFor();
      expect(await notice.textContent()).toContain("SVC_METRICS=off");
      expect(await notice.textContent()).toContain("metrics are on by default");
      expect(await charts.getByRole("alert").count()).toBe(0);
      expect(await charts.locator(".chart-grid").count()).toBe(0);
    }
  }, 150_000);
});
