// The web console in headless Chromium (Debian's, driven by playwright-core) against a real service: a real
// build of fixtures/console-app deployed through the public deploy API, real process workers, real SQLite.
// Screenshots of the main pages go to test-results/console/. Without /usr/bin/chromium the tests are skipped
// with a notice, except in CI (CI=true) where that is a failure.

import { createHash, randomBytes } from "node:crypto";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { deployOverHttp } from "./deploy-over-http.js";
import { repo, shots, startConsoleService, type ConsoleService } from "./console-service.js";
import { chromiumPresent, openBrowser } from "./chromium.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProject } from "../../src/build/index.js";
import type { Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";
import { startFakeHub, type FakeHub } from "../fakes/hf-hub.js";

const ADMIN = "console-admin-key";
const haveChromium = chromiumPresent();

let consoleService: ConsoleService;
let service: Service;
let browser: Browser;
let page: Page;
let echoId: string;
let tickerId: string;
let bobKey: string;
/** The stand-in Hugging Face hub the service fetches models from. */
let hub: FakeHub;

/** The endpoints made through the REST API (the list has the deployed ones too, marked source "deploy"). */
async function restEndpoints(): Promise<Array<{ id: string; source: string; [k: string]: unknown }>> {
  return ((await call(`${service.url}/v1/endpoints`, { key: ADMIN })).body as Array<{ id: string; source: string }>).filter((e) => e.source === "rest");
}

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

async function signIn(key: string): Promise<void> {
  await page.goto(`${service.url}/console/`);
  await page.evaluate(() => sessionStorage.clear());
  await page.reload();
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Endpoints", level: 1 }).waitFor();
}

describe.skipIf(!haveChromium)("the web console in a browser", () => {
  beforeAll(async () => {
    // The webhook receiver listens on 127.0.0.1, which webhooks reach only when the operator allows it.
    hub = await startFakeHub();
    consoleService = await startConsoleService({
      key: ADMIN,
      // A failed model is tried again only after a minute: the page shows its failure, not a retry under way.
      service: { webhooks: { allow: ["127.0.0.1/32"] }, models: { hub: hub.url, cacheSizeBytes: 10e9, retryMs: 60_000 } },
    });
    service = consoleService.service;
    await deployOverHttp(service.url, ADMIN, consoleService.app, "test");
    const env = (await call(`${service.url}/v1/apps/console-app/environments/test`, { key: ADMIN })).body;
    echoId = env.endpoints.find((e: { name: string }) => e.name === "echo").id;
    tickerId = env.endpoints.find((e: { name: string }) => e.name === "ticker").id;
    // A second user with resources of their own (the operator's key may create keys for other users).
    bobKey = (await call(`${service.url}/v1/keys`, { key: ADMIN, body: { name: "bob admin", userId: "bob", scopes: ["admin"] } })).body.key;
    expect(
      (await call(`${service.url}/v2/network-volumes`, { key: bobKey, body: { name: "bobs-private-volume", size: 10, dataCenter: "local" } })).status,
    ).toBe(201);
    expect((await call(`${service.url}/v1/templates`, { key: bobKey, body: { name: "bobs-template", imageName: "example/bob:1" } })).status).toBe(201);
    ({ browser, page } = await openBrowser({ width: 1366, height: 800 }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await consoleService?.close();
    await hub?.close();
  });

  it("refuses a wrong key, signs in with a good one and lists the endpoints with their status", async () => {
    await page.goto(`${service.url}/console/`);
    // The form says where a key is to be found.
    const note = await page.locator("#signin-note").innerText();
    expect(note).toContain("admin-key");
    expect(note).toContain("svc whoami --key");
    await page.getByLabel("API key").fill("not-a-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("The service refused this API key").waitFor();
    await signIn(ADMIN);
    // The key is in session storage, never in the URL.
    expect(page.url()).not.toContain(ADMIN);
    expect(await page.evaluate(() => sessionStorage.getItem("svc.console.key"))).toBe(ADMIN);
    const rows = page.getByRole("table", { name: "Endpoints" });
    await rows.getByRole("link", { name: "echo" }).waitFor();
    await rows.getByRole("link", { name: "ticker" }).waitFor();
    await page
      .locator(`tr[data-endpoint="${echoId}"]`)
      .getByText(/running, \d+ idle, \d+ initializing/)
      .waitFor();
    // Grouped by app and environment, under a heading row naming both.
    const group = page.locator('tbody[data-group="console-app/test"]');
    await group.getByRole("rowheader", { name: "App console-app · environment test" }).waitFor();
    expect(await group.getByRole("link").allTextContents()).toEqual(["echo", "greeter", "ticker"]);
    await shot("endpoints");
  }, 60_000);

  it("creates a template on the templates page, where they are listed, and an endpoint from it", async () => {
    await page.getByRole("link", { name: "Templates" }).click();
    await page.getByRole("heading", { name: "Templates", level: 1 }).waitFor();
    const templateForm = page.getByRole("form", { name: "New template" });
    await templateForm.getByLabel("Template name").fill("echo code");
    await templateForm.getByLabel("Image").fill(`svc://${echoId}`);
    await templateForm.getByRole("button", { name: "Create template" }).click();
    await page.getByText("Created template echo code.").waitFor();
    await page
      .getByRole("table", { name: "Templates" })
      .getByRole("rowheader", { name: /echo code/ })
      .waitFor();
    // The endpoints page carries no template form.
    await page.getByRole("link", { name: "Endpoints" }).click();
    await page.getByRole("heading", { name: "Endpoints", level: 1 }).waitFor();
    expect(await page.getByRole("form", { name: "New template" }).count()).toBe(0);
    await page.getByRole("button", { name: "New endpoint" }).click();
    const form = page.getByRole("form", { name: "New endpoint" });
    await form.getByLabel("Template").selectOption({ label: `echo code (svc://${echoId})` });
    await form.getByLabel("Name").fill("rest-echo");
    await form.getByLabel("Workers max").fill("1");
    await form.getByLabel("Idle timeout (s)").fill("2");
    await form.getByLabel("Environment variables (KEY=value, one a line)").fill("GREETING=hi");
    await form.getByRole("button", { name: "Create endpoint" }).click();
    await page.getByText("Created endpoint rest-echo.").waitFor();
    await page.getByRole("table", { name: "Endpoints" }).getByRole("link", { name: "rest-echo" }).waitFor();
    await page.locator('tbody[data-group="rest"]').getByRole("link", { name: "rest-echo" }).waitFor();
    const listed = await restEndpoints();
    expect(listed).toEqual([expect.objectContaining({ name: "rest-echo", workersMax: 1, idleTimeout: 2, env: { GREETING: "hi" }, status: "READY" })]);
    // Bob's template is not offered to this user.
    await page.getByRole("button", { name: "New endpoint" }).click();
    const options = await page.getByRole("form", { name: "New endpoint" }).getByLabel("Template").locator("option").allTextContents();
    expect(options.join()).not.toContain("bobs-template");
    await page.getByRole("button", { name: "Cancel" }).click();
  }, 60_000);

  it("edits an endpoint, saying that the change restarts its workers", async () => {
    await page.getByRole("table", { name: "Endpoints" }).getByRole("link", { name: "rest-echo" }).click();
    await page.getByRole("heading", { name: "rest-echo", level: 1 }).waitFor();
    // No jobs yet: the list says how long a finished job's result is kept, and its record after that.
    await page
      .getByRole("region", { name: "Recent jobs" })
      .getByText(/result is kept 30 minutes after its end for `\/run`, 1 minute for `\/runsync`.*then its record .* stays listed as history/)
      .waitFor();
    await page.getByRole("button", { name: "Edit" }).click();
    const form = page.getByRole("form", { name: "Edit endpoint rest-echo" });
    await form.getByText("apply without restarting workers").waitFor();
    await form.getByLabel("Workers max").fill("2");
    await form.getByText("Saving restarts this endpoint's workers (changed: workersMax)").waitFor();
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Its workers are restarting with the new settings.").waitFor();
    const id = (await restEndpoints())[0]!.id;
    expect((await call(`${service.url}/v1/endpoints/${id}`, { key: ADMIN })).body.workersMax).toBe(2);
  }, 60_000);

  it("runs a job with runsync and shows its result, output and logs", async () => {
    await page.goto(`${service.url}/console/#/endpoints/${echoId}`);
    await page.getByRole("heading", { name: "echo", level: 1 }).waitFor();
    await page.getByLabel("Request body (JSON: {input, policy?, webhook?})").fill('{"input": {"hello": "console"}}');
    await page.getByRole("button", { name: "Send" }).click();
    const result = page.getByLabel("Result", { exact: true });
    await result.getByText('"status": "COMPLETED"').waitFor({ timeout: 60_000 });
    expect(await result.textContent()).toContain('"hello": "console"');
    // The job is selected: its record, input and logs (the handler's console.log) are shown.
    await page.getByLabel("Job output").getByText('"echoed"').waitFor();
    await page.getByLabel("Job input").getByText('"console"').waitFor();
    await page.getByLabel("Logs of this job output").getByText('echo says {"hello":"console"}').waitFor();
    await page.getByRole("table", { name: "Recent jobs" }).getByText("COMPLETED").first().waitFor();
    // When it was submitted: the date, and beside it how long ago.
    await page.getByRole("table", { name: "Recent jobs" }).locator("time").first().getByText("(just now)").waitFor();
    await shot("endpoint");
  }, 90_000);

  it("shows a job's webhook deliveries, a refused attempt and the retry that delivered it", async () => {
    const { createServer } = await import("node:http");
    let answered = 0;
    const receiver = createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(++answered === 1 ? 500 : 200).end());
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    try {
      const webhook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
      await page.goto(`${service.url}/console/#/endpoints/${echoId}`);
      await page.getByRole("heading", { name: "echo", level: 1 }).waitFor();
      await page.getByLabel("Request body (JSON: {input, policy?, webhook?})").fill(JSON.stringify({ input: { hello: "hook" }, webhook }));
      await page.getByRole("button", { name: "Send" }).click();
      await page.getByLabel("Result", { exact: true }).getByText('"status": "COMPLETED"').waitFor({ timeout: 60_000 });
      const table = page.getByRole("table", { name: "Webhook deliveries" });
      await table.locator("tr[data-outcome=delivered]").waitFor({ timeout: 30_000 });
      const rows = await table.locator("tbody tr").allTextContents();
      expect(rows).toHaveLength(2);
      expect(rows[0]).toMatch(/completed1HTTP 500.*retrying$/);
      expect(rows[1]).toMatch(/completed2HTTP 200.*delivered$/);
    } finally {
      await new Promise((r) => receiver.close(r));
    }
  }, 90_000);

  it("shows a streamed job's chunks as they arrive", async () => {
    await page.goto(`${service.url}/console/#/endpoints/${tickerId}`);
    await page.getByRole("heading", { name: "ticker", level: 1 }).waitFor();
    await page.getByLabel("Request body (JSON: {input, policy?, webhook?})").fill('{"input": {"count": 5, "delayMs": 700}}');
    await page.getByRole("radio", { name: /run \(queue it/ }).check();
    await page.getByRole("button", { name: "Send" }).click();
    const chunks = page.getByRole("list", { name: "Stream chunks" });
    await chunks.getByText('{"tick":1}').waitFor({ timeout: 60_000 });
    // The first chunk is on screen before the last one exists: they arrive live, not at the end.
    const seenEarly = await chunks.locator("li").allTextContents();
    expect(seenEarly).not.toContain('{"tick":5}');
    await chunks.getByText('{"tick":5}').waitFor({ timeout: 30_000 });
    expect(await chunks.locator("li").allTextContents()).toEqual(['{"tick":1}', '{"tick":2}', '{"tick":3}', '{"tick":4}', '{"tick":5}']);
    const heading = page.getByRole("heading", { name: /^Job / });
    await heading.getByText("COMPLETED").waitFor();
    // The recent jobs list follows at once (it reloads by itself only every 10 s).
    const jobId = (await heading.locator(".mono").textContent())!.trim();
    await page.locator(`tr[data-job="${jobId}"]`).getByText("COMPLETED").waitFor({ timeout: 2500 });
  }, 120_000);

  it("cancels a queued job; retry is not offered for it, as the job API's rules say", async () => {
    // One ticker worker at most: a long job holds it and the next job waits in the queue.
    const long = (await call(`${service.url}/v2/${tickerId}/run`, { key: ADMIN, body: { input: { count: 40, delayMs: 250 } } })).body.id;
    await until(async () => (await call(`${service.url}/v2/${tickerId}/status/${long}`, { key: ADMIN })).body.status === "IN_PROGRESS", 30_000, 100);
    await page.getByLabel("Request body (JSON: {input, policy?, webhook?})").fill('{"input": {"count": 1}}');
    await page.getByRole("radio", { name: /run \(queue it/ }).check();
    await page.getByRole("button", { name: "Send" }).click();
    const heading = page.getByRole("heading", { name: /^Job / });
    await heading.getByText("IN_QUEUE").waitFor();
    const queuedId = (await heading.locator(".mono").textContent())!.trim();
    // Only the actions the job API allows it: a queued job can be cancelled, not retried.
    expect(await page.getByRole("button", { name: "Retry job" }).count()).toBe(0);
    await page.getByRole("button", { name: "Cancel job" }).click();
    await heading.getByText("CANCELLED").waitFor();
    expect((await call(`${service.url}/v2/${tickerId}/status/${queuedId}`, { key: ADMIN })).body.status).toBe("CANCELLED");
    expect(await page.getByRole("button", { name: "Cancel job" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Retry job" }).count()).toBe(0);
    await page.locator(`tr[data-job="${queuedId}"]`).getByText("CANCELLED").waitFor();
    await call(`${service.url}/v2/${tickerId}/cancel/${long}`, { key: ADMIN, method: "POST" });
  }, 90_000);

  it("offers each function of a class endpoint in Try it, starting from its example input (from the TypeScript type)", async () => {
    const env = (await call(`${service.url}/v1/apps/console-app/environments/test`, { key: ADMIN })).body;
    const greeterId = env.endpoints.find((e: { name: string }) => e.name === "greeter").id;
    await page.goto(`${service.url}/console/#/endpoints/${greeterId}`);
    await page.getByRole("heading", { name: "greeter", level: 1 }).waitFor();
    const body = page.getByLabel("Request body (JSON: {input, policy?, webhook?})");
    const picker = page.getByLabel("Function");
    expect(await picker.locator("option").allTextContents()).toEqual(["bye", "hello"]);
    expect(JSON.parse(await body.inputValue())).toEqual({ input: { name: "Ada", formal: false }, function: "bye" });
    await picker.selectOption("hello");
    expect(JSON.parse(await body.inputValue())).toEqual({ input: { name: "Ada", times: 1 }, function: "hello" });
    await body.fill(JSON.stringify({ input: { name: "Ada", times: 2 }, function: "hello" }));
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByLabel("Result", { exact: true }).getByText('"greeting": "hello Adahello Ada"').waitFor({ timeout: 60_000 });
    await shot("try-it-class");
  }, 90_000);

  it("shows the API's error beside the size field of a volume, then creates, resizes and deletes one", async () => {
    await page.goto(`${service.url}/console/#/volumes`);
    await page.getByRole("heading", { name: "Network volumes", level: 1 }).waitFor();
    const form = page.getByRole("form", { name: "New network volume" });
    await form.getByLabel("Volume name").fill("models");
    await form.getByLabel("Size (GB)").fill("0");
    await form.getByRole("button", { name: "Create volume" }).click();
    const size = form.getByLabel("Size (GB)");
    await expect.poll(() => size.getAttribute("aria-invalid")).toBe("true");
    const errorId = (await size.getAttribute("aria-describedby"))!;
    const message = await page.locator(`[id="${errorId}"]`).textContent();
    expect(message).toContain("must be at least 10");
    // The name was fine: no error beside it.
    expect(await form.getByLabel("Volume name").getAttribute("aria-invalid")).toBe("false");
    await shot("volumes-error");

    await size.fill("20");
    await form.getByRole("button", { name: "Create volume" }).click();
    await page.getByText("Created volume models (20 GB).").waitFor();
    const row = page.getByRole("table", { name: "Network volumes" }).locator("tr", { hasText: "models" });
    await row.getByLabel("New size of models (GB)").fill("5");
    await row.getByRole("button", { name: "Resize" }).click();
    await row.getByText(/must be at least 10/).waitFor();
    await row.getByLabel("New size of models (GB)").fill("30");
    await row.getByRole("button", { name: "Resize" }).click();
    await page.getByRole("table", { name: "Network volumes" }).getByText("30 GB").waitFor();
    await shot("volumes");
    await page.getByRole("button", { name: "Delete volume models" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByText("billable until it is deleted").waitFor();
    await dialog.getByRole("button", { name: "Delete volume and its data" }).click();
    await page.getByText("Deleted volume models.").waitFor();
    expect((await call(`${service.url}/v2/network-volumes`, { key: ADMIN })).body).toEqual([]);
  }, 60_000);

  it("creates a key shown once, revokes it, and the revoked key is refused", async () => {
    await page.goto(`${service.url}/console/#/keys`);
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
    const form = page.getByRole("form", { name: "New API key" });
    await form.getByLabel("Key name").fill("ci runner");
    await form.getByRole("checkbox", { name: /management:read/ }).check();
    await form.getByLabel("Expires").selectOption({ label: "7 days" });
    await form.getByRole("button", { name: "Create key" }).click();
    const secretBox = page.getByLabel("API key", { exact: true });
    await secretBox.waitFor();
    const secret = await secretBox.inputValue();
    expect(secret.length).toBeGreaterThan(20);
    await page.getByRole("button", { name: "Copy" }).click();
    await page.getByText(/Copied to the clipboard|Selected: press Ctrl\+C/).waitFor();
    const created = (await call(`${service.url}/v1/keys`, { key: ADMIN })).body.find((k: { name: string }) => k.name === "ci runner");
    expect(created.scopes).toEqual(["jobs:*", "management:read"]);
    expect(created.expiresAt - created.createdAt).toBe(7 * 86_400_000);
    expect((await call(`${service.url}/v2/${echoId}/health`, { key: secret })).status).toBe(200);
    await shot("keys");
    await page.getByRole("button", { name: "Done" }).click();
    // Its expiry, with how far off it is; its creation, with how long ago.
    const keyRow = page.locator(`tr[data-key="${created.id}"]`);
    await keyRow.getByText("(in 7 days)").waitFor();
    await keyRow.getByText("(just now)").first().waitFor();
    // Shown once: the list has no secret in it.
    expect(await page.locator("body").textContent()).not.toContain(secret);

    await page.getByRole("button", { name: "Revoke key ci runner" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Revoke key" }).click();
    await page.getByText("Revoked key ci runner.").waitFor();
    // The record's times are epoch milliseconds; the list shows them as dates.
    const revokedAt = (await call(`${service.url}/v1/keys/${created.id}`, { key: ADMIN })).body.revokedAt as number;
    expect(revokedAt).toEqual(expect.any(Number));
    const row = page.getByRole("row").filter({ hasText: "ci runner" });
    const shown = await page.evaluate((t) => new Date(t).toLocaleString(), revokedAt);
    await row.getByText(`revoked ${shown}`).waitFor();
    expect((await call(`${service.url}/v2/${echoId}/health`, { key: secret })).status).toBe(401);
    // The console refuses it too.
    await page.evaluate(() => sessionStorage.clear());
    await page.reload();
    await page.getByLabel("API key").fill(secret);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("The service refused this API key").waitFor();
  }, 60_000);

  it("shows apps with their environments, builds and endpoints", async () => {
    await signIn(ADMIN);
    await page.goto(`${service.url}/console/#/apps`);
    const env = page.locator('[data-environment="console-app/test"]');
    await env.getByRole("link", { name: "echo" }).waitFor();
    await env.getByRole("link", { name: "ticker" }).waitFor();
    expect(await env.textContent()).not.toContain("none yet");
    await shot("apps");
  }, 30_000);

  it("deletes a console endpoint after a confirmation saying what goes", async () => {
    const id = (await restEndpoints())[0]!.id;
    await page.goto(`${service.url}/console/#/endpoints/${id}`);
    await page.getByRole("heading", { name: "rest-echo", level: 1 }).waitFor();
    await page.getByRole("button", { name: "Delete" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByText("configuration, its logs and its job history are deleted").waitFor();
    // Escape (or Cancel) keeps it.
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    expect(await restEndpoints()).toHaveLength(1);
    await page.getByRole("button", { name: "Delete" }).click();
    await dialog.getByRole("button", { name: "Delete endpoint" }).click();
    await page.getByRole("heading", { name: "Endpoints", level: 1 }).waitFor();
    expect(await restEndpoints()).toEqual([]);
  }, 60_000);

  it("never shows a second user's resources, either way", async () => {
    await page.goto(`${service.url}/console/#/volumes`);
    await page.getByText("No network volumes.").waitFor();
    expect(await page.locator("main").textContent()).not.toContain("bobs-private-volume");

    await signIn(bobKey);
    await page.getByText("No endpoints yet.").waitFor();
    const endpointsText = await page.locator("main").textContent();
    for (const name of ["echo", "ticker", "rest-echo"]) expect(endpointsText).not.toMatch(new RegExp(`\\b${name}\\b`));
    await page.goto(`${service.url}/console/#/volumes`);
    await page.getByRole("rowheader", { name: /bobs-private-volume/ }).waitFor();
    await page.goto(`${service.url}/console/#/keys`);
    await page.getByRole("table", { name: "API keys" }).getByText("bob admin").waitFor();
    // The key this console signed in with is marked.
    const bobRow = page.getByRole("row").filter({ hasText: "bob admin" });
    await bobRow.getByText("signed in with this key").waitFor();
    expect(await page.getByText("signed in with this key").count()).toBe(1);
    expect(await page.locator("main").textContent()).not.toContain("ci runner");
    // Bob cannot open the first user's endpoint either: it does not exist for him.
    await page.goto(`${service.url}/console/#/endpoints/${echoId}`);
    await page.getByRole("heading", { name: `No endpoint ${echoId}` }).waitFor();
  }, 60_000);

  it("shows the host's model cache: a fetch's progress until the model is ready, and a revision the hub lacks with its error and what to do", async () => {
    const weights = randomBytes(3_000_000);
    hub.add("acme/tiny", "c".repeat(40), [
      { name: "config.json", content: Buffer.from('{"model_type":"gpt2"}') },
      { name: "model.safetensors", content: weights, lfs: true },
    ]);
    const total = weights.length + 21;
    // 64 kB a second: the 3 MB fetch takes most of a minute unless the test lets it go at full speed.
    hub.throttle(64 * 1024);
    await page.setViewportSize({ width: 1440, height: 900 });
    await signIn(ADMIN);
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Models" }).click();
    await page.getByRole("heading", { name: "Models", level: 1 }).waitFor();
    expect(await page.locator('[data-field="hub"]').textContent()).toBe(hub.url);
    expect(await page.locator('[data-field="used"]').textContent()).toBe("0 B of 10 GB");
    const empty = await page.locator('p[data-empty="models"]').textContent();
    expect(empty).toContain("No models in the cache. An endpoint names the models its workers load with models: [...]");
    expect(await page.locator("main a").count()).toBe(0);

    // Two endpoints on echo's code, each with a job waiting: one names the model, the other a revision the hub lacks.
    const template = (await call(`${service.url}/v1/templates`, { key: ADMIN, body: { name: "model reader", imageName: `svc://${echoId}` } })).body;
    const ids: string[] = [];
    for (const [name, model] of [
      ["with-model", "acme/tiny@main"],
      ["missing-model", "acme/tiny@nope"],
    ]) {
      const created = await call(`${service.url}/v1/endpoints`, {
        key: ADMIN,
        body: { name, templateId: template.id, computeType: "CPU", workersMax: 1, idleTimeout: 60, models: [model] },
      });
      expect(created.status).toBe(201);
      ids.push(created.body.id);
      expect((await call(`${service.url}/v2/${created.body.id}/run`, { key: ADMIN, body: { input: { model } } })).status).toBe(200);
    }
    try {
      // The page notices the fetch by itself (no reload), fetches first; the bar and its words say the same.
      const rows = page.getByRole("table", { name: "Models" }).locator("tbody tr");
      const fetching = page.locator('tr[data-model="acme/tiny@main"][data-state="fetching"]');
      const progress = async () =>
        fetching.evaluate((row) => {
          const bar = row.querySelector("progress")!;
          return { value: bar.value, max: bar.max, text: row.querySelector('[data-field="progress"]')!.textContent! };
        });
      await expect.poll(async () => (await fetching.count()) > 0 && (await progress()).value > 0, { timeout: 30_000 }).toBe(true);
      const first = await progress();
      expect(first.max).toBe(total);
      const shown = /^fetching: ([\d.]+) of 3 MB \((\d+)%\)$/.exec(first.text);
      expect(shown, first.text).not.toBeNull();
      expect(Number(shown![1])).toBeCloseTo(first.value / 1e6, 1);
      expect(Number(shown![2])).toBe(Math.round((first.value * 100) / total));
      expect(await fetching.getByRole("progressbar", { name: "acme/tiny@main fetched" }).count()).toBe(1);
      expect(await fetching.locator('[data-field="size"]').textContent()).toBe("3 MB");
      expect(await fetching.locator('[data-field="commit"]').textContent()).toBe("—");
      // Refreshed every 2 s while it moves.
      await expect.poll(async () => (await progress()).value, { timeout: 10_000 }).toBeGreaterThan(first.value);

      const failed = page.locator('tr[data-model="acme/tiny@nope"]');
      await failed.locator('[data-field="state"]').getByText("not_found").waitFor();
      expect(await rows.evaluateAll((trs) => trs.map((tr) => [tr.getAttribute("data-model"), tr.getAttribute("data-state")]))).toEqual([
        ["acme/tiny@main", "fetching"],
        ["acme/tiny@nope", "failed"],
      ]);
      const failure = page.locator('[data-failed="acme/tiny@nope"]');
      expect(await failure.textContent()).toBe(
        "acme/tiny@nope (not_found): the hub has no revision acme/tiny@nope (404)" +
          "Check the model's name and revision on the hub (or the mirror SVC_MODEL_HUB names).",
      );
      await shot("models-fetching");

      // On a phone: nothing wider than the screen, the bar and the failure's advice in view.
      await page.setViewportSize({ width: 390, height: 844 });
      await fetching.getByRole("progressbar").waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      expect(await failure.locator('[data-field="advice"]').isVisible()).toBe(true);
      const advice = (await failure.locator('[data-field="advice"]').boundingBox())!;
      expect(advice.x + advice.width).toBeLessThanOrEqual(390);
      await shot("narrow-models-fetching");
      await page.setViewportSize({ width: 1440, height: 900 });

      // Full speed: the model is ready, with its commit and size, and the endpoint's worker uses it.
      hub.throttle(undefined);
      const ready = page.locator('tr[data-model="acme/tiny@main"][data-state="ready"]');
      await ready.waitFor({ timeout: 30_000 });
      expect(await ready.locator('[data-field="state"]').textContent()).toBe("ready");
      expect(await ready.locator('[data-field="commit"]').textContent()).toBe("ccccccc");
      expect(await ready.locator('[data-field="size"]').textContent()).toBe("3 MB");
      expect(await page.locator('[data-field="used"]').textContent()).toBe("3 MB of 10 GB");
      await expect.poll(() => ready.locator('[data-field="workers"]').textContent(), { timeout: 30_000 }).toBe("1");
      expect(await ready.locator('[data-field="last-used"]').textContent()).toBe("just now");
      expect(await fetching.count()).toBe(0);
      expect(await page.locator('tr[data-model="acme/tiny@nope"]').getAttribute("data-state")).toBe("failed");
      await shot("models");
    } finally {
      hub.throttle(undefined);
      await page.setViewportSize({ width: 1366, height: 800 });
      for (const id of ids) await call(`${service.url}/v1/endpoints/${id}`, { key: ADMIN, method: "DELETE" });
    }
  }, 120_000);

  it("fits a 390 px phone on every page: no sideways overflow, the sections behind Menu, each table fits or says it scrolls", async () => {
    await signIn(ADMIN);
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      let scrolling = 0;
      let checked = 0;
      for (const [name, hash, heading] of [
        ["endpoints", "#/endpoints", "Endpoints"],
        ["endpoint", `#/endpoints/${echoId}`, "echo"],
        ["gpus", "#/gpus", "GPUs"],
        ["models", "#/models", "Models"],
        ["templates", "#/templates", "Templates"],
        ["apps", "#/apps", "Apps and environments"],
        ["volumes", "#/volumes", "Network volumes"],
        ["keys", "#/keys", "API keys"],
        ["secrets", "#/secrets", "Secrets"],
        ["usage", "#/usage", "Usage"],
      ] as const) {
        await page.goto(`${service.url}/console/${hash}`);
        await page.getByRole("heading", { name: heading, level: 1 }).waitFor();
        if (name === "endpoint") await page.getByRole("table", { name: "Recent jobs" }).waitFor();
        if (name === "endpoints") await page.getByRole("table", { name: "Endpoints" }).waitFor();
        if (name === "keys") await page.getByRole("table", { name: "API keys" }).waitFor();
        if (name === "usage") await page.locator("[data-loaded]").waitFor();
        if (name === "models") await page.getByRole("table", { name: "Models" }).waitFor();
        await shot(`narrow-${name}`);
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        expect(width, `${name} is ${width} px wide`).toBeLessThanOrEqual(390);
        // The header is one line: the sections are behind Menu, not a fifth of the screen.
        const header = (await page.locator("header.top").boundingBox())!;
        expect(header.height, `${name}'s header`).toBeLessThanOrEqual(60);
        expect(await page.getByRole("link", { name: "Network volumes" }).isVisible()).toBe(false);
        // Each table fits its box, or says that it scrolls: a hint above it, and a labelled region the keyboard scrolls.
        const tables = await page.locator("table.list").evaluateAll((list) =>
          list.map((table) => {
            const box = table.parentElement!;
            const hint = box.previousElementSibling;
            return {
              label: table.getAttribute("aria-label"),
              fits: box.scrollWidth <= box.clientWidth + 1,
              marked: box.getAttribute("data-scrolls") === "true" && box.getAttribute("role") === "region" && box.tabIndex === 0,
              hint: hint?.classList.contains("scroll-hint") === true && (hint as HTMLElement).offsetHeight > 0 ? hint.textContent : null,
            };
          }),
        );
        checked += tables.length;
        for (const t of tables) {
          if (t.fits) expect([t.label, t.marked, t.hint], `${name}: ${t.label} fits`).toEqual([t.label, false, null]);
          else expect([t.label, t.marked, t.hint], `${name}: ${t.label} scrolls`).toEqual([t.label, true, "Scroll sideways for more columns →"]);
          if (!t.fits) scrolling++;
        }
      }
      // Some table here is wider than a phone (the endpoints' and the keys' are): the sign was checked, not only skipped.
      expect(scrolling).toBeGreaterThan(0);
      expect(checked).toBeGreaterThan(scrolling);

      // Menu opens the sections; a section chosen closes it.
      const menu = page.getByRole("button", { name: /^Menu/ });
      expect(await menu.getAttribute("aria-expanded")).toBe("false");
      await menu.click();
      expect(await menu.getAttribute("aria-expanded")).toBe("true");
      await shot("narrow-menu");
      await page.getByRole("link", { name: "Network volumes" }).click();
      await page.getByRole("heading", { name: "Network volumes", level: 1 }).waitFor();
      expect(await menu.getAttribute("aria-expanded")).toBe("false");
      expect(await page.getByRole("link", { name: "Network volumes" }).isVisible()).toBe(false);
      expect(await menu.textContent()).toContain("Network volumes");
    } finally {
      await page.setViewportSize({ width: 1366, height: 800 });
    }
  }, 120_000);

  it("shows in red why an endpoint's new workers fail to start, while the previous build keeps serving", async () => {
    const app = join(consoleService.dir, "crashy");
    cpSync(join(repo, "fixtures", "console-app"), app, { recursive: true });
    await deployOverHttp(service.url, ADMIN, app, "crashy");
    const env = (await call(`${service.url}/v1/apps/console-app/environments/crashy`, { key: ADMIN })).body;
    const greeterId = env.endpoints.find((e: { name: string }) => e.name === "greeter").id;
    const file = join(app, "src", "greeter.ts");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace("interface Person", 'if (!process.env.GREETER_TOKEN) throw new Error("GREETER_TOKEN is not set");\ninterface Person'),
    );
    const build = await buildProject(app);
    const bytes = readFileSync(build.artifactPath);
    const sha = createHash("sha256").update(bytes).digest("hex");
    await fetch(`${service.url}/v1/apps/console-app/builds`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "x-svc-sha256": sha },
      body: bytes,
    });
    const activated = await call(`${service.url}/v1/apps/console-app/environments/crashy/activate`, { key: ADMIN, body: { build: sha, confirmRemove: [] } });
    expect(activated.status).toBe(422);
    expect(activated.body.release).toMatchObject({ state: "failed", error: { endpoint: "greeter" } });
    await page.goto(`${service.url}/console/#/endpoints/${greeterId}`);
    const alert = page.locator(".start-error");
    await alert.getByText(/worker\(s\) failed to start in the last 5 minutes/).waitFor();
    expect(await alert.locator("pre").textContent()).toMatch(/GREETER_TOKEN is not set\n\s+at .*src\/greeter\.ts:3:\d+/);
    expect(await alert.evaluate((el) => getComputedStyle(el).color)).toBe("rgb(180, 35, 24)");
    await shot("endpoint-start-error");
  }, 120_000);
});
