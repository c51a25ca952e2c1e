import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { configProblems, normalizeConfig } from "svc/internal";
import { appNameOf, buildManifest, imageNameFor, serializeManifest, type ManifestEndpoint } from "./manifest.js";

const gpu: ManifestEndpoint = {
  name: "gpu-worker",
  type: "queue",
  config: normalizeConfig({ name: "gpu-worker", gpu: ["ADA_24", "AMPERE_48"], workers: [1, 4], env: { Z: "1", A: "2" }, retries: 2 }),
  functions: [
    { name: "upscale", exportName: "upscale", module: "src/gpu.ts", kind: "function" },
    { name: "embed", exportName: "Embedder", module: "src/gpu.ts", kind: "method", className: "Embedder" },
  ],
  routes: [],
};
const api: ManifestEndpoint = {
  name: "api",
  type: "lb",
  config: normalizeConfig({ name: "api", cpu: "cpu5c-2-4", workers: 2 }),
  functions: [],
  routes: [
    { method: "POST", path: "/process", name: "process", loc: { file: "src/api.ts" } },
    { method: "GET", path: "/status", name: "status", loc: { file: "src/status.ts" } },
  ],
  lbExport: { module: "src/api.ts", exportName: "api" },
};

describe("buildManifest", () => {
  const manifest = buildManifest({
    app: "demo",
    fingerprint: "sha256:abc",
    endpoints: [gpu, api],
    dependencies: { "gpu-worker": ["sharp@^0.34"] },
    excluded: ["torch", "numpy"],
    svcVersion: "9.9.9",
  });

  it("has every spec field per resource, then svc's own", () => {
    expect(Object.keys(manifest)).toEqual(["version", "app", "fingerprint", "svcVersion", "resources", "routes", "excluded"]);
    expect(Object.keys(manifest.resources)).toEqual(["api", "gpu-worker"]);
    expect(manifest.resources["gpu-worker"]).toEqual({
      is_load_balanced: false,
      imageName: "svc-worker-gpu:9.9.9",
      workersMin: 1,
      workersMax: 4,
      gpuIds: "ADA_24,AMPERE_48",
      env: { A: "2", Z: "1" },
      functions: [
        { name: "upscale", module: "src/gpu.ts", export: "upscale", kind: "function" },
        { name: "embed", module: "src/gpu.ts", export: "Embedder", kind: "method", class: "Embedder" },
      ],
      computeType: "GPU",
      gpuTypeIds: ["ADA_24", "AMPERE_48"],
      gpuCount: 1,
      instanceIds: [],
      dependencies: ["sharp@^0.34"],
      idleTimeout: 60,
      executionTimeoutMs: 600_000,
      maxConcurrency: 1,
      retries: 2,
      volume: null,
      handler: "endpoints/gpu-worker/handler.mjs",
    });
    expect(Object.keys(manifest.resources["gpu-worker"]!).slice(0, 7)).toEqual([
      "is_load_balanced",
      "imageName",
      "workersMin",
      "workersMax",
      "gpuIds",
      "env",
      "functions",
    ]);
    expect(manifest.resources.api).toMatchObject({
      is_load_balanced: true,
      imageName: "svc-worker-cpu:9.9.9",
      gpuIds: "",
      workersMin: 0,
      workersMax: 2,
      instanceIds: ["cpu5c-2-4"],
      gpuCount: 0,
    });
  });

  it("routes load-balanced endpoints only, keyed by METHOD /path", () => {
    expect(manifest.routes).toEqual({ api: { "GET /status": "status", "POST /process": "process" } });
    expect(manifest.excluded).toEqual(["numpy", "torch"]);
  });

  it("lists a load-balanced endpoint's route handlers as the functions it serves", () => {
    // module: where the route is added; export: the Endpoint object serving it.
    expect(manifest.resources.api!.functions).toEqual([
      { name: "process", module: "src/api.ts", export: "api", kind: "function" },
      { name: "status", module: "src/status.ts", export: "api", kind: "function" },
    ]);
    expect(manifest.resources.api!.functions.map((f) => f.name)).toEqual(Object.values(manifest.routes.api!).sort());
  });

  it("serializes to the same bytes whatever the input order", () => {
    const again = buildManifest({
      app: "demo",
      fingerprint: "sha256:abc",
      endpoints: [api, gpu],
      dependencies: { "gpu-worker": ["sharp@^0.34"] },
      excluded: ["numpy", "torch"],
      svcVersion: "9.9.9",
    });
    expect(serializeManifest(again)).toBe(serializeManifest(manifest));
    expect(serializeManifest(manifest).endsWith("}\n")).toBe(true);
  });

  it("names images and apps", () => {
    expect(imageNameFor("CPU", "1.0.0")).toBe("svc-worker-cpu:1.0.0");
    const root = mkdtempSync(join(tmpdir(), "svc-app-"));
    try {
      mkdirSync(join(root, "my-dir"));
      expect(appNameOf(join(root, "my-dir"))).toBe("my-dir");
      writeFileSync(join(root, "my-dir", "package.json"), '{"name":"@acme/shop"}');
      expect(appNameOf(join(root, "my-dir"))).toBe("shop");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("snapshot (docs/cold-start.md)", () => {
  const manifestOf = (config: Parameters<typeof normalizeConfig>[0]) =>
    buildManifest({
      app: "demo",
      fingerprint: "sha256:abc",
      endpoints: [{ name: config.name, type: "queue", config: normalizeConfig(config), functions: [], routes: [] }],
      dependencies: {},
      excluded: [],
      svcVersion: "9.9.9",
    });

  it("is in the manifest only when an endpoint asks for it", () => {
    expect(manifestOf({ name: "model", snapshot: true }).resources.model!.snapshot).toBe(true);
    expect(Object.keys(manifestOf({ name: "model" }).resources.model!)).not.toContain("snapshot");
    expect(Object.keys(manifestOf({ name: "model", snapshot: false }).resources.model!)).not.toContain("snapshot");
  });

  it("must be true or false", () => {
    expect(configProblems({ name: "model", snapshot: "yes" })).toEqual(['"snapshot" must be true or false']);
    expect(configProblems({ name: "model", snapshot: true })).toEqual([]);
  });
});

describe("gpuCount (docs/gpus.md)", () => {
  const resourceOf = (config: Parameters<typeof normalizeConfig>[0]) =>
    buildManifest({
      app: "demo",
      fingerprint: "sha256:abc",
      endpoints: [{ name: config.name, type: "queue", config: normalizeConfig(config), functions: [], routes: [] }],
      dependencies: {},
      excluded: [],
      svcVersion: "9.9.9",
    }).resources[config.name]!;

  it("is the GPUs each worker gets: as written, 1 by default, 0 for a CPU endpoint", () => {
    expect(resourceOf({ name: "big", gpu: "HOPPER_141", gpuCount: 2 })).toMatchObject({ gpuTypeIds: ["HOPPER_141"], gpuCount: 2 });
    expect(resourceOf({ name: "one", gpu: "HOPPER_141" }).gpuCount).toBe(1);
    expect(resourceOf({ name: "cpu" }).gpuCount).toBe(0);
  });

  it("is a whole number from 1 to 8, on a GPU endpoint only", () => {
    expect(configProblems({ name: "m", gpu: "ANY", gpuCount: 8 })).toEqual([]);
    for (const bad of [0, 9, 1.5, "2"])
      expect(configProblems({ name: "m", gpu: "ANY", gpuCount: bad })).toEqual(['"gpuCount" must be an integer from 1 to 8 (whole GPUs per worker)']);
    expect(configProblems({ name: "m", gpuCount: 2 })).toEqual(['"gpuCount" needs "gpu": it is the number of GPUs of a GPU endpoint\'s workers']);
    expect(configProblems({ name: "m", cpu: "cpu3c-1-2", gpuCount: 2 })).toHaveLength(1);
  });
});

describe("largeOutputBytes (docs/volumes.md, Large outputs)", () => {
  it("is a size in bytes of an endpoint with a network volume, carried into the manifest", () => {
    expect(configProblems({ name: "m", volume: "renders", largeOutputBytes: 1_000_000 })).toEqual([]);
    for (const bad of [0, 1.5, "1000", 64 * 1024 * 1024 + 1])
      expect(configProblems({ name: "m", volume: "renders", largeOutputBytes: bad })).toEqual([
        '"largeOutputBytes" must be an integer from 1 to 67108864 (bytes of output JSON)',
      ]);
    expect(configProblems({ name: "m", largeOutputBytes: 1000 })).toEqual([
      '"largeOutputBytes" needs a network volume ("volume"): large outputs are written there',
    ]);
    const resourceOf = (config: Parameters<typeof normalizeConfig>[0]) =>
      buildManifest({
        app: "demo",
        fingerprint: "sha256:abc",
        endpoints: [{ name: config.name, type: "queue", config: normalizeConfig(config), functions: [], routes: [] }],
        dependencies: {},
        excluded: [],
        svcVersion: "9.9.9",
      }).resources[config.name]!;
    expect(resourceOf({ name: "m", volume: "renders", largeOutputBytes: 2048 })).toMatchObject({ volume: "renders", largeOutputBytes: 2048 });
    expect(resourceOf({ name: "m" })).not.toHaveProperty("largeOutputBytes");
  });
});

describe("scaler (docs/service.md, Scaling policies)", () => {
  const resourceOf = (config: Parameters<typeof normalizeConfig>[0]) =>
    buildManifest({
      app: "demo",
      fingerprint: "sha256:abc",
      endpoints: [{ name: config.name, type: "queue", config: normalizeConfig(config), functions: [], routes: [] }],
      dependencies: {},
      excluded: [],
      svcVersion: "9.9.9",
    }).resources[config.name]!;

  it("is carried into the manifest as written, and absent (the default rule) when not", () => {
    expect(resourceOf({ name: "model", scaler: { type: "QUEUE_DELAY", value: 4 } }).scaler).toEqual({ type: "QUEUE_DELAY", value: 4 });
    expect(resourceOf({ name: "batch", scaler: { type: "REQUEST_COUNT", value: 10 } }).scaler).toEqual({ type: "REQUEST_COUNT", value: 10 });
    expect(Object.keys(resourceOf({ name: "model" }))).not.toContain("scaler");
  });

  it("is a known type with an integer value from 1 to 3600", () => {
    expect(configProblems({ name: "m", scaler: { type: "QUEUE_DELAY", value: 4 } })).toEqual([]);
    expect(configProblems({ name: "m", scaler: { type: "SOON", value: 0 } })).toEqual([
      '"scaler.type" must be one of QUEUE_DELAY, REQUEST_COUNT',
      '"scaler.value" must be an integer from 1 to 3600 (QUEUE_DELAY: seconds a job waits; REQUEST_COUNT: jobs per worker)',
    ]);
    expect(configProblems({ name: "m", scaler: "QUEUE_DELAY" })).toEqual(['"scaler" must be { type: "QUEUE_DELAY" | "REQUEST_COUNT", value: <integer> }']);
    expect(configProblems({ name: "m", scaler: { type: "REQUEST_COUNT", value: 2, every: 1 } })).toEqual([
      '"scaler" has an unknown key "every" (known keys: type, value)',
    ]);
  });
});

describe("retryBackoff (docs/job-api.md, Retries)", () => {
  const resourceOf = (config: Parameters<typeof normalizeConfig>[0]) =>
    buildManifest({
      app: "demo",
      fingerprint: "sha256:abc",
      endpoints: [{ name: config.name, type: "queue", config: normalizeConfig(config), functions: [], routes: [] }],
      dependencies: {},
      excluded: [],
      svcVersion: "9.9.9",
    }).resources[config.name]!;

  it("is carried into the manifest in ms, defaults filled in, and absent (1 s doubling to 60 s) when not set", () => {
    expect(resourceOf({ name: "m", retries: 3, retryBackoff: { base: 0.5, factor: 3, max: 20 } }).retryBackoff).toEqual({
      baseMs: 500,
      factor: 3,
      maxMs: 20_000,
    });
    expect(resourceOf({ name: "m", retryBackoff: { base: 2 } }).retryBackoff).toEqual({ baseMs: 2_000, factor: 2, maxMs: 60_000 });
    expect(resourceOf({ name: "m", retryBackoff: { base: 120 } }).retryBackoff).toEqual({ baseMs: 120_000, factor: 2, maxMs: 120_000 });
    expect(Object.keys(resourceOf({ name: "m" }))).not.toContain("retryBackoff");
  });

  it("takes numbers of seconds within bounds and names what is wrong", () => {
    expect(configProblems({ name: "m", retryBackoff: { base: 0, factor: 1, max: 0 } })).toEqual([]);
    expect(configProblems({ name: "m", retryBackoff: { base: -1, factor: 0.5, max: "1m" } })).toEqual([
      '"retryBackoff.base" must be a number from 0 to 3600 (seconds the first retry waits at most)',
      '"retryBackoff.factor" must be a number from 1 to 10 (how much longer each next retry may wait)',
      '"retryBackoff.max" must be a number from 0 to 3600 (seconds any retry waits at most)',
    ]);
    expect(configProblems({ name: "m", retryBackoff: { base: 10, max: 5 } })).toEqual(['"retryBackoff.max" (5) must be at least its base (10)']);
    expect(configProblems({ name: "m", retryBackoff: { jitter: false } })).toEqual([
      '"retryBackoff" has an unknown key "jitter" (known keys: base, factor, max)',
    ]);
    expect(configProblems({ name: "m", retryBackoff: 5 })).toEqual(['"retryBackoff" must be { base?, factor?, max? } (seconds)']);
  });
});
