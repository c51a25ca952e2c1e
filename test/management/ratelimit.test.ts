// Per-user rate limits against a real service with tiny windows: RateLimit / RateLimit-Policy parsed as
// structured-field lists on every authenticated answer, a user driven over a quota (429 naming the window,
// integer Retry-After) and back under it after the reset, while another user is unaffected.

import { afterAll, beforeAll, expect, it } from "vitest";
import { call, manifest, resource, startTestService, type HttpResult, type TestService } from "../service/helpers.js";
import { byName, parseList } from "./structured-fields.js";

let t: TestService;
let url: string;
const key: Record<string, string> = {};

beforeAll(async () => {
  t = await startTestService({
    rateLimits: [
      { name: "minute", seconds: 2, quota: 5 },
      { name: "hour", seconds: 3600, quota: 8 },
      { name: "day", seconds: 86_400, quota: 1000 },
    ],
  });
  url = t.service.url;
  // The operator's own quota is spent here too: three keys, then it is done.
  for (const user of ["alice", "bob", "carol"]) {
    key[user] = (await call(`${url}/v1/keys`, { key: t.key, body: { userId: user, scopes: ["admin"] } })).body.key;
  }
});
afterAll(async () => {
  await t?.close();
});

const limits = (r: HttpResult) => byName(r.headers.get("ratelimit") ?? "");

it("describes the policy and the remaining quota as structured-field lists on every authenticated answer", async () => {
  const [endpoint] = await t.service.deploy({ app: "a", env: "e", manifest: manifest({ api: resource() }, "a"), artifactPath: t.artifact, ownerKey: key.bob });
  const answers = [
    await call(`${url}/v2/network-volumes`, { key: key.bob }),
    await call(`${url}/v2/network-volumes/nope`, { key: key.bob }),
    await call(`${url}/v2/${endpoint!.id}/run`, { key: key.bob, body: { input: 1 } }),
  ];
  expect(answers.map((a) => a.status)).toEqual([200, 404, 200]);
  for (const [n, a] of answers.entries()) {
    const policy = parseList(a.headers.get("ratelimit-policy")!);
    expect(policy).toEqual([
      { value: "minute", params: { q: 5, w: 2 } },
      { value: "hour", params: { q: 8, w: 3600 } },
      { value: "day", params: { q: 1000, w: 86_400 } },
    ]);
    const state = parseList(a.headers.get("ratelimit")!);
    expect(state.map((m) => m.value)).toEqual(["minute", "hour", "day"]);
    expect(state.map((m) => m.params.r)).toEqual([4 - n, 7 - n, 999 - n]);
    for (const m of state) {
      expect(Number.isInteger(m.params.t)).toBe(true);
      expect(m.params.t).toBeGreaterThanOrEqual(0);
    }
    expect(state[0]!.params.t).toBeLessThanOrEqual(2);
    expect(state[1]!.params.t).toBeGreaterThan(3000);
  }
  // Unauthenticated answers are not counted against anyone and carry no quota.
  const anonymous = await call(`${url}/v2/network-volumes`, { key: null });
  expect(anonymous.status).toBe(401);
  expect(anonymous.headers.get("ratelimit")).toBeNull();
});

it("drives a user over the minute quota and back under after the reset; another user is unaffected", async () => {
  for (let n = 0; n < 5; n++) {
    const r = await call(`${url}/v1/endpoints`, { key: key.alice });
    expect(r.status).toBe(200);
    expect(limits(r).minute!.r).toBe(4 - n);
  }
  const refused = await call(`${url}/v1/endpoints`, { key: key.alice });
  expect(refused.status).toBe(429);
  expect(refused.headers.get("content-type")).toBe("application/problem+json");
  expect(refused.body).toMatchObject({ title: "Too Many Requests", status: 429 });
  expect(refused.body.detail).toMatch(/\bminute\b/);
  const retryAfter = refused.headers.get("retry-after")!;
  expect(retryAfter).toMatch(/^\d+$/);
  expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
  expect(Number(retryAfter)).toBeLessThanOrEqual(2);
  expect(limits(refused).minute!.r).toBe(0);
  // Every route family is closed to alice now, the job API included...
  expect((await call(`${url}/v2/network-volumes`, { key: key.alice })).status).toBe(429);
  // ...while carol, another user, is not throttled at all.
  const other = await call(`${url}/v1/endpoints`, { key: key.carol });
  expect(other.status).toBe(200);
  expect(limits(other).minute!.r).toBe(4);

  await new Promise((r) => setTimeout(r, Number(retryAfter) * 1000 + 50));
  const again = await call(`${url}/v1/endpoints`, { key: key.alice });
  expect(again.status).toBe(200);
  expect(limits(again).minute!.r).toBe(4);
  // Refused requests did not count: 5 before, 1 now.
  expect(limits(again).hour!.r).toBe(2);
}, 20_000);

it("names the hour window when that one runs out, with a long Retry-After", async () => {
  // alice has 2 left in this hour
  await new Promise((r) => setTimeout(r, 2100));
  expect((await call(`${url}/v1/templates`, { key: key.alice })).status).toBe(200);
  expect((await call(`${url}/v1/templates`, { key: key.alice })).status).toBe(200);
  const refused = await call(`${url}/v1/templates`, { key: key.alice });
  expect(refused.status).toBe(429);
  expect(refused.body.detail).toMatch(/\bhour\b/);
  expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(3000);
  expect(limits(refused).hour!.r).toBe(0);
  expect(limits(refused).minute!.r).toBeGreaterThan(0);
}, 20_000);
