// Container registry credentials through the REST API, against a real service: the provider's shape
// (`{name, username, password}` -> `{id, name}`), the password never answered nor stored in the clear, each user
// seeing only their own, templates naming one (only their own), a delete refused while a template uses it, and
// everything kept over a restart and sealed again under a new secrets key.

import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startService } from "../../src/service/index.js";
import { call, startTestService, type TestService } from "../service/helpers.js";

const PASSWORD = "correct-horse-battery-staple";
let t: TestService;
let url: string;
const keys: Record<string, string> = {};

async function mint(body: Record<string, unknown>): Promise<string> {
  const r = await call(`${url}/v1/keys`, { key: t.key, body });
  if (r.status !== 201) throw new Error(`key creation: ${r.status} ${r.text}`);
  return r.body.key as string;
}

beforeAll(async () => {
  t = await startTestService();
  url = t.service.url;
  keys.alice = await mint({ userId: "alice", scopes: ["admin"] });
  keys.bob = await mint({ userId: "bob", scopes: ["admin"] });
  keys.reader = await mint({ userId: "alice", scopes: ["management:read"] });
});
afterAll(async () => {
  await t?.close();
});

it("creates, reads, lists and deletes registry auths in the provider's shape, never answering the password", async () => {
  const created = await call(`${url}/v1/containerregistryauth`, { key: keys.alice, body: { name: "hub", username: "alice", password: PASSWORD } });
  expect(created.status).toBe(201);
  expect(created.body).toEqual({ id: expect.stringMatching(/^cra[0-9a-f]{12}$/), name: "hub" });
  const id = created.body.id as string;
  const one = await call(`${url}/v1/containerregistryauth/${id}`, { key: keys.alice });
  expect([one.status, one.body]).toEqual([200, { id, name: "hub" }]);
  const list = await call(`${url}/v1/containerregistryauth`, { key: keys.alice });
  expect(list.body).toEqual([{ id, name: "hub" }]);
  for (const r of [created, one, list]) expect(r.text).not.toContain(PASSWORD);

  // A name is unique per user: the same name again is a conflict; another user may use it.
  const again = await call(`${url}/v1/containerregistryauth`, { key: keys.alice, body: { name: "hub", username: "x", password: "y" } });
  expect(again.status).toBe(409);
  expect(again.headers.get("content-type")).toContain("application/problem+json");
  const bobs = await call(`${url}/v1/containerregistryauth`, { key: keys.bob, body: { name: "hub", username: "bob", password: "pw" } });
  expect(bobs.status).toBe(201);

  // Tenants apart: bob neither sees nor deletes alice's.
  expect((await call(`${url}/v1/containerregistryauth`, { key: keys.bob })).body).toEqual([{ id: bobs.body.id, name: "hub" }]);
  const foreign = await call(`${url}/v1/containerregistryauth/${id}`, { key: keys.bob });
  expect(foreign.status).toBe(404);
  expect(foreign.headers.get("content-type")).toContain("application/problem+json");
  expect((await call(`${url}/v1/containerregistryauth/${id}`, { key: keys.bob, method: "DELETE" })).status).toBe(404);

  // Validated at the edge.
  const bad = await call(`${url}/v1/containerregistryauth`, { key: keys.alice, body: { name: "", username: 5, token: "t" } });
  expect(bad.status).toBe(422);
  expect(bad.body.errors).toEqual(["$.password: is required", "$.name: must not be empty", "$.username: must be a string", "$.token: unknown property"]);
  // A read-only key reads, and may not create.
  expect((await call(`${url}/v1/containerregistryauth`, { key: keys.reader })).status).toBe(200);
  const denied = await call(`${url}/v1/containerregistryauth`, { key: keys.reader, body: { name: "r", username: "u", password: "p" } });
  expect(denied.status).toBe(403);

  expect((await call(`${url}/v1/containerregistryauth/${bobs.body.id}`, { key: keys.bob, method: "DELETE" })).status).toBe(204);
  expect((await call(`${url}/v1/containerregistryauth/${bobs.body.id}`, { key: keys.bob })).status).toBe(404);
});

