// The console's files served by a real service (no key needed, strict headers, no path escapes), and the
// jobs list route it reads (`GET /v2/{endpoint_id}/jobs`): newest first, live states, limits, access.

import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { call, manifest, resource, startTestService, type TestService } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
let t: TestService;
let endpointId: string;

beforeAll(async () => {
  execFileSync(process.execPath, ["scripts/build-console.mjs"], { cwd: repo, stdio: "pipe" });
  t = await startTestService();
  const deployed = await t.service.deploy({ app: "demo", env: "test", manifest: manifest({ echo: resource() }), artifactPath: t.artifact });
  endpointId = deployed[0]!.id;
}, 60_000);
afterAll(async () => {
  await t?.close();
});

it("serves the console page and its hashed assets without a key, with a strict content policy", async () => {
  const page = await fetch(`${t.service.url}/console/`);
  expect(page.status).toBe(200);
  expect(page.headers.get("content-type")).toContain("text/html");
  expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
  const html = await page.text();
  const script = /src="\.\/(main-[A-Z0-9]+\.js)"/.exec(html)?.[1];
  const style = /href="\.\/(main-[A-Z0-9]+\.css)"/.exec(html)?.[1];
  expect(script).toBeDefined();
  expect(style).toBeDefined();
  const js = await fetch(`${t.service.url}/console/${script}`);
  expect(js.status).toBe(200);
  expect(js.headers.get("content-type")).toContain("text/javascript");
  expect(js.headers.get("cache-control")).toContain("immutable");
  expect((await js.text()).length).toBeGreaterThan(1000);
  expect((await fetch(`${t.service.url}/console/${style}`)).headers.get("content-type")).toContain("text/css");
  // Nothing from elsewhere: no absolute URLs to other hosts in the page.
  expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
});

it("redirects a browser from / and /console to /console/, but not an API client", async () => {
  const fromRoot = await fetch(`${t.service.url}/`, { headers: { accept: "text/html" }, redirect: "manual" });
  expect(fromRoot.status).toBe(302);
  expect(fromRoot.headers.get("location")).toBe("/console/");
  expect((await fetch(`${t.service.url}/console`, { redirect: "manual" })).headers.get("location")).toBe("/console/");
  expect((await fetch(`${t.service.url}/`)).status).toBe(401);
});

it("answers 404 for files it does not have and never leaves its folder", async () => {
  const missing = await fetch(`${t.service.url}/console/nothing-here.js`);
  expect(missing.status).toBe(404);
  expect(missing.headers.get("content-type")).toBe("application/problem+json");
  const escape = await fetch(`${t.service.url}/console/..%2f..%2fpackage.json`);
  expect(escape.status).not.toBe(200);
});

it("lists an endpoint's jobs newest first with their live state, input, delay and execution time", async () => {
  const ids: string[] = [];
  for (const n of [1, 2, 3]) {
    const r = await call(`${t.service.url}/v2/${endpointId}/run`, { key: t.key, body: { input: { n } } });
    ids.push(r.body.id);
  }
  await call(`${t.service.url}/v2/${endpointId}/cancel/${ids[1]}`, { key: t.key, method: "POST" });
  const list = await call(`${t.service.url}/v2/${endpointId}/jobs`, { key: t.key });
  expect(list.status).toBe(200);
  expect(list.body.jobs.map((j: { id: string }) => j.id)).toEqual([...ids].reverse());
  expect(list.body.jobs[1]).toMatchObject({ id: ids[1], status: "CANCELLED", input: { n: 2 }, executionTime: 0 });
  expect(list.body.jobs[0]).toMatchObject({ status: "IN_QUEUE", input: { n: 3 } });
  expect(typeof list.body.jobs[0].delayTime).toBe("number");
  expect(typeof list.body.jobs[0].createdAt).toBe("number");

  const limited = await call(`${t.service.url}/v2/${endpointId}/jobs?limit=1`, { key: t.key });
  expect(limited.body.jobs.map((j: { id: string }) => j.id)).toEqual([ids[2]]);
  const bad = await call(`${t.service.url}/v2/${endpointId}/jobs?limit=0`, { key: t.key });
  expect(bad.status).toBe(422);
  expect(bad.body.errors).toEqual(["$.query.limit: must be an integer from 1 to 500"]);

  // Purged jobs leave the list.
  await call(`${t.service.url}/v2/${endpointId}/purge-queue`, { key: t.key, method: "POST" });
  const after = await call(`${t.service.url}/v2/${endpointId}/jobs`, { key: t.key });
  expect(after.body.jobs.map((j: { id: string }) => j.id)).toEqual([ids[1]]);
});

it("keeps other users and narrower keys out of the list", async () => {
  const other = await t.service.mintKey({ scopes: ["admin"], userId: "someone-else" });
  const foreign = await call(`${t.service.url}/v2/${endpointId}/jobs`, { key: other.key });
  expect(foreign.status).toBe(404);
  const scoped = await t.service.mintKey({ scopes: ["jobs:0000000000000000"] });
  expect((await call(`${t.service.url}/v2/${endpointId}/jobs`, { key: scoped.key })).status).toBe(403);
  expect((await call(`${t.service.url}/v2/${endpointId}/jobs`)).status).toBe(401);
  expect((await call(`${t.service.url}/v2/${endpointId}/jobs`, { key: t.key, method: "POST", body: {} })).status).toBe(405);
});

it("lists a /runsync job while its caller waits, before the job is in the store, and the caller's answer names the same job", async () => {
  // No worker here: the job waits in the queue for the whole of its caller's wait.
  const waiting = call(`${t.service.url}/v2/${endpointId}/runsync?wait=2000`, { key: t.key, body: { input: { waiting: true } } });
  let listed: { id: string; status: string; input: unknown } | undefined;
  for (const until = Date.now() + 1500; !listed && Date.now() < until; await new Promise((r) => setTimeout(r, 20))) {
    const list = await call(`${t.service.url}/v2/${endpointId}/jobs`, { key: t.key });
    listed = list.body.jobs.find((j: { input: unknown }) => JSON.stringify(j.input) === JSON.stringify({ waiting: true }));
  }
  expect(listed).toMatchObject({ status: "IN_QUEUE" });
  const answer = await waiting;
  expect(answer.body).toMatchObject({ id: listed!.id, status: "IN_QUEUE" });
  // Answered: the job is in the store, and /status finds it.
  expect((await call(`${t.service.url}/v2/${endpointId}/status/${listed!.id}`, { key: t.key })).body).toMatchObject({ status: "IN_QUEUE" });
  await call(`${t.service.url}/v2/${endpointId}/cancel/${listed!.id}`, { key: t.key, method: "POST" });
});
