// The OpenAPI 3.1 description of the service, served unauthenticated at GET /openapi.json. Its component
// schemas are the objects of src/service/http/schema.ts that validate the requests, so the two cannot drift apart.

import { openApiSchema, SCHEMAS, type SchemaName } from "./schema.js";
import { servicePaths } from "./openapi-paths.js";

export const OPENAPI_PATH = "/openapi.json";
/** The management API's description version (the spec's versioning section). */
export const MANAGEMENT_API_VERSION = "2.0.0";

const ref = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: SchemaName) => ({ "application/json": { schema: ref(name) } });
const problem = (description: string) => ({ description, content: { "application/problem+json": { schema: ref("ErrorResponse") } } });
const rateHeaders = {
  RateLimit: { description: "Per window: r remaining requests, t seconds to reset (structured-field list)", schema: { type: "string" } },
  "RateLimit-Policy": { description: "Per window: q quota, w window seconds (structured-field list)", schema: { type: "string" } },
};
const errors = {
  "400": problem("Bad Request: not JSON, not an object, or against the service's rules"),
  "401": problem("Unauthorized: bearer token missing, malformed, expired or invalid"),
  "403": problem("Forbidden: the token lacks access"),
  "429": {
    ...problem("Too Many Requests: per-user rate limit; detail names the window"),
    headers: { "Retry-After": { description: "Seconds", schema: { type: "integer" } } },
  },
};
const notFound = { "404": problem("Not Found") };
const invalid = { "422": problem("Unprocessable Entity: `errors` lists every failure as `$.path: message`") };
const idParam = (name: string) => [{ name, in: "path", required: true, schema: { type: "string" } }];
const ok = (description: string, content?: object, status = "200") => ({ [status]: { description, headers: rateHeaders, ...(content ? { content } : {}) } });
const list = (name: SchemaName) => ({ "application/json": { schema: { type: "array", items: ref(name) } } });

function crud(tag: string, item: SchemaName, create: SchemaName, update: SchemaName | undefined, idName: string) {
  const collection = {
    get: { tags: [tag], summary: `List ${tag}`, responses: { ...ok(`The user's ${tag}`, list(item)), ...errors } },
    post: {
      tags: [tag],
      summary: `Create one of ${tag}`,
      requestBody: { required: true, content: json(create) },
      responses: { ...ok("Created", json(item), "201"), ...errors, ...invalid },
    },
  };
  const one: Record<string, unknown> = {
    parameters: idParam(idName),
    get: { tags: [tag], summary: "Read one", responses: { ...ok("Found", json(item)), ...errors, ...notFound } },
    delete: { tags: [tag], summary: "Delete", responses: { ...ok("Deleted", undefined, "204"), ...errors, ...notFound } },
  };
  if (update) {
    one.patch = {
      tags: [tag],
      summary: "Update",
      requestBody: { required: true, content: json(update) },
      responses: { ...ok("Updated", json(item)), ...errors, ...notFound, ...invalid },
    };
  }
  return { collection, one };
}

export function openApiDocument(serverUrl: string): Record<string, unknown> {
  const volumes = crud("network volumes", "NetworkVolume", "CreateNetworkVolumeRequest", "UpdateNetworkVolumeRequest", "networkVolumeId");
  const endpoints = crud("endpoints", "Endpoint", "CreateEndpointRequest", "UpdateEndpointRequest", "endpointId");
  const templates = crud("templates", "Template", "CreateTemplateRequest", "UpdateTemplateRequest", "templateId");
  const registryAuths = crud("container registry auths", "ContainerRegistryAuth", "CreateContainerRegistryAuthRequest", undefined, "containerRegistryAuthId");
  const keys = crud("keys", "ApiKey", "CreateKeyRequest", undefined, "keyId");
  (keys.one.delete as { summary: string; responses: object }).summary = "Revoke (the key answers 401 from then on)";
  (keys.one.delete as { summary: string; responses: object }).responses = { ...ok("Revoked", json("ApiKey")), ...errors, ...notFound };
  return {
    openapi: "3.1.0",
    info: {
      title: "svc API",
      version: MANAGEMENT_API_VERSION,
      description:
        "Every public route of the service: the management API (network volumes, endpoints, templates, keys, secrets), the job API of an endpoint ({queue_base_url}/v2/{endpoint_id}, docs/job-api.md) and its OpenAI-compatible route, logs, apps/builds/environments (svc deploy) and load-balanced endpoints. The job API, the OpenAI route and load-balanced endpoints also take the bare key in Authorization.",
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    servers: [{ url: serverUrl }],
    security: [{ bearer: [] }],
    paths: {
      "/v2/network-volumes": volumes.collection,
      "/v2/network-volumes/{networkVolumeId}": volumes.one,
      "/v2/data-centers": {
        get: {
          tags: ["data centers"],
          summary: "List the configured data centers (any management read scope)",
          responses: { ...ok("The data centers", list("DataCenter")), ...errors },
        },
      },
      "/v1/endpoints": endpoints.collection,
      "/v1/endpoints/{endpointId}": endpoints.one,
      "/v1/templates": templates.collection,
      "/v1/templates/{templateId}": templates.one,
      "/v1/containerregistryauth": registryAuths.collection,
      "/v1/containerregistryauth/{containerRegistryAuthId}": registryAuths.one,
      "/v1/keys": keys.collection,
      "/v1/keys/{keyId}": keys.one,
      "/v1/secrets": {
        get: {
          tags: ["secrets"],
          summary: "The user's secrets: names, scopes and dates, never values (management:read)",
          responses: { ...ok("The secrets", list("Secret")), ...errors },
        },
      },
      "/v1/secrets/{name}": {
        parameters: idParam("name"),
        put: {
          tags: ["secrets"],
          summary: "Set a secret (management:write); the answer lists the endpoints whose workers roll",
          requestBody: { required: true, content: json("SetSecretRequest") },
          responses: { ...ok("Changed", json("Secret")), ...ok("Created", json("Secret"), "201"), ...errors, ...invalid },
        },
        delete: {
          tags: ["secrets"],
          summary: "Forget a secret (management:write); ?app= and ?env= name its scope",
          parameters: [
            { name: "app", in: "query", required: false, schema: { type: "string" } },
            { name: "env", in: "query", required: false, schema: { type: "string" } },
          ],
          responses: { ...ok("Deleted"), ...errors, ...notFound },
        },
      },
      ...servicePaths(),
      "/v1/me": {
        get: {
          tags: ["keys"],
          summary: "Who the request's key acts as: user, key, scopes, rate limits (any user key)",
          responses: { ...ok("The caller", json("Me")), ...errors },
        },
      },
    },
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      schemas: Object.fromEntries(Object.entries(SCHEMAS).map(([name, schema]) => [name, openApiSchema(schema)])),
    },
  };
}
