// Users, scoped keys, 401 vs 403 on every route family, and cross-user isolation, over HTTP against a real
// service. Keys are made through the REST route the CLI uses (POST /v1/keys).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, manifest, resource, startTestService, type TestService } from "../service/helpers.js";

let t: TestService;
let url: string;
const keys: Record<string, { id: string; key: string }> = {};
let aliceVolume: string;
let aliceTemplate: string;
let aliceEndpoint: string;
let aliceOtherEndpoint: string;
let aliceJob: string;
let aliceAppEndpoint: string;

async function mint(by: string, body: Record<string, unknown>) {
  const r = await call(`${url}/v1/keys`, { key: by, body });
  if (r.status !== 201) throw new Error(`key creation: ${r.status} ${r.text}`);
  return r.body as { id: string; key: string; userId: string; scopes: string[] };
}

beforeAll(async () => {
  t = await startTestService();
  url = t.service.url;
  keys.alice = await mint(t.key, { userId: "alice", scopes: ["admin"], name: "alice admin" });
  keys.bob = await mint(t.key, { userId: "bob", scopes: ["admin"] });
  keys.read = await mint(keys.alice.key, { scopes: ["management:read"], name: "reader" });
  keys.write = await mint(keys.alice.key, { scopes: ["management:write"] });
  keys.deploy = await mint(keys.alice.key, { scopes: ["deploy"] });
  keys.jobs = await mint(keys.alice.key, { scopes: ["jobs:*"] });
  aliceVolume = (await call(`${url}/v2/network-volumes`, { key: keys.write.key, body: { name: "a", size: 10, dataCenter: "local" } })).body.id;
  aliceTemplate = (await call(`${url}/v1/templates`, { key: keys.deploy.key, body: { name: "t", imageName: "python:3.12" } })).body.id;
  aliceEndpoint = (await call(`${url}/v1/endpoints`, { key: keys.deploy.key, body: { name: "e", templateId: aliceTemplate } })).body.id;
  aliceOtherEndpoint = (await call(`${url}/v1/endpoints`, { key: keys.deploy.key, body: { name: "e2", templateId: aliceTemplate } })).body.id;
  keys.oneEndpoint = await mint(keys.alice.key, { scopes: [`jobs:${aliceEndpoint}`] });
  aliceJob = (await call(`${url}/v2/${aliceEndpoint}/run`, { key: keys.jobs.key, body: { input: { n: 1 } } })).body.id;
  [{ id: aliceAppEndpoint } = { id: "" }] = await t.service.deploy({
    app: "shop",
    env: "prod",
    manifest: manifest({ api: resource() }, "shop"),
    artifactPath: t.artifact,
    ownerKey: keys.alice.key,
  });
});
afterAll(async () => {
  await t?.close();
});

/** One request per route family: [family, method, path, body?]. */
const families = (): Array<[string, string, string, unknown?]> => [
  ["volumes list", "GET", "/v2/network-volumes"],
  ["volume create", "POST", "/v2/network-volumes", { name: "x", size: 10, dataCenter: "local" }],
  ["volume read", "GET", `/v2/network-volumes/${aliceVolume}`],
  ["data centers", "GET", "/v2/data-centers"],
  ["endpoints list", "GET", "/v1/endpoints"],
  ["endpoint create", "POST", "/v1/endpoints", { name: "n", templateId: aliceTemplate }],
  ["endpoint update", "PATCH", `/v1/endpoints/${aliceEndpoint}`, { idleTimeout: 9 }],
  ["templates list", "GET", "/v1/templates"],
  ["template create", "POST", "/v1/templates", { name: "n", imageName: "i" }],
  ["keys list", "GET", "/v1/keys"],
  ["key create", "POST", "/v1/keys", { scopes: ["jobs:*"] }],
  ["job API run", "POST", `/v2/${aliceEndpoint}/run`, { input: 1 }],
  ["job API status", "GET", `/v2/${aliceEndpoint}/status/${aliceJob}`],
  ["job API health", "GET", `/v2/${aliceEndpoint}/health`],
  ["logs", "GET", `/v1/endpoints/${aliceEndpoint}/logs`],
  ["app state", "GET", "/v1/apps/shop/environments/prod"],
  ["worker protocol", "POST", "/_worker/v1/take", {}],
];

describe("401: missing, malformed, invalid, revoked or expired token", () => {
  it("answers 401 problem on every route family", async () => {
    const revoked = await mint(keys.alice.key, { scopes: ["admin"] });
    expect((await call(`${url}/v1/keys/${revoked.id}`, { key: keys.alice.key, method: "DELETE" })).body.revokedAt).toEqual(expect.any(Number));
    const expiring = await mint(keys.alice.key, { scopes: ["admin"], expiresInSeconds: 1 });
    expect((await call(`${url}/v1/endpoints`, { key: expiring.key })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1100));
    const tokens: Array<[string, { key?: string | null; authorization?: string }]> = [
      ["missing", { key: null }],
      ["malformed: Bearer without key", { authorization: "Bearer" }],
      ["malformed: two words", { authorization: "Basic abc def" }],
      ["invalid", { key: "svc_not-a-real-key" }],
      ["revoked", { key: revoked.key }],
      ["expired", { key: expiring.key }],
    ];
    for (const [family, method, path, body] of families()) {
      for (const [what, auth] of tokens) {
        const r = await call(`${url}${path}`, { ...auth, method, body });
        expect([family, what, r.status]).toEqual([family, what, 401]);
        expect(r.headers.get("content-type")).toBe("application/problem+json");
        expect(r.body).toMatchObject({ title: "Unauthorized", status: 401 });
      }
    }
  });
});

