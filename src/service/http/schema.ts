import { API_SCHEMAS } from "./api-schemas.js";
import { VOLUME_TYPES, type VolumeType } from "../management/store.js";

// The management API's request and response schemas, as a small JSON Schema (2020-12) subset. The same objects
// validate request bodies (validate()) and are published in the OpenAPI document (src/service/openapi.ts), so
// the description and the validation cannot disagree. Pure: no I/O.

export type Schema =
  | { type: "string"; minLength?: number; maxLength?: number; enum?: readonly string[]; pattern?: string; description?: string; examples?: string[] }
  | { type: "integer"; minimum?: number; maximum?: number; description?: string }
  | { type: "number"; description?: string }
  /** Any JSON value (the document shows only its description). */
  | { any: true; description?: string }
  | { type: "boolean"; description?: string }
  | { type: "array"; items: Schema; maxItems?: number; minItems?: number; description?: string }
  | {
      type: "object";
      properties?: Record<string, Schema>;
      required?: readonly string[];
      /** false: unknown properties are rejected; a schema: the type of every value (a map). */
      additionalProperties?: boolean | Schema;
      description?: string;
    }
  | { $ref: string; description?: string }
  | { type: ["string", "null"] | ["integer", "null"] | ["number", "null"]; description?: string };

export { VOLUME_TYPES, type VolumeType };
export const MIN_VOLUME_GB = 10;
export const MAX_VOLUME_GB = 4096;
export const MAX_WORKERS = 100;
export const MAX_IDLE_TIMEOUT_S = 3600;
export const MAX_EXECUTION_TIMEOUT_MS = 24 * 3600_000;
export { SCALER_TYPES } from "svc/internal";
import { SCALER_TYPES } from "svc/internal";
export const KEY_SCOPE_PATTERN = "^(admin|deploy|metrics|management:read|management:write|jobs:\\*|jobs:[a-z0-9]+)$";

const envMap: Schema = { type: "object", additionalProperties: { type: "string" }, description: "Environment variables of the workers" };
const volumeType: Schema = { type: "string", enum: VOLUME_TYPES, description: "Storage tier" };
const registryAuthId: Schema = {
  type: ["string", "null"],
  description: "A registry auth of yours (POST /v1/containerregistryauth) the image is pulled with; null: none",
};
const gpuTypeIds: Schema = {
  type: "array",
  items: { type: "string", minLength: 1, examples: ["HOPPER_141", "ADA_24", "NVIDIA H200", "ANY"] },
  maxItems: 16,
  description: "GPU types in priority order: pool ids, exact card names as nvidia-smi prints them, or ANY (docs/gpus.md)",
};

