// Queue quotas on a real service: a hostile user (mallory) floods the queue of their own endpoints, by count and by
// bytes, through /run, /runsync and the OpenAI route, and is refused with 429 problem+json naming the limit and a
// Retry-After, while another user's (alice's) jobs are still accepted; purging gives the quota back; a large queued
// input reaches its worker whole; the refusals are counted in /metrics.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, manifest, ProtocolWorker, resource, startTestService, type HttpResult, type TestService } from "./helpers.js";

const MB = 1024 * 1024;
let t: TestService;
const keys = { mallory: "", alice: "" };
const ep = { m1: "", m2: "", alice: "" };

beforeAll(async () => {
  t = await startTestService({ queueQuotas: { user: { jobs: 6, bytes: 12 * MB }, endpoint: { jobs: 4, bytes: 8 * MB } } });
  keys.mallory = (await t.service.mintKey({ scopes: ["admin"], userId: "mallory" })).key;
  keys.alice = (await t.service.mintKey({ scopes: ["admin"], userId: "alice" })).key;
  const functions = [{ name: "echo", module: "src/index.ts", export: "echo", kind: "function" as const }];
  // No workers: every job stays queued (a busy or absent worker).
  const res = () => resource({ workersMax: 0, functions });
  [{ id: ep.m1 = "" } = { id: "" }, { id: ep.m2 = "" } = { id: "" }] = await t.service.deploy({
    app: "flood",
    env: "prod",
    manifest: manifest({ m1: res(), m2: res() }, "flood"),
    artifactPath: t.artifact,
    ownerKey: keys.mallory,
  });
  [{ id: ep.alice = "" } = { id: "" }] = await t.service.deploy({
    app: "shop",
    env: "prod",
    manifest: manifest({ a: res() }, "shop"),
    artifactPath: t.artifact,
    ownerKey: keys.alice,
  });
});
afterAll(async () => {
  await t?.close();
});

const run = (endpoint: string, key: string, input: unknown) => call(`${t.service.url}/v2/${endpoint}/run`, { key, body: { input } });
const purge = (endpoint: string, key: string) => call(`${t.service.url}/v2/${endpoint}/purge-queue`, { key, method: "POST" });

function expectQuotaProblem(r: HttpResult, limit: string): void {
  expect(r.status).toBe(429);
  expect(r.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  expect(r.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
  expect(r.body).toMatchObject({ title: "Too Many Requests", status: 429 });
  expect(r.body.detail).toContain(limit);
}

describe("queue quotas", () => {
  it("refuses a flood of queued jobs once over the limit, while another user's jobs are accepted", async () => {
    for (let i = 0; i < 4; i++) expect((await run(ep.m1, keys.mallory, { i })).status).toBe(200);
    expectQuotaProblem(await run(ep.m1, keys.mallory, { i: 4 }), "endpoint_jobs");
    for (let i = 0; i < 2; i++) expect((await run(ep.m2, keys.mallory, { i })).status).toBe(200);
    expectQuotaProblem(await run(ep.m2, keys.mallory, { i: 2 }), "user_jobs");
    // Every way in is refused: /runsync, and the OpenAI route (its own problem shape, the same status and header).
    expectQuotaProblem(await call(`${t.service.url}/v2/${ep.m2}/runsync?wait=1000`, { key: keys.mallory, body: { input: {} } }), "user_jobs");
    const chat = await call(`${t.service.url}/v2/${ep.m2}/openai/v1/chat/completions`, {
      key: keys.mallory,
      body: { model: "echo", messages: [{ role: "user", content: "hi" }] },
    });
    expect(chat.status).toBe(429);
    expect(chat.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(chat.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
    expect(chat.body.detail).toContain("user_jobs");
    // Alice is not held back by Mallory's queue.
    for (let i = 0; i < 4; i++) expect((await run(ep.alice, keys.alice, { i })).status).toBe(200);
    const health = await call(`${t.service.url}/v2/${ep.m1}/health`, { key: keys.mallory });
    expect(health.body.jobs.inQueue).toBe(4);
    // Purged, the quota is free again.
    expect((await purge(ep.m1, keys.mallory)).body.removed).toBe(4);
    expect((await run(ep.m2, keys.mallory, { again: true })).status).toBe(200);
    await purge(ep.m2, keys.mallory);
    await purge(ep.alice, keys.alice);
  });

  it("refuses queued input bytes over the limit, and a worker still gets a large queued input whole", async () => {
    const three = { blob: "m".repeat(3 * MB - 20) };
    expect((await run(ep.m1, keys.mallory, three)).status).toBe(200);
    expect((await run(ep.m1, keys.mallory, three)).status).toBe(200);
    expectQuotaProblem(await run(ep.m1, keys.mallory, three), "endpoint_bytes");
    expect((await run(ep.m2, keys.mallory, three)).status).toBe(200);
    expect((await run(ep.m2, keys.mallory, three)).status).toBe(200);
    expectQuotaProblem(await run(ep.m2, keys.mallory, three), "user_bytes");
    // A small job still fits Mallory's byte quota (the job quota is not met either).
    expect((await run(ep.m2, keys.mallory, { small: true })).status).toBe(200);
    const aliceJob = await run(ep.alice, keys.alice, { blob: "a".repeat(3 * MB) });
    expect(aliceJob.status).toBe(200);
    const worker = await ProtocolWorker.mint(t, ep.alice);
    await worker.register();
    const [taken] = await worker.take(1, 2000);
    expect(taken?.id).toBe(aliceJob.body.id);
    expect(taken?.input).toEqual({ blob: "a".repeat(3 * MB) });
    await purge(ep.m1, keys.mallory);
    await purge(ep.m2, keys.mallory);
  });

  it("counts the refusals by endpoint and limit in /metrics", async () => {
    const text = (await call(`${t.service.url}/metrics`, { key: t.key })).text;
    expect(text).toMatch(new RegExp(`svc_queue_quota_refusals_total\\{endpoint="${ep.m1}",limit="endpoint_jobs"\\} 1`));
    expect(text).toMatch(new RegExp(`svc_queue_quota_refusals_total\\{endpoint="${ep.m2}",limit="user_jobs"\\} 3`));
    expect(text).toMatch(new RegExp(`svc_queue_quota_refusals_total\\{endpoint="${ep.m1}",limit="endpoint_bytes"\\} 1`));
    expect(text).toMatch(new RegExp(`svc_queue_quota_refusals_total\\{endpoint="${ep.m2}",limit="user_bytes"\\} 1`));
  });
});
