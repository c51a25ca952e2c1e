// The deployment manifest, computed from discovery (pure) and serialized with a stable key order so that the
// same sources give byte-identical files.

import { existsSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { type FunctionKind, type Manifest, MANIFEST_VERSION, type ManifestFunction, type ManifestResource, type NormalizedConfig } from "svc/internal";
import { SVC_VERSION } from "../version.js";

/** What the manifest needs from a discovered endpoint (a structural subset of DiscoveredEndpoint). */
export interface ManifestEndpoint {
  name: string;
  type: "queue" | "lb";
  config: NormalizedConfig;
  functions: ReadonlyArray<{ name: string; exportName: string; module: string; kind: FunctionKind; className?: string; exampleInput?: unknown }>;
  /** Load-balanced endpoints; `loc.file` is the module the route is added in. */
  routes: ReadonlyArray<{ method: string; path: string; name: string; loc?: { file: string } }>;
  /** Load-balanced endpoints: where the Endpoint(...) object serving the routes is exported. */
  lbExport?: { module: string; exportName: string };
}

export interface ManifestInput {
  app: string;
  fingerprint: string;
  endpoints: readonly ManifestEndpoint[];
  /** Per endpoint: the package specs installed into its folder of the artifact. */
  dependencies: Record<string, readonly string[]>;
  excluded: readonly string[];
  svcVersion?: string;
  /** Per endpoint: sha256 of its bundled code (handler and source map), see ManifestResource.codeHash. */
  codeHashes?: Record<string, string>;
}

/** Handler bundle of an endpoint inside the artifact. */
export function handlerPath(endpoint: string): string {
  return `endpoints/${endpoint}/handler.mjs`;
}

export function imageNameFor(computeType: "GPU" | "CPU", version = SVC_VERSION): string {
  return `svc-worker-${computeType === "GPU" ? "gpu" : "cpu"}:${version}`;
}

/** The app's name: package.json "name" without its scope, else the project directory's name. */
export function appNameOf(root: string): string {
  const file = join(root, "package.json");
  if (existsSync(file)) {
    try {
      const name = (JSON.parse(readFileSync(file, "utf8")) as { name?: unknown }).name;
      if (typeof name === "string" && name.length > 0) return name.replace(/^@[^/]+\//, "");
    } catch {
      // An unreadable package.json is reported elsewhere (npm, discovery); the directory name still works.
    }
  }
  return basename(root.replace(/[\\/]+$/, ""));
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function manifestFunction(f: ManifestEndpoint["functions"][number]): ManifestFunction {
  const out: ManifestFunction = { name: f.name, module: f.module, export: f.exportName, kind: f.kind };
  if (f.className !== undefined) out.class = f.className;
  if (f.exampleInput !== undefined) out.exampleInput = f.exampleInput;
  return out;
}

/**
 * The functions an endpoint serves: a queue endpoint's functions, or the handlers of a load-balanced endpoint's
 * routes (the names `routes.<name>` maps to; the spec's `functions` lists "functions served" either way), by name.
 */
function servedFunctions(endpoint: ManifestEndpoint): ManifestFunction[] {
  if (endpoint.type !== "lb") return endpoint.functions.map(manifestFunction);
  return endpoint.routes
    .map((r) => ({
      name: r.name,
      module: r.loc?.file ?? endpoint.lbExport?.module ?? "",
      export: endpoint.lbExport?.exportName ?? "",
      kind: "function" as const,
    }))
    .sort((a, b) => byString(a.name, b.name));
}

function resourceOf(endpoint: ManifestEndpoint, dependencies: readonly string[], version: string, codeHash?: string): ManifestResource {
  const c = endpoint.config;
  const env: Record<string, string> = {};
  for (const key of Object.keys(c.env).sort(byString)) env[key] = c.env[key]!;
  const image = c.image;
  return {
    is_load_balanced: endpoint.type === "lb",
    imageName: image ?? imageNameFor(c.computeType, version),
    workersMin: c.workersMin,
    workersMax: c.workersMax,
    gpuIds: c.gpuTypeIds.join(","),
    env,
    functions: servedFunctions(endpoint),
    computeType: c.computeType,
    gpuTypeIds: [...c.gpuTypeIds],
    gpuCount: c.gpuCount,
    instanceIds: [...c.instanceIds],
    dependencies: [...dependencies],
    idleTimeout: c.idleTimeout,
    executionTimeoutMs: c.executionTimeoutMs,
    maxConcurrency: c.maxConcurrency,
    retries: c.retries,
    ...(c.retryBackoff ? { retryBackoff: { ...c.retryBackoff } } : {}),
    volume: c.volume,
    ...(c.secrets.length > 0 ? { secrets: [...c.secrets] } : {}),
    ...(codeHash ? { codeHash } : {}),
    ...(c.snapshot ? { snapshot: true } : {}),
    ...(c.openaiPassthrough ? { openaiPassthrough: true } : {}),
    ...(c.largeOutputBytes !== undefined ? { largeOutputBytes: c.largeOutputBytes } : {}),
    ...(c.models.length > 0 ? { models: [...c.models] } : {}),
    ...(c.scaler ? { scaler: { type: c.scaler.type, value: c.scaler.value } } : {}),
    // An image endpoint: its container runs the jobs with the provider's protocol; no code of the app is its.
    ...(image !== undefined ? { protocol: "provider" as const } : {}),
    ...(c.shmSizeMb !== undefined ? { shmSizeMb: c.shmSizeMb } : {}),
    ...(c.containerDiskInGb !== undefined ? { containerDiskInGb: c.containerDiskInGb } : {}),
    handler: image !== undefined ? "" : handlerPath(endpoint.name),
  };
}

export function buildManifest(input: ManifestInput): Manifest {
  const endpoints = [...input.endpoints].sort((a, b) => byString(a.name, b.name));
  const version = input.svcVersion ?? SVC_VERSION;
  const resources: Record<string, ManifestResource> = {};
  const routes: Record<string, Record<string, string>> = {};
  for (const endpoint of endpoints) {
    resources[endpoint.name] = resourceOf(endpoint, input.dependencies[endpoint.name] ?? [], version, input.codeHashes?.[endpoint.name]);
    if (endpoint.type === "lb") {
      const table: Record<string, string> = {};
      const keyed = endpoint.routes.map((r) => [`${r.method.toUpperCase()} ${r.path}`, r.name] as const);
      for (const [key, name] of [...keyed].sort((a, b) => byString(a[0], b[0]))) table[key] = name;
      routes[endpoint.name] = table;
    }
  }
  return {
    version: MANIFEST_VERSION,
    app: input.app,
    fingerprint: input.fingerprint,
    svcVersion: version,
    resources,
    routes,
    excluded: [...input.excluded].sort(byString),
  };
}

/** The manifest file's exact bytes: two-space JSON and a final newline. Key order is fixed by buildManifest. */
export function serializeManifest(manifest: Manifest): string {
  return `${JSON.stringify(manifest, null, 2)}\n`;
}