describe('the bare key (without "Bearer")', () => {
  const bareOk = new Set(["job API run", "job API status", "job API health"]);
  it("is 401 on management, state, logs and worker routes, saying to send the bearer form", async () => {
    for (const [family, method, path, body] of families()) {
      if (bareOk.has(family)) continue;
      const r = await call(`${url}${path}`, { authorization: keys.alice.key, method, body });
      expect([family, r.status]).toEqual([family, 401]);
      expect(r.headers.get("content-type")).toBe("application/problem+json");
      expect(r.headers.get("www-authenticate")).toBe("Bearer");
      expect(r.body.detail).toContain("send `Authorization: Bearer <key>`");
      // the same key in the bearer form passes authentication
      expect([family, (await call(`${url}${path}`, { key: keys.alice.key, method, body })).status]).not.toEqual([family, 401]);
    }
    const worker = await t.service.mintKey({ scopes: [`worker:${aliceAppEndpoint}`] });
    expect((await call(`${url}/_worker/v1/heartbeat`, { authorization: worker.key, body: { leases: [] } })).status).toBe(401);
    expect((await call(`${url}/_worker/v1/heartbeat`, { key: worker.key, body: { leases: [] } })).status).toBe(200);
  });

  it("is accepted by the job API, the OpenAI route and load-balanced endpoints", async () => {
    for (const [family, method, path, body] of families()) {
      if (!bareOk.has(family)) continue;
      const r = await call(`${url}${path}`, { authorization: keys.alice.key, method, body });
      expect([family, r.status]).toEqual([family, 200]);
    }
    const models = await call(`${url}/v2/${aliceAppEndpoint}/openai/v1/models`, { authorization: keys.alice.key });
    expect(models.status).toBe(200);
    const [lb] = await t.service.deploy({
      app: "web",
      env: "prod",
      manifest: manifest({ site: resource({ is_load_balanced: true, workersMax: 0 }) }, "web"),
      artifactPath: t.artifact,
      ownerKey: keys.alice.key,
    });
    // Past authentication: the endpoint has no workers (503), not an unauthorized caller (401).
    const proxied = await call(`${url}/lb/${lb!.id}/items`, { authorization: keys.alice.key });
    expect(proxied.status).toBe(503);
  });
});

describe("403: a valid token without access", () => {
  it("gives each scope exactly its routes", async () => {
    // [family, allowed for: read, write, jobs, oneEndpoint, deploy]. What decides the code workers run (a template,
    // an endpoint from one) needs the deploy scope: management:write alone cannot make a worker run code.
    const allowed: Record<string, [boolean, boolean, boolean, boolean, boolean]> = {
      "volumes list": [true, true, false, false, true],
      "volume create": [false, true, false, false, true],
      "volume read": [true, true, false, false, true],
      "data centers": [true, true, false, false, true],
      "endpoints list": [true, true, false, false, true],
      "endpoint create": [false, false, false, false, true],
      "endpoint update": [false, true, false, false, true],
      "templates list": [true, true, false, false, true],
      "template create": [false, false, false, false, true],
      "keys list": [false, false, false, false, false],
      "key create": [false, false, false, false, false],
      "job API run": [false, false, true, true, false],
      "job API status": [false, false, true, true, false],
      "job API health": [false, false, true, true, false],
      logs: [false, false, true, true, false],
      "app state": [false, false, true, false, false],
      "worker protocol": [false, false, false, false, false],
    };
    const scoped = [keys.read!, keys.write!, keys.jobs!, keys.oneEndpoint!, keys.deploy!];
    for (const [family, method, path, body] of families()) {
      for (let i = 0; i < scoped.length; i++) {
        const r = await call(`${url}${path}`, { key: scoped[i]!.key, method, body });
        const expected = allowed[family]![i] ? "ok" : 403;
        const got = r.status < 300 ? "ok" : r.status;
        expect([family, i, got]).toEqual([family, i, expected]);
        if (got === 403) expect(r.body).toMatchObject({ title: "Forbidden", status: 403 });
      }
      // the admin key of the owner may do it all (but it is no worker)
      const admin = await call(`${url}${path}`, { key: keys.alice.key, method, body });
      expect([family, admin.status < 300 ? "ok" : admin.status]).toEqual([family, family === "worker protocol" ? 403 : "ok"]);
    }
  });

  it("keeps a one-endpoint job key to that endpoint", async () => {
    expect((await call(`${url}/v2/${aliceEndpoint}/health`, { key: keys.oneEndpoint.key })).status).toBe(200);
    const other = await call(`${url}/v2/${aliceOtherEndpoint}/health`, { key: keys.oneEndpoint.key });
    expect(other.status).toBe(403);
    expect(other.body.detail).toContain(aliceOtherEndpoint);
  });

  it("lets only the operator create keys for other users", async () => {
    const r = await call(`${url}/v1/keys`, { key: keys.alice.key, body: { userId: "bob", scopes: ["admin"] } });
    expect(r.status).toBe(403);
    const bad = await call(`${url}/v1/keys`, { key: keys.alice.key, body: { scopes: ["root", "jobs:*"], extra: true } });
    expect(bad.status).toBe(422);
    expect(bad.body.errors).toEqual([
      "$.scopes[0]: must match ^(admin|deploy|metrics|management:read|management:write|jobs:\\*|jobs:[a-z0-9]+)$",
      "$.extra: unknown property",
    ]);
  });
});

