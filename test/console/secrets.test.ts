// The console's secrets page in headless Chromium against a real service: names, scopes and dates only; a value
// typed once in a password field, never shown, never in the page or its requests' answers.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { chromiumPresent, openBrowser } from "./chromium.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";

const ADMIN = "console-secrets-admin-key";
const VALUE = "console-typed-secret-value-42";
const haveChromium = chromiumPresent();

let dir: string;
let service: Service;
let browser: Browser;
let page: Page;

describe.skipIf(!haveChromium)("the console's secrets page", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-console-secrets-"));
    service = await startService({ dataDir: join(dir, "data"), apiKeys: [ADMIN] });
    ({ browser, page } = await openBrowser({ width: 1200, height: 800 }));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await service?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("sets a secret from a password field, lists its name and scope, never its value, and deletes it", async () => {
    const answers: string[] = [];
    page.on("response", async (r) => {
      if (r.url().includes("/v1/secrets")) answers.push(await r.text().catch(() => ""));
    });
    await page.goto(`${service.url}/console/`);
    await page.getByLabel("API key").fill(ADMIN);
    await page.getByRole("button", { name: "Sign in" }).click();
    // The header says who the key acts as (GET /v1/me).
    await page
      .locator(".whoami")
      .getByText(/^default · key /)
      .waitFor();
    await page.getByRole("link", { name: "Secrets" }).click();
    await page.getByRole("heading", { name: "Secrets", level: 1 }).waitFor();
    await page.getByText("No secrets.").waitFor();

    const form = page.getByRole("form", { name: "Set a secret" });
    await form.getByLabel("Name").fill("HF_TOKEN");
    expect(await form.getByLabel("Value").getAttribute("type")).toBe("password");
    await form.getByLabel("Value").fill(VALUE);
    await form.getByLabel("App (optional)").fill("shop");
    await form.getByRole("button", { name: "Set secret" }).click();
    await page.getByText("Set secret HF_TOKEN for shop (every environment).").waitFor();
    const row = page.getByRole("table", { name: "Secrets" }).locator('tr[data-secret="HF_TOKEN"]');
    await row.getByText("shop (every environment)").waitFor();
    expect(await form.getByLabel("Value").inputValue()).toBe("");
    expect(await page.content()).not.toContain(VALUE);
    expect(answers.join("\n")).not.toContain(VALUE);
    // Stored for the workers all the same.
    expect((await call(`${service.url}/v1/secrets`, { key: ADMIN })).body).toEqual([expect.objectContaining({ name: "HF_TOKEN", app: "shop", env: null })]);

    // A bad name is the API's answer, shown.
    await form.getByLabel("Name").fill("SVC_NOPE");
    await form.getByLabel("Value").fill("x");
    await form.getByRole("button", { name: "Set secret" }).click();
    await page.getByText('"SVC_NOPE" is not a secret name').waitFor();

    await row.getByRole("button", { name: "Delete secret HF_TOKEN (shop (every environment))" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete secret" }).click();
    await page.getByText("Deleted secret HF_TOKEN.").waitFor();
    await page.getByText("No secrets.").waitFor();
  }, 60_000);
});
