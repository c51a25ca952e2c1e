// Network volumes over HTTP against a real service (real SQLite file, real directories): the validation table
// of CreateNetworkVolumeRequest, list/get/rename/resize/delete, immutable fields, 404s, and the storage itself.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { call, startTestService, type TestService } from "../service/helpers.js";

let t: TestService;
let base: string;
beforeAll(async () => {
  t = await startTestService({
    dataCenters: [
      { id: "local", name: "here", primaryVolumeType: "STANDARD", volumeTypes: ["STANDARD", "HIGH_PERFORMANCE"], gpuTypes: [] },
      { id: "fast-1", name: "fast", primaryVolumeType: "HIGH_PERFORMANCE", volumeTypes: ["HIGH_PERFORMANCE"], gpuTypes: ["ADA_24"] },
    ],
  });
  base = `${t.service.url}/v2/network-volumes`;
});
afterAll(async () => {
  await t?.close();
});

const good = { name: "data", size: 20, dataCenter: "local" };
const without = (key: keyof typeof good) => Object.fromEntries(Object.entries(good).filter(([k]) => k !== key));

// [what, body, exact errors]
const INVALID: Array<[string, unknown, string[]]> = [
  ["name missing", without("name"), ["$.name: is required"]],
  ["size missing", without("size"), ["$.size: is required"]],
  ["dataCenter missing", without("dataCenter"), ["$.dataCenter: is required"]],
  ["everything missing", {}, ["$.name: is required", "$.size: is required", "$.dataCenter: is required"]],
  ["name empty", { ...good, name: "" }, ["$.name: must not be empty"]],
  ["name a number", { ...good, name: 7 }, ["$.name: must be a string"]],
  ["name null", { ...good, name: null }, ["$.name: must be a string"]],
  ["name an array", { ...good, name: ["a"] }, ["$.name: must be a string"]],
  ["size a string", { ...good, size: "20" }, ["$.size: must be an integer"]],
  ["size fractional", { ...good, size: 20.5 }, ["$.size: must be an integer"]],
  ["size boolean", { ...good, size: true }, ["$.size: must be an integer"]],
  ["size null", { ...good, size: null }, ["$.size: must be an integer"]],
  ["size an object", { ...good, size: { gb: 20 } }, ["$.size: must be an integer"]],
  ["size below minimum", { ...good, size: 9 }, ["$.size: must be at least 10"]],
  ["size zero", { ...good, size: 0 }, ["$.size: must be at least 10"]],
  ["size negative", { ...good, size: -20 }, ["$.size: must be at least 10"]],
  ["size above maximum", { ...good, size: 4097 }, ["$.size: must be at most 4096"]],
  ["size huge", { ...good, size: 1e12 }, ["$.size: must be at most 4096"]],
  ["dataCenter empty", { ...good, dataCenter: "" }, ["$.dataCenter: must not be empty"]],
  ["dataCenter a number", { ...good, dataCenter: 1 }, ["$.dataCenter: must be a string"]],
  ["dataCenter unknown", { ...good, dataCenter: "mars-1" }, ['$.dataCenter: unknown data center "mars-1" (known: local, fast-1)']],
  ["type unknown", { ...good, type: "FAST" }, ["$.type: must be one of STANDARD, HIGH_PERFORMANCE"]],
  ["type lowercase", { ...good, type: "standard" }, ["$.type: must be one of STANDARD, HIGH_PERFORMANCE"]],
  ["type empty", { ...good, type: "" }, ["$.type: must be one of STANDARD, HIGH_PERFORMANCE"]],
  ["type a number", { ...good, type: 1 }, ["$.type: must be a string"]],
  ["type not offered there", { ...good, dataCenter: "fast-1", type: "STANDARD" }, ['$.type: data center "fast-1" offers only HIGH_PERFORMANCE']],
  ["extra property", { ...good, region: "eu" }, ["$.region: unknown property"]],
  ["two extra properties", { ...good, id: "mine", Size: 30 }, ["$.id: unknown property", "$.Size: unknown property"]],
  ["extra null property", { ...good, extra: null }, ["$.extra: unknown property"]],
  [
    "several faults at once",
    { name: "", size: 5000, dataCenter: 3, type: "X", color: "red" },
    [
      "$.name: must not be empty",
      "$.size: must be at most 4096",
      "$.dataCenter: must be a string",
      "$.type: must be one of STANDARD, HIGH_PERFORMANCE",
      "$.color: unknown property",
    ],
  ],
  [
    "missing plus wrong plus extra",
    { size: "big", extra: 1 },
    ["$.name: is required", "$.dataCenter: is required", "$.size: must be an integer", "$.extra: unknown property"],
  ],
];

const BAD_REQUEST: Array<[string, string]> = [
  ["broken JSON", '{"name": "data", "size": 20,'],
  ["not JSON at all", "name=data&size=20"],
  ["a JSON array", JSON.stringify([good])],
  ["a JSON string", JSON.stringify("data")],
  ["a JSON number", "20"],
  ["JSON null", "null"],
  ["JSON true", "true"],
  ["an empty body", ""],
];