it("templates name one of the user's registry auths; it cannot be deleted while one does; all of it survives a restart, sealed", async () => {
  const auth = (await call(`${url}/v1/containerregistryauth`, { key: keys.alice, body: { name: "private", username: "alice", password: PASSWORD } })).body;
  const other = (await call(`${url}/v1/containerregistryauth`, { key: keys.bob, body: { name: "bobs", username: "bob", password: "pw" } })).body;

  const refused = await call(`${url}/v1/templates`, {
    key: keys.alice,
    body: { name: "w", imageName: "127.0.0.1:5000/worker:1", containerRegistryAuthId: other.id },
  });
  expect(refused.status).toBe(422);
  expect(refused.body.errors).toEqual([`$.containerRegistryAuthId: no container registry auth "${other.id}" of yours`]);

  const template = await call(`${url}/v1/templates`, {
    key: keys.alice,
    body: { name: "w", imageName: "127.0.0.1:5000/worker:1", containerRegistryAuthId: auth.id },
  });
  expect(template.status).toBe(201);
  expect(template.body).toMatchObject({ imageName: "127.0.0.1:5000/worker:1", containerRegistryAuthId: auth.id });
  expect((await call(`${url}/v1/templates/${template.body.id}`, { key: keys.alice })).body.containerRegistryAuthId).toBe(auth.id);

  const inUse = await call(`${url}/v1/containerregistryauth/${auth.id}`, { key: keys.alice, method: "DELETE" });
  expect(inUse.status).toBe(409);
  expect(inUse.headers.get("content-type")).toContain("application/problem+json");
  expect(inUse.body.detail).toContain(template.body.id);

  // An update: another user's auth is refused; null unsets it, and then the auth may go.
  const foreign = await call(`${url}/v1/templates/${template.body.id}`, { key: keys.alice, method: "PATCH", body: { containerRegistryAuthId: other.id } });
  expect(foreign.status).toBe(422);
  expect((await call(`${url}/v1/templates/${template.body.id}`, { key: keys.bob, method: "PATCH", body: { name: "x" } })).status).toBe(404);
  const moved = await call(`${url}/v1/templates/${template.body.id}`, { key: keys.alice, method: "PATCH", body: { imageName: "127.0.0.1:5000/worker:2" } });
  expect(moved.body).toMatchObject({ imageName: "127.0.0.1:5000/worker:2", containerRegistryAuthId: auth.id, name: "w" });

  // Kept over a restart, and the password is nowhere in the data directory's files in the clear.
  await t.service.close();
  t.service = await startService({ dataDir: join(t.dir, "data"), storeUrl: t.storeUrl, apiKeys: [t.key] });
  url = t.service.url;
  expect((await call(`${url}/v1/containerregistryauth/${auth.id}`, { key: keys.alice })).body).toEqual({ id: auth.id, name: "private" });
  expect((await call(`${url}/v1/templates/${template.body.id}`, { key: keys.alice })).body.containerRegistryAuthId).toBe(auth.id);
  for (const file of readdirSync(join(t.dir, "data"), { recursive: true, withFileTypes: true })) {
    if (file.isFile()) expect(readFileSync(join(file.parentPath, file.name)).includes(PASSWORD), file.name).toBe(false);
  }

  // A new secrets key (the old one kept as a previous key): every registry auth is sealed again under it, and a
  // start with the new key alone opens them all.
  const oldKey = readFileSync(join(t.dir, "data", "secrets-key"), "utf8").trim();
  const newKey = randomBytes(32).toString("base64");
  const lines: string[] = [];
  await t.service.close();
  t.service = await startService({
    dataDir: join(t.dir, "data"),
    storeUrl: t.storeUrl,
    apiKeys: [t.key],
    secretsKeys: { current: newKey, previous: [oldKey] },
    log: (m) => lines.push(m),
  });
  expect(lines).toContain("sealed 3 registry auth(s) again under the current secrets key");
  await t.service.close();
  lines.length = 0;
  t.service = await startService({
    dataDir: join(t.dir, "data"),
    storeUrl: t.storeUrl,
    apiKeys: [t.key],
    secretsKeys: { current: newKey },
    log: (m) => lines.push(m),
  });
  expect(lines.filter((l) => l.includes("registry auth"))).toEqual([]);
  url = t.service.url;

  const unset = await call(`${url}/v1/templates/${template.body.id}`, { key: keys.alice, method: "PATCH", body: { containerRegistryAuthId: null } });
  expect(unset.body.containerRegistryAuthId).toBeNull();
  expect((await call(`${url}/v1/containerregistryauth/${auth.id}`, { key: keys.alice, method: "DELETE" })).status).toBe(204);
});
