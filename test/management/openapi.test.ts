// The OpenAPI 3.1 document: served without a key, version 2.0.0, built from the very schemas that validate
// requests; a body generated from the document alone is accepted by the service, and one property the
// document does not allow is refused.

import { afterAll, beforeAll, expect, it } from "vitest";
import { REQUEST_SCHEMAS, SCHEMAS } from "../../src/service/http/schema.js";
import { call, startTestService, type TestService } from "../service/helpers.js";

type Json = any;
let t: TestService;
let doc: Json;

beforeAll(async () => {
  t = await startTestService();
  const r = await call(`${t.service.url}/openapi.json`, { key: null });
  expect(r.status).toBe(200);
  doc = r.body;
});
afterAll(async () => {
  await t?.close();
});

/** A value valid per a schema of the document, from the document only (resolving its $refs). */
function sample(schema: Json): Json {
  if (schema.$ref) return sample(doc.components.schemas[schema.$ref.replace("#/components/schemas/", "")]);
  if (Array.isArray(schema.type)) return null;
  switch (schema.type) {
    case "string":
      if (schema.examples) return schema.examples[0];
      if (schema.enum) return schema.enum[0];
      return "s".repeat(Math.max(1, schema.minLength ?? 1));
    case "integer":
      return schema.minimum ?? 1;
    case "boolean":
      return true;
    case "array":
      return Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () => sample(schema.items));
    case "object":
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, v]) => [k, sample(v)]));
  }
  throw new Error(`no sample for ${JSON.stringify(schema)}`);
}

function requestSchemaOf(path: string, method: string): Json {
  return doc.paths[path][method].requestBody.content["application/json"].schema;
}

it("is OpenAPI 3.1 with the management API's version 2.0.0", () => {
  expect(doc.openapi).toBe("3.1.0");
  expect(doc.info.version).toBe("2.0.0");
  expect(doc.components.securitySchemes.bearer).toEqual({ type: "http", scheme: "bearer" });
  expect(Object.keys(doc.paths)).toEqual(
    expect.arrayContaining(["/v2/network-volumes", "/v2/network-volumes/{networkVolumeId}", "/v1/endpoints", "/v1/templates", "/v1/keys"]),
  );
});

it("contains every schema that validates requests, exactly as validation uses it, and uses each for a request body", () => {
  const used = new Set<string>();
  for (const item of Object.values(doc.paths) as Json[]) {
    for (const op of Object.values(item) as Json[]) {
      const ref = op?.requestBody?.content?.["application/json"]?.schema?.$ref;
      if (ref) used.add(ref.replace("#/components/schemas/", ""));
    }
  }
  for (const name of REQUEST_SCHEMAS) {
    expect(doc.components.schemas[name]).toEqual(JSON.parse(JSON.stringify(SCHEMAS[name])));
    expect(used).toContain(name);
  }
  expect(doc.components.schemas.ErrorResponse.required).toEqual(["title", "status", "detail"]);
});