describe("keys", () => {
  it("lists a user's keys without secrets, and a revoked key stops working at once", async () => {
    const listed = (await call(`${url}/v1/keys`, { key: keys.alice.key })).body as Array<Record<string, unknown>>;
    const reader = listed.find((k) => k.id === keys.read.id)!;
    expect(reader).toMatchObject({ name: "reader", userId: "alice", scopes: ["management:read"], expiresAt: null, revokedAt: null });
    expect(listed.every((k) => !("key" in k) && !("hash" in k) && k.userId === "alice")).toBe(true);
    expect((await call(`${url}/v1/keys`, { key: keys.bob.key })).body.map((k: { id: string }) => k.id)).toEqual([keys.bob.id]);

    const temp = await mint(keys.alice.key, { scopes: ["management:read"] });
    expect((await call(`${url}/v1/endpoints`, { key: temp.key })).status).toBe(200);
    expect((await call(`${url}/v1/keys/${temp.id}`, { key: keys.bob.key, method: "DELETE" })).status).toBe(404);
    expect((await call(`${url}/v1/keys/${temp.id}`, { key: keys.alice.key, method: "DELETE" })).status).toBe(200);
    expect((await call(`${url}/v1/endpoints`, { key: temp.key })).status).toBe(401);
  });
});

describe("isolation between users", () => {
  it("never shows one user's volumes, endpoints, templates, jobs or logs to another", async () => {
    const bob = keys.bob.key;
    const bobVolume = (await call(`${url}/v2/network-volumes`, { key: bob, body: { name: "b", size: 10, dataCenter: "local" } })).body.id;
    expect((await call(`${url}/v2/network-volumes`, { key: bob })).body.map((v: { id: string }) => v.id)).toEqual([bobVolume]);
    expect((await call(`${url}/v2/network-volumes`, { key: keys.alice.key })).body.map((v: { id: string }) => v.id)).not.toContain(bobVolume);
    expect((await call(`${url}/v1/endpoints`, { key: bob })).body).toEqual([]);
    expect((await call(`${url}/v1/templates`, { key: bob })).body).toEqual([]);
    const probes: Array<[string, string, unknown?]> = [
      ["GET", `/v2/network-volumes/${aliceVolume}`],
      ["PATCH", `/v2/network-volumes/${aliceVolume}`, { name: "mine now" }],
      ["DELETE", `/v2/network-volumes/${aliceVolume}`],
      ["GET", `/v1/endpoints/${aliceEndpoint}`],
      ["PATCH", `/v1/endpoints/${aliceEndpoint}`, { workersMax: 1 }],
      ["DELETE", `/v1/endpoints/${aliceEndpoint}`],
      ["GET", `/v1/templates/${aliceTemplate}`],
      ["GET", `/v2/${aliceEndpoint}/status/${aliceJob}`],
      ["POST", `/v2/${aliceEndpoint}/run`, { input: 1 }],
      ["POST", `/v2/${aliceEndpoint}/cancel/${aliceJob}`],
      ["GET", `/v1/endpoints/${aliceEndpoint}/logs`],
      ["GET", `/v2/${aliceAppEndpoint}/health`],
      ["GET", "/v1/apps/shop/environments/prod"],
    ];
    for (const [method, path, body] of probes) {
      const r = await call(`${url}${path}`, { key: bob, method, body });
      expect([method, path, r.status]).toEqual([method, path, 404]);
    }
    // Bob's endpoint cannot use Alice's template or volume either.
    const borrow = await call(`${url}/v1/endpoints`, { key: bob, body: { name: "x", templateId: aliceTemplate, networkVolumeId: aliceVolume } });
    expect(borrow.status).toBe(422);
    expect(borrow.body.errors).toEqual([`$.templateId: no template "${aliceTemplate}"`, `$.networkVolumeId: no network volume "${aliceVolume}"`]);
    // Alice's things are untouched.
    expect((await call(`${url}/v2/network-volumes/${aliceVolume}`, { key: keys.alice.key })).body.name).toBe("a");
    expect((await call(`${url}/v2/${aliceEndpoint}/status/${aliceJob}`, { key: keys.alice.key })).body.status).toBe("IN_QUEUE");
  });
});