describe("POST /v2/network-volumes validation table", () => {
  it.each(INVALID)("%s: 422 with exactly the failures", async (_what, body, errors) => {
    const r = await call(base, { key: t.key, body });
    expect(r.status).toBe(422);
    expect(r.headers.get("content-type")).toBe("application/problem+json");
    expect(r.body).toEqual({ title: "Unprocessable Entity", status: 422, detail: "The network volume request is not valid", errors });
  });

  it.each(BAD_REQUEST)("%s: 400 problem", async (_what, raw) => {
    const r = await call(base, { key: t.key, method: "POST", raw });
    expect(r.status).toBe(400);
    expect(r.headers.get("content-type")).toBe("application/problem+json");
    expect(r.body).toMatchObject({ title: "Bad Request", status: 400 });
    expect(typeof r.body.detail).toBe("string");
  });

  it("accepts a good body without type (the data center's primary tier) and with each type", async () => {
    const plain = await call(base, { key: t.key, body: good });
    expect(plain.status).toBe(201);
    expect(plain.headers.get("content-type")).toBe("application/json");
    expect(plain.body).toEqual({ id: expect.stringMatching(/^vol[a-z0-9]+$/), name: "data", size: 20, dataCenter: "local", type: "STANDARD" });
    const primaryFast = await call(base, { key: t.key, body: { name: "f", size: 10, dataCenter: "fast-1" } });
    expect(primaryFast.body).toMatchObject({ size: 10, dataCenter: "fast-1", type: "HIGH_PERFORMANCE" });
    const hp = await call(base, { key: t.key, body: { ...good, size: 4096, type: "HIGH_PERFORMANCE" } });
    expect(hp.status).toBe(201);
    expect(hp.body).toMatchObject({ size: 4096, type: "HIGH_PERFORMANCE" });
    const std = await call(base, { key: t.key, body: { ...good, name: "d", type: "STANDARD" } });
    expect(std.body).toMatchObject({ name: "d", type: "STANDARD" });
    const ids = new Set([plain.body.id, primaryFast.body.id, hp.body.id, std.body.id]);
    expect(ids.size).toBe(4);
  });
});

describe("volume lifecycle", () => {
  it("lists, reads, renames, grows, shrinks while the files fit, refuses to move, deletes; missing volumes are 404 Not Found", async () => {
    const created = (await call(base, { key: t.key, body: { name: "life", size: 50, dataCenter: "local" } })).body;
    const dir = join(t.dir, "data", "volumes", created.id);
    expect(existsSync(dir)).toBe(true);
    writeFileSync(join(dir, "kept.txt"), "x");

    const list = await call(base, { key: t.key });
    expect(list.status).toBe(200);
    expect(list.body).toContainEqual(created);
    // One volume's answer also says the bytes it holds (an svc addition): kept.txt's one byte.
    expect((await call(`${base}/${created.id}`, { key: t.key })).body).toEqual({ ...created, usedBytes: 1 });

    const renamed = await call(`${base}/${created.id}`, { key: t.key, method: "PATCH", body: { name: "renamed", size: 60 } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toEqual({ ...created, name: "renamed", size: 60 });
    expect((await call(`${base}/${created.id}`, { key: t.key })).body.size).toBe(60);

    // Its one byte fits in any size: a shrink goes through (test/volumes/s3-sdk.test.ts: one below the bytes used).
    const shrink = await call(`${base}/${created.id}`, { key: t.key, method: "PATCH", body: { size: 59 } });
    expect(shrink.status).toBe(200);
    expect(shrink.body.size).toBe(59);
    const move = await call(`${base}/${created.id}`, { key: t.key, method: "PATCH", body: { dataCenter: "fast-1", type: "HIGH_PERFORMANCE" } });
    expect(move.status).toBe(422);
    expect(move.body.errors).toEqual(['$.dataCenter: is immutable (the volume is in "local")', "$.type: is immutable (the volume is STANDARD)"]);
    // The same values are not a change.
    expect((await call(`${base}/${created.id}`, { key: t.key, method: "PATCH", body: { dataCenter: "local", type: "STANDARD" } })).status).toBe(200);
    const extra = await call(`${base}/${created.id}`, { key: t.key, method: "PATCH", body: { size: 4097, owner: "me" } });
    expect(extra.body.errors).toEqual(["$.size: must be at most 4096", "$.owner: unknown property"]);
    expect((await call(`${base}/${created.id}`, { key: t.key, method: "PATCH", raw: "[1]" })).status).toBe(400);
    expect(existsSync(join(dir, "kept.txt"))).toBe(true);

    const del = await call(`${base}/${created.id}`, { key: t.key, method: "DELETE" });
    expect(del.status).toBe(204);
    expect(existsSync(dir)).toBe(false);
    for (const method of ["GET", "PATCH", "DELETE"]) {
      const r = await call(`${base}/${created.id}`, { key: t.key, method, body: method === "PATCH" ? { name: "x" } : undefined });
      expect(r.status).toBe(404);
      expect(r.headers.get("content-type")).toBe("application/problem+json");
      expect(r.body).toMatchObject({ title: "Not Found", status: 404 });
    }
    expect((await call(base, { key: t.key })).body.map((v: { id: string }) => v.id)).not.toContain(created.id);
  });

  it("lists the configured data centers", async () => {
    const r = await call(`${t.service.url}/v2/data-centers`, { key: t.key });
    expect(r.body.map((d: { id: string }) => d.id)).toEqual(["local", "fast-1"]);
  });
});
