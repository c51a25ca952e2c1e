// The console tests' browser: Debian's Chromium through playwright-core, one page, and the sign-in the page tests
// start from. Flags keep Chromium from reaching out (no network here) and from needing a GPU or a sandbox.
import { existsSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

export async function openBrowser(viewport = { width: 1440, height: 900 }): Promise<{ browser: Browser; page: Page }> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const page = await browser.newPage({ viewport });
  page.setDefaultTimeout(20_000);
  return { browser, page };
}

/** Signs in to the console at `serviceUrl` with `key` and waits for the home page. */
export async function signIn(page: Page, serviceUrl: string, key: string): Promise<void> {
  await page.goto(`${serviceUrl}/console/`);
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Endpoints", level: 1 }).waitFor();
}

/** How far the page scrolls sideways (at most 0 when nothing is cut off). */
export const horizontalOverflow = (page: Page): Promise<number> => page.evaluate(() => document.scrollingElement!.scrollWidth - innerWidth);

/**
 * Whether the browser tests can run: without Chromium they are skipped with a notice, except in CI, where its
 * absence is an error (the console would otherwise go untested without anyone noticing).
 */
export function chromiumPresent(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.CI === "true") throw new Error(`${CHROMIUM} is missing: the console's browser tests must run in CI (apt-get install chromium)`);
  console.warn(`NOTICE: ${CHROMIUM} is missing; skipping the console's browser tests (apt-get install chromium to run them)`);
  return false;
}