/** Every named schema of the management API; `#/components/schemas/<name>` in the OpenAPI document. */
export const SCHEMAS = {
  VolumeType: volumeType,
  CreateNetworkVolumeRequest: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, description: "Human-readable; need not be unique" },
      size: { type: "integer", minimum: MIN_VOLUME_GB, maximum: MAX_VOLUME_GB, description: "Allocated GB" },
      dataCenter: { type: "string", minLength: 1, description: "Data center identifier (GET /v2/data-centers lists them)", examples: ["local"] },
      type: { $ref: "#/components/schemas/VolumeType", description: "When omitted, the data center's primary tier" },
    },
    required: ["name", "size", "dataCenter"],
    additionalProperties: false,
  },
  UpdateNetworkVolumeRequest: {
    type: "object",
    description: "Rename and/or grow. dataCenter and type are immutable: a different value is rejected.",
    properties: {
      name: { type: "string", minLength: 1 },
      size: { type: "integer", minimum: MIN_VOLUME_GB, maximum: MAX_VOLUME_GB, description: "Never smaller than the current size" },
      dataCenter: { type: "string", minLength: 1, description: "Immutable; only the current value is accepted" },
      type: { $ref: "#/components/schemas/VolumeType", description: "Immutable; only the current value is accepted" },
    },
    additionalProperties: false,
  },
  NetworkVolume: {
    type: "object",
    properties: {
      id: { type: "string" },
      name: { type: "string" },
      size: { type: "integer", minimum: MIN_VOLUME_GB, maximum: MAX_VOLUME_GB },
      dataCenter: { type: "string" },
      type: { $ref: "#/components/schemas/VolumeType" },
      usedBytes: { type: "integer", minimum: 0, description: "svc addition, in the answer for one volume: the bytes its files hold (docs/volumes.md)" },
    },
    required: ["id", "name", "size", "dataCenter", "type"],
  },
  DataCenter: {
    type: "object",
    description: "A configured data center (configuration, not API: startService({ dataCenters }))",
    properties: {
      id: { type: "string", description: "What a volume's dataCenter names", examples: ["local"] },
      name: { type: "string" },
      primaryVolumeType: { $ref: "#/components/schemas/VolumeType", description: "The tier a volume gets when the request names none" },
      volumeTypes: { type: "array", items: { $ref: "#/components/schemas/VolumeType" }, description: "Tiers offered" },
      gpuTypes: { type: "array", items: { type: "string" }, description: "GPU type ids offered (the host data center's: this machine's GPUs)" },
    },
    required: ["id", "name", "primaryVolumeType", "volumeTypes", "gpuTypes"],
  },
  CreateTemplateRequest: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 100 },
      imageName: { type: "string", minLength: 1, description: "Worker image" },
      env: envMap,
      containerDiskInGb: {
        type: "integer",
        minimum: 0,
        maximum: 1024,
        description: "The image's writable root filesystem, GB (default 10; bounded where the engine can bound it); 0: a read-only root",
      },
      shmSizeMb: { type: "integer", minimum: 64, maximum: 262144, description: "Size of /dev/shm in the image's containers, MiB (default: the engine's, 64)" },
      containerRegistryAuthId: registryAuthId,
    },
    required: ["name", "imageName"],
    additionalProperties: false,
  },
  UpdateTemplateRequest: {
    type: "object",
    description: "The fields to change; endpoints of the template follow (a worker started afterwards runs the new image).",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 100 },
      imageName: { type: "string", minLength: 1, description: "Worker image" },
      env: envMap,
      containerDiskInGb: {
        type: "integer",
        minimum: 0,
        maximum: 1024,
        description: "The image's writable root filesystem, GB (default 10; bounded where the engine can bound it); 0: a read-only root",
      },
      shmSizeMb: { type: ["integer", "null"], description: "Size of /dev/shm in the image's containers, MiB (64 to 262144); null: the engine's" },
      containerRegistryAuthId: registryAuthId,
    },
    additionalProperties: false,
  },
  CreateContainerRegistryAuthRequest: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 100, description: "Unique among the user's registry auths" },
      username: { type: "string", minLength: 1, maxLength: 1024 },
      password: { type: "string", minLength: 1, maxLength: 16384, description: "A password or access token; sealed at rest, never answered back" },
    },
    required: ["name", "username", "password"],
    additionalProperties: false,
  },
  ContainerRegistryAuth: {
    type: "object",
    description: "Credentials a template's image is pulled with; the username and password are never answered",
    properties: { id: { type: "string" }, name: { type: "string" } },
    required: ["id", "name"],
  },
  Template: {
    type: "object",
    properties: {
      id: { type: "string" },
      name: { type: "string" },
      imageName: { type: "string" },
      env: envMap,
      containerDiskInGb: { type: "integer" },
      shmSizeMb: { type: ["integer", "null"] },
      containerRegistryAuthId: { type: ["string", "null"], description: "The registry auth its image is pulled with" },
      createdAt: { type: "integer" },
    },
    required: ["id", "name", "imageName", "env", "containerDiskInGb", "createdAt"],
  },
  CreateEndpointRequest: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 100 },
      templateId: { type: "string", minLength: 1 },
      computeType: { type: "string", enum: ["GPU", "CPU"] },
      gpuTypeIds,
      gpuCount: { type: "integer", minimum: 1, maximum: 8 },
      workersMin: { type: "integer", minimum: 0, maximum: MAX_WORKERS },
      workersMax: { type: "integer", minimum: 0, maximum: MAX_WORKERS },
      idleTimeout: { type: "integer", minimum: 1, maximum: MAX_IDLE_TIMEOUT_S, description: "Seconds" },
      env: envMap,
      networkVolumeId: { type: "string", minLength: 1 },
      models: {
        type: "array",
        maxItems: 32,
        items: { type: "string", minLength: 3, maxLength: 300, examples: ["openai-community/gpt2@main"] },
        description:
          'Models its workers load, each "org/name@revision" (a branch, tag or commit; "org/name": main): fetched once per host from the service\'s model hub before workers start, mounted read-only with HF_HOME/HF_HUB_CACHE set and HF_HUB_OFFLINE=1 (docs/models.md)',
      },
      executionTimeoutMs: { type: "integer", minimum: 1000, maximum: MAX_EXECUTION_TIMEOUT_MS },
      scalerType: {
        type: "string",
        enum: SCALER_TYPES,
        description:
          "When workers are added: QUEUE_DELAY (a queued job waited longer than scalerValue seconds) or REQUEST_COUNT (ceil((queued + in progress) / scalerValue) workers). Default QUEUE_DELAY",
      },
      scalerValue: { type: "integer", minimum: 1, maximum: 3600, description: "QUEUE_DELAY: seconds; REQUEST_COUNT: jobs per worker. Default 4" },
      type: {
        type: "string",
        enum: ["queue", "lb"],
        description:
          "queue (default): a job API over svc code (imageName svc://<app endpoint id>); lb: a load-balanced endpoint running the template's prebuilt image (an HTTP server on $PORT with /ping; Docker driver). Set at creation only.",
      },
    },
    required: ["name", "templateId"],
    additionalProperties: false,
  },
  UpdateEndpointRequest: {
    type: "object",
    description: "Changing gpuTypeIds, gpuCount, workersMin, workersMax or models restarts active workers; other edits apply without a restart.",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 100 },
      templateId: { type: "string", minLength: 1 },
      gpuTypeIds,
      gpuCount: { type: "integer", minimum: 1, maximum: 8 },
      workersMin: { type: "integer", minimum: 0, maximum: MAX_WORKERS },
      workersMax: { type: "integer", minimum: 0, maximum: MAX_WORKERS },
      idleTimeout: { type: "integer", minimum: 1, maximum: MAX_IDLE_TIMEOUT_S },
      env: envMap,
      networkVolumeId: { type: ["string", "null"] },
      models: {
        type: "array",
        maxItems: 32,
        items: { type: "string", minLength: 3, maxLength: 300, examples: ["openai-community/gpt2@main"] },
        description:
          'Models its workers load, each "org/name@revision" (a branch, tag or commit; "org/name": main): fetched once per host from the service\'s model hub before workers start, mounted read-only with HF_HOME/HF_HUB_CACHE set and HF_HUB_OFFLINE=1 (docs/models.md)',
      },
      executionTimeoutMs: { type: "integer", minimum: 1000, maximum: MAX_EXECUTION_TIMEOUT_MS },
      scalerType: {
        type: "string",
        enum: SCALER_TYPES,
        description:
          "When workers are added: QUEUE_DELAY (a queued job waited longer than scalerValue seconds) or REQUEST_COUNT (ceil((queued + in progress) / scalerValue) workers); applies to the running workers",
      },
      scalerValue: { type: "integer", minimum: 1, maximum: 3600, description: "QUEUE_DELAY: seconds; REQUEST_COUNT: jobs per worker" },
    },
    additionalProperties: false,
  },
  Endpoint: {
    type: "object",
    properties: {
      id: { type: "string" },
      name: { type: "string" },
      templateId: { type: "string" },
      url: { type: "string", description: "Job API base: {queue_base_url}/v2/{id}" },
      computeType: { type: "string", enum: ["GPU", "CPU"] },
      gpuTypeIds,
      gpuCount: { type: "integer" },
      allocatedGpuType: { type: ["string", "null"], description: "The first type of gpuTypeIds available on the host" },
      workersMin: { type: "integer" },
      workersMax: { type: "integer" },
      idleTimeout: { type: "integer" },
      env: envMap,
      networkVolumeId: { type: ["string", "null"] },
      models: { type: "array", items: { type: "string" }, description: 'The models its workers find in the host\'s model cache, "org/name@revision"' },
      executionTimeoutMs: { type: "integer" },
      scalerType: { type: "string", enum: SCALER_TYPES },
      scalerValue: { type: "integer" },
      type: { type: "string", enum: ["queue", "lb"] },
      lbUrl: { type: "string", description: "A load-balanced endpoint's address: {service}/lb/{id}" },
      status: { type: "string", enum: ["READY", "WAITING"] },
      statusReason: { type: ["string", "null"], description: "Why the endpoint gets no workers (WAITING), or why its workers do not stay (a crash loop)" },
      crashLoop: {
        type: "object",
        description:
          "Present while its workers keep dying: deaths within windowMs, the last one, when the next worker may start (docs/job-api.md, Crash loops)",
        properties: {
          deaths: { type: "integer" },
          windowMs: { type: "integer" },
          since: { type: "integer" },
          lastDeath: { type: "object", properties: { at: { type: "integer" }, reason: { type: "string" }, message: { type: "string" } } },
          nextStartAt: { type: ["integer", "null"] },
        },
      },
      ping: {
        type: "object",
        description: "A prebuilt image's /ping check, run on one worker when the endpoint is created or updated",
        properties: {
          ok: { type: "boolean" },
          state: { type: "string", enum: ["ready", "initializing", "missing", "unhealthy", "unreachable"] },
          status: { type: "integer" },
          message: { type: "string" },
        },
      },
      createdAt: { type: "integer" },
      updatedAt: { type: "integer" },
      source: { type: "string", enum: ["rest", "deploy"], description: "rest: created here from a template; deploy: made by svc deploy (templateId is empty)" },
      app: { type: "string", description: "The app of an endpoint svc deploy made" },
      environment: { type: "string", description: "Its environment (of the app)" },
    },
    required: ["id", "name", "templateId", "url", "status"],
  },
  CreateKeyRequest: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 100 },
      scopes: { type: "array", items: { type: "string", pattern: KEY_SCOPE_PATTERN, examples: ["management:read"] }, minItems: 1, maxItems: 64 },
      userId: { type: "string", pattern: "^[a-zA-Z0-9_.@-]{1,64}$", description: "Another user (operator only); created when new" },
      expiresInSeconds: { type: "integer", minimum: 1, maximum: 10 * 365 * 86400 },
    },
    required: ["scopes"],
    additionalProperties: false,
  },
  ApiKey: {
    type: "object",
    properties: {
      id: { type: "string" },
      name: { type: ["string", "null"] },
      userId: { type: "string" },
      scopes: { type: "array", items: { type: "string" } },
      createdAt: { type: "integer", description: "Epoch milliseconds, as every record's times" },
      expiresAt: { type: ["integer", "null"], description: "Epoch milliseconds, or null for no expiry" },
      revokedAt: { type: ["integer", "null"], description: "Epoch milliseconds, or null while the key is valid" },
      key: { type: "string", description: "The secret; only in the answer to the creation" },
      inUse: { type: "boolean", description: "This is the key the request was made with" },
    },
    required: ["id", "name", "userId", "scopes", "createdAt", "expiresAt", "revokedAt", "inUse"],
  },
  SetSecretRequest: {
    type: "object",
    properties: {
      value: { type: "string", minLength: 1, description: "The secret's value (at most 64 KiB); never answered back" },
      app: { type: "string", pattern: "^[a-z0-9][a-z0-9._-]{0,62}$", description: "Only for this app (default: all the user's apps)" },
      env: { type: "string", pattern: "^[a-z0-9][a-z0-9._-]{0,62}$", description: "Only for this environment of `app`" },
    },
    required: ["value"],
    additionalProperties: false,
  },
  Secret: {
    type: "object",
    properties: {
      name: { type: "string" },
      app: { type: ["string", "null"], description: "null: every app of the user" },
      env: { type: ["string", "null"], description: "null: every environment of the app" },
      createdAt: { type: "integer", description: "Epoch milliseconds" },
      updatedAt: { type: "integer", description: "Epoch milliseconds" },
    },
    required: ["name", "app", "env", "createdAt", "updatedAt"],
  },
  Me: {
    type: "object",
    properties: {
      userId: { type: "string" },
      keyId: { type: "string" },
      key: {
        $ref: "#/components/schemas/ApiKey",
        description: "The key's record; null for a key given to the service at start (the operator's bootstrap key)",
      },
      scopes: { type: "array", items: { type: "string" } },
      worker: { type: "object", properties: { endpointId: { type: "string" } }, description: "Only for a worker token" },
      rateLimits: {
        type: "array",
        items: {
          type: "object",
          properties: { name: { type: "string" }, quota: { type: "integer" }, seconds: { type: "integer" } },
          required: ["name", "quota", "seconds"],
        },
      },
    },
    required: ["userId", "keyId", "key", "scopes", "rateLimits"],
  },
  ErrorResponse: {
    type: "object",
    properties: {
      title: { type: "string" },
      status: { type: "integer" },
      detail: { type: "string" },
      errors: { type: "array", items: { type: "string" }, description: "Validation failures: a JSON-path prefix and a message" },
    },
    required: ["title", "status", "detail"],
  },
  ...API_SCHEMAS,
} satisfies Record<string, Schema>;

