// A tenant's HTML object in a real browser (Debian's Chromium through playwright-core) against a real service:
// presigned links to it, plain and with response-content-type=text/html, on the S3 API's own origin and under
// /s3 of the console's origin, opened from a console page. The object's script would leave a cookie and a
// localStorage entry on the origin it ran on, retitle its page and post a message to the console page that
// opened it: none of that may happen on the console's origin. Without Chromium the test is skipped with a notice
// (a failure in CI), as the console's browser tests are.

import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { chromiumPresent, openBrowser } from "../console/chromium.js";
import { call, startTestService, type TestService } from "../service/helpers.js";
import { s3Request, s3Signer } from "./s3-signing.js";

const haveChromium = chromiumPresent();
const PAGE = `<!doctype html><html><head><title>inert</title></head><body><script>
document.cookie = "stolen=1; path=/";
try { localStorage.setItem("stolen", "1"); } catch (e) {}
document.title = "ran";
if (window.opener) window.opener.postMessage("ran", "*");
</script></body></html>`;

let t: TestService;
let browser: Browser;
let page: Page;
let volume: string;
let key: { accessKeyId: string; secretAccessKey: string; region: string; endpoint: string };

async function presigned(origin: string, path: string, query: Record<string, string> = {}): Promise<string> {
  const request = { ...s3Request(origin, "GET", path, { "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD" }), query };
  const p = await s3Signer(key).presign(request, { expiresIn: 300 });
  const q = Object.entries(p.query!)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join("&");
  return `${origin}${p.path}?${q}`;
}

/** What the object's script would have left on the console's origin, read from a console page. */
async function consoleOriginTraces(): Promise<{ cookie: string; stored: string | null }> {
  await page.goto(`${t.service.url}/console/`);
  return page.evaluate(() => ({ cookie: document.cookie, stored: localStorage.getItem("stolen") }));
}

describe.skipIf(!haveChromium)("a tenant's HTML object in Chromium", () => {
  beforeAll(async () => {
    t = await startTestService();
    volume = (await call(`${t.service.url}/v2/network-volumes`, { key: t.key, body: { name: "pages", size: 10, dataCenter: "local" } })).body.id;
    key = (await call(`${t.service.url}/v1/volume-keys`, { key: t.key, body: {} })).body;
    const s3 = new S3Client({ endpoint: key.endpoint, region: key.region, forcePathStyle: true, credentials: key, maxAttempts: 1 });
    await s3.send(new PutObjectCommand({ Bucket: volume, Key: "page.html", Body: PAGE, ContentType: "text/html" }));
    ({ browser, page } = await openBrowser());
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it("runs no script of it on the console's origin, whichever link and origin", async () => {
    const links = {
      "S3 origin": await presigned(t.service.s3!.url, `/${volume}/page.html`),
      "S3 origin, response-content-type=text/html": await presigned(t.service.s3!.url, `/${volume}/page.html`, { "response-content-type": "text/html" }),
      "/s3 on the console's origin": await presigned(t.service.url, `/s3/${volume}/page.html`),
      "/s3 on the console's origin, response-content-type=text/html": await presigned(t.service.url, `/s3/${volume}/page.html`, {
        "response-content-type": "text/html",
      }),
    };
    const seen: Record<string, unknown> = {};
    for (const [name, link] of Object.entries(links)) {
      // Opened from a console page, as a link in it would be: the console page listens for the object's message.
      await page.goto(`${t.service.url}/console/`);
      await page.evaluate(() => {
        (window as unknown as { got: unknown[] }).got = [];
        addEventListener("message", (e) => (window as unknown as { got: unknown[] }).got.push(e.data));
      });
      const popupOpened = page
        .context()
        .waitForEvent("page", { timeout: 5_000 })
        .catch(() => undefined);
      await page.evaluate((url) => void window.open(url), link);
      const popup = await popupOpened;
      await page.waitForTimeout(1_000);
      const titles = popup && !popup.isClosed() ? await popup.title().catch(() => "") : "";
      const messages = await page.evaluate(() => (window as unknown as { got: unknown[] }).got);
      await popup?.close().catch(() => undefined);
      // And navigated to directly in the console's tab.
      const direct = await page.goto(link).then(
        async (r) => ({ status: r?.status(), title: await page.title() }),
        (err: Error) => ({ download: /Download is starting|ERR_ABORTED/.test(err.message) }),
      );
      seen[name] = { messages, popupTitle: titles, direct, traces: await consoleOriginTraces() };
    }
    for (const [name, what] of Object.entries(seen)) {
      const w = what as { messages: unknown[]; popupTitle: string; direct: { title?: string }; traces: { cookie: string; stored: string | null } };
      expect({ name, messages: w.messages }).toEqual({ name, messages: [] });
      expect({ name, popupTitle: w.popupTitle }).not.toEqual({ name, popupTitle: "ran" });
      expect({ name, title: w.direct.title }).not.toEqual({ name, title: "ran" });
      expect({ name, cookie: w.traces.cookie }).toEqual({ name, cookie: "" });
      expect({ name, stored: w.traces.stored }).toEqual({ name, stored: null });
    }
    // On the console's origin the text/html override is refused outright (an S3 error document, no page).
    const refused = seen["/s3 on the console's origin, response-content-type=text/html"] as { direct: { status?: number } };
    expect(refused.direct.status).toBe(400);
  }, 90_000);
});