it("accepts bodies generated from the document, and refuses a property it does not describe", async () => {
  const url = t.service.url;
  const key = t.key;
  const volumeBody = sample(requestSchemaOf("/v2/network-volumes", "post"));
  expect(Object.keys(volumeBody).sort()).toEqual(["dataCenter", "name", "size", "type"]);
  // Ids of other resources (and the immutable data center) must name real ones: the document cannot know them.
  const volume = await call(`${url}/v2/network-volumes`, { key, body: volumeBody });
  expect(volume.status).toBe(201);
  const update = await call(`${url}/v2/network-volumes/${volume.body.id}`, {
    key,
    method: "PATCH",
    body: { ...sample(requestSchemaOf("/v2/network-volumes/{networkVolumeId}", "patch")), dataCenter: volume.body.dataCenter },
  });
  expect(update.status).toBe(200);

  const template = await call(`${url}/v1/templates`, { key, body: sample(requestSchemaOf("/v1/templates", "post")) });
  expect(template.status).toBe(201);
  const endpointBody = { ...sample(requestSchemaOf("/v1/endpoints", "post")), templateId: template.body.id, networkVolumeId: volume.body.id };
  const endpoint = await call(`${url}/v1/endpoints`, { key, body: endpointBody });
  expect(endpoint.status).toBe(201);
  const patch = { ...sample(requestSchemaOf("/v1/endpoints/{endpointId}", "patch")), templateId: template.body.id };
  expect((await call(`${url}/v1/endpoints/${endpoint.body.id}`, { key, method: "PATCH", body: patch })).status).toBe(200);
  const keyBody = sample(requestSchemaOf("/v1/keys", "post"));
  delete keyBody.userId; // another user's key is the operator's business, and allowed here, but keep it simple
  expect((await call(`${url}/v1/keys`, { key, body: keyBody })).status).toBe(201);

  for (const [path, body] of [
    ["/v2/network-volumes", volumeBody],
    ["/v1/templates", sample(requestSchemaOf("/v1/templates", "post"))],
    ["/v1/endpoints", endpointBody],
    ["/v1/keys", keyBody],
  ] as const) {
    const r = await call(`${url}${path}`, { key, body: { ...body, notInTheDocument: 1 } });
    expect([path, r.status, r.body.errors]).toEqual([path, 422, ["$.notInTheDocument: unknown property"]]);
  }
});

/** Type problems of `value` against a schema of the document (types, required properties, items). */
function mismatches(value: Json, schema: Json, at = "$"): string[] {
  if (schema.$ref) return mismatches(value, doc.components.schemas[schema.$ref.replace("#/components/schemas/", "")], at);
  const types: string[] = Array.isArray(schema.type) ? schema.type : [schema.type];
  const typeOf = value === null ? "null" : Array.isArray(value) ? "array" : Number.isInteger(value) ? "integer" : typeof value;
  if (!types.includes(typeOf)) return [`${at}: ${typeOf}, not ${types.join(" or ")}`];
  if (schema.enum && !schema.enum.includes(value)) return [`${at}: ${String(value)} not in ${schema.enum.join(", ")}`];
  if (typeOf === "array") return (value as Json[]).flatMap((v, i) => mismatches(v, schema.items, `${at}[${i}]`));
  if (typeOf !== "object") return [];
  const missing = (schema.required ?? []).filter((k: string) => !(k in value)).map((k: string) => `${at}.${k}: missing`);
  const props = Object.entries(schema.properties ?? {}).filter(([k]) => k in value);
  return [...missing, ...props.flatMap(([k, s]) => mismatches(value[k], s, `${at}.${k}`))];
}

it("describes GET /v2/data-centers, and the answer has the schema it names", async () => {
  const op = doc.paths["/v2/data-centers"]?.get;
  expect(op).toBeDefined();
  const schema = op.responses["200"].content["application/json"].schema;
  const r = await call(`${t.service.url}/v2/data-centers`, { key: t.key });
  expect(r.status).toBe(200);
  expect(r.body.length).toBeGreaterThan(0);
  expect(mismatches(r.body, schema)).toEqual([]);
});

it("describes API keys as they are answered: times in epoch milliseconds like every other record", async () => {
  const created = await call(`${t.service.url}/v1/keys`, { key: t.key, body: { scopes: ["jobs:*"], expiresInSeconds: 3600 } });
  const revoked = await call(`${t.service.url}/v1/keys/${created.body.id}`, { key: t.key, method: "DELETE" });
  expect(revoked.status).toBe(200);
  const schema = doc.paths["/v1/keys/{keyId}"].get.responses["200"].content["application/json"].schema;
  expect(mismatches(created.body, schema)).toEqual([]);
  expect(mismatches(revoked.body, schema)).toEqual([]);
  expect(revoked.body.expiresAt).toBe(created.body.createdAt + 3600_000);
  expect(revoked.body.revokedAt).toBeGreaterThanOrEqual(created.body.createdAt);
});