export type SchemaName = keyof typeof SCHEMAS;

/** A schema as OpenAPI 3.1 writes it: "any value" is a schema with no type. Pure. */
export function openApiSchema(schema: Schema): Record<string, unknown> {
  if ("any" in schema) return schema.description ? { description: schema.description } : {};
  if ("$ref" in schema) return { ...schema };
  const out: Record<string, unknown> = { ...schema };
  if (schema.type === "object") {
    if (schema.properties) out.properties = Object.fromEntries(Object.entries(schema.properties).map(([k, v]) => [k, openApiSchema(v)]));
    if (typeof schema.additionalProperties === "object") out.additionalProperties = openApiSchema(schema.additionalProperties);
  }
  if (schema.type === "array") out.items = openApiSchema(schema.items);
  return out;
}

/** Schemas that validate request bodies (each must appear in the OpenAPI document). */
export const REQUEST_SCHEMAS: SchemaName[] = [
  "CreateNetworkVolumeRequest",
  "UpdateNetworkVolumeRequest",
  "CreateTemplateRequest",
  "UpdateTemplateRequest",
  "CreateContainerRegistryAuthRequest",
  "CreateEndpointRequest",
  "UpdateEndpointRequest",
  "CreateKeyRequest",
  "SetSecretRequest",
  "UpdateWebhookSettingsRequest",
  "RotateWebhookSecretRequest",
];

