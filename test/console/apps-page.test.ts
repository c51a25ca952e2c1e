// The Apps page in headless Chromium against a real service: an app deployed twice through the public deploy
// API (fixtures/console-app, process workers) shows each environment's releases with the running one marked,
// and rolls back to the older build from there. Layout checked at 1440 px and 390 px; screenshots go to
// test-results/console/.

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { deployOverHttp } from "./deploy-over-http.js";
import { shots, startConsoleService, type ConsoleService } from "./console-service.js";
import { chromiumPresent, openBrowser, signIn, horizontalOverflow } from "./chromium.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";

const ADMIN = "console-apps-admin-key";
const haveChromium = chromiumPresent();

let consoleService: ConsoleService;
let service: Service;
let browser: Browser;
let page: Page;
const builds: string[] = [];
const ENV_URL = () => `${service.url}/v1/apps/console-app/environments/prod`;

/** Whether the page scrolls sideways (what a phone user would have to do to read it). */
const pageOverflow = () => horizontalOverflow(page);

async function openApps(): Promise<void> {
  await page.goto(`${service.url}/console/#/apps`);
  await page.getByRole("heading", { name: "Apps and environments", level: 1 }).waitFor();
}

describe.skipIf(!haveChromium)("the Apps page's releases in a browser", () => {
  beforeAll(async () => {
    consoleService = await startConsoleService({ key: ADMIN });
    service = consoleService.service;
    const app = consoleService.app;
    builds.push(await deployOverHttp(service.url, ADMIN, app, "prod"));
    // A second build (a changed greeting), so there is an older release to roll back to.
    const greeter = join(app, "src", "greeter.ts");
    writeFileSync(greeter, readFileSync(greeter, "utf8").replace("`hello ${input.name}`", "`hi ${input.name}`"));
    builds.push(await deployOverHttp(service.url, ADMIN, app, "prod"));
    expect(builds[0]).not.toBe(builds[1]);
    ({ browser, page } = await openBrowser());
    await signIn(page, service.url, ADMIN);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await consoleService?.close();
  });

  for (const [width, height] of [
    [1440, 900],
    [390, 844],
  ] as const) {
    it(`at ${width} px: lists an environment's releases, the running one marked, and nothing scrolls sideways`, async () => {
      await page.setViewportSize({ width, height });
      try {
        await openApps();
        const env = page.locator('[data-environment="console-app/prod"]');
        const table = env.getByRole("table", { name: "Releases of console-app/prod" });
        await table.locator(`tr[data-build="${builds[1]}"]`).getByText("running").waitFor();
        const rows = table.locator("tbody tr");
        expect(await rows.count()).toBe(2);
        // Newest first: the second deploy, running; then the first, live once and now a rollback target.
        expect(await rows.nth(0).getAttribute("data-build")).toBe(builds[1]);
        expect(await rows.nth(1).getAttribute("data-build")).toBe(builds[0]);
        expect(await rows.nth(0).textContent()).toContain(builds[1]!.slice(0, 12));
        expect(await rows.nth(1).locator("time").count()).toBe(1);
        expect(await rows.nth(1).getByText("running").count()).toBe(0);
        // One badge a release: the running one says so, the one it replaced says that (never two "live").
        expect(await rows.nth(0).locator(".badge").allTextContents()).toEqual(["running"]);
        expect(await rows.nth(1).locator(".badge").allTextContents()).toEqual(["replaced"]);
        expect(
          await rows
            .nth(1)
            .getByRole("button", { name: `Roll back to build ${builds[0]!.slice(0, 12)}` })
            .count(),
        ).toBe(1);
        expect(await rows.nth(0).getByRole("button").count()).toBe(0);
        expect(await pageOverflow(), "the Apps page scrolls sideways").toBeLessThanOrEqual(0);
        await page.screenshot({ path: join(shots, `apps-releases-${width}.png`), fullPage: true });
      } finally {
        await page.setViewportSize({ width: 1440, height: 900 });
      }
    }, 60_000);
  }

  it("rolls the environment back to the older build from the Apps page", async () => {
    await openApps();
    const env = page.locator('[data-environment="console-app/prod"]');
    const table = env.getByRole("table", { name: "Releases of console-app/prod" });
    await table.locator(`tr[data-build="${builds[1]}"]`).getByText("running").waitFor();
    await table.getByRole("button", { name: `Roll back to build ${builds[0]!.slice(0, 12)}` }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByText("start new workers on that build first").waitFor();
    await dialog.getByRole("button", { name: "Roll back" }).click();
    // The service runs the older build...
    await until(async () => (await call(ENV_URL(), { key: ADMIN })).body.build === builds[0], 60_000, 200);
    const releases = (await call(`${ENV_URL()}/releases`, { key: ADMIN })).body.releases as Array<{ buildId: string; kind: string }>;
    expect(releases[0]).toMatchObject({ buildId: builds[0], kind: "rollback" });
    // ...and the page says so: a rollback release on top, running, and the environment's build follows.
    const top = table.locator("tbody tr").first();
    await top.getByText("rollback").waitFor();
    await top.getByText("running").waitFor({ timeout: 30_000 });
    expect(await top.locator(".badge").allTextContents()).toEqual(["running"]);
    expect(await table.locator(`tr[data-build="${builds[1]}"] .badge`).allTextContents()).toEqual(["replaced"]);
    expect(await top.getAttribute("data-build")).toBe(builds[0]);
    expect(await table.locator(`tr[data-build="${builds[1]}"]`).getByText("running").count()).toBe(0);
    await env.locator("dl.facts dd.mono").getByText(builds[0]!.slice(0, 12)).waitFor();
    expect(await pageOverflow()).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(shots, "apps-rolled-back.png"), fullPage: true });
  }, 120_000);
});