function describeType(s: Schema): string {
  if ("any" in s) return "any value";
  if ("$ref" in s) return describeType(resolveRef(s.$ref));
  if (Array.isArray(s.type)) return `${s.type[0] === "integer" ? "an integer" : s.type[0] === "number" ? "a number" : "a string"} or null`;
  switch (s.type) {
    case "string":
      return "a string";
    case "integer":
      return "an integer";
    case "number":
      return "a number";
    case "boolean":
      return "a boolean";
    case "array":
      return "an array";
    case "object":
      return "an object";
  }
}

function resolveRef(ref: string): Schema {
  const name = ref.replace("#/components/schemas/", "") as SchemaName;
  return SCHEMAS[name] as Schema;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Every failure of `value` against `schema`, as `$.path: message` strings, in property order. */
export function validate(schema: Schema, value: unknown, path = "$"): string[] {
  if ("any" in schema) return [];
  if ("$ref" in schema) return validate(resolveRef(schema.$ref), value, path);
  const errors: string[] = [];
  if (Array.isArray(schema.type)) {
    const [type] = schema.type;
    const ok =
      value === null ||
      (type === "integer" ? Number.isInteger(value) : type === "number" ? typeof value === "number" && Number.isFinite(value) : typeof value === "string");
    if (!ok) errors.push(`${path}: must be ${describeType(schema)}`);
    return errors;
  }
  switch (schema.type) {
    case "string": {
      if (typeof value !== "string") return [`${path}: must be a string`];
      if (schema.enum && !schema.enum.includes(value)) return [`${path}: must be one of ${schema.enum.join(", ")}`];
      if (schema.minLength !== undefined && value.length < schema.minLength) {
        return [schema.minLength === 1 ? `${path}: must not be empty` : `${path}: must be at least ${schema.minLength} characters long`];
      }
      if (schema.maxLength !== undefined && value.length > schema.maxLength) return [`${path}: must be at most ${schema.maxLength} characters long`];
      if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) return [`${path}: must match ${schema.pattern}`];
      return [];
    }
    case "integer": {
      if (typeof value !== "number" || !Number.isInteger(value)) return [`${path}: must be an integer`];
      if (schema.minimum !== undefined && value < schema.minimum) return [`${path}: must be at least ${schema.minimum}`];
      if (schema.maximum !== undefined && value > schema.maximum) return [`${path}: must be at most ${schema.maximum}`];
      return [];
    }
    case "number":
      return typeof value === "number" && Number.isFinite(value) ? [] : [`${path}: must be a number`];
    case "boolean":
      return typeof value === "boolean" ? [] : [`${path}: must be a boolean`];
    case "array": {
      if (!Array.isArray(value)) return [`${path}: must be an array`];
      if (schema.minItems !== undefined && value.length < schema.minItems) errors.push(`${path}: must have at least ${schema.minItems} item(s)`);
      if (schema.maxItems !== undefined && value.length > schema.maxItems) errors.push(`${path}: must have at most ${schema.maxItems} items`);
      value.forEach((item, i) => errors.push(...validate(schema.items, item, `${path}[${i}]`)));
      return errors;
    }
    case "object": {
      if (!isObject(value)) return [`${path}: must be an object`];
      const properties = schema.properties ?? {};
      // Own members only: `"__proto__" in {}` and `{}.constructor` are true, which would let a body's
      // `__proto__`, `constructor` or `toString` pass as a known property (or an absent one look present).
      const member = (name: string): unknown => (Object.hasOwn(value, name) ? value[name] : undefined);
      for (const name of schema.required ?? []) {
        if (member(name) === undefined) errors.push(`${path}.${name}: is required`);
      }
      for (const [name, sub] of Object.entries(properties)) {
        if (member(name) !== undefined) errors.push(...validate(sub, member(name), `${path}.${name}`));
      }
      for (const [name, v] of Object.entries(value)) {
        if (Object.hasOwn(properties, name)) continue;
        if (schema.additionalProperties === false) errors.push(`${path}.${name}: unknown property`);
        else if (isObject(schema.additionalProperties) || (typeof schema.additionalProperties === "object" && schema.additionalProperties !== null)) {
          errors.push(...validate(schema.additionalProperties as Schema, v, `${path}.${name}`));
        }
      }
      return errors;
    }
  }
}
