// Builds real artifacts for runtime tests: the build's own handler generator, bundled with the real esbuild
// (alias "svc" -> the compiled SDK), packed with tar-stream in the artifact layout of `svc build`.

import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import tarStream from "tar-stream";
import { REQUIRE_BANNER } from "../../src/build/bundle.js";
import { generateHandlerSource, type HandlerEndpoint } from "../../src/build/handlers.js";
import type { Manifest, ManifestResource } from "svc/internal";

export const REPO = resolve(fileURLToPath(new URL("../..", import.meta.url)));
export const SDK_ENTRY = join(REPO, "packages/svc/dist/index.js");
export const RUNTIME_ENTRY = join(REPO, "dist/runtime/worker.js");
export const FIXTURE = join(REPO, "fixtures/runtime-basic");

const kindOf = (name: string) => (["count", "ticker"].includes(name) ? "generator" : "function") as "generator" | "function";

/** The endpoints of fixtures/runtime-basic, as the build would discover them. */
export const FIXTURE_ENDPOINTS: HandlerEndpoint[] = [
  {
    name: "fns",
    type: "queue",
    functions: ["add", "upper", "fail", "count", "nap", "ticker", "say", "stray"].map((name) => ({
      name,
      exportName: name,
      module: "src/work.ts",
      kind: kindOf(name),
    })),
  },
  { name: "single", type: "queue", functions: [{ name: "echo", exportName: "echo", module: "src/work.ts", kind: "function" }] },
  {
    name: "counter",
    type: "queue",
    functions: ["hit", "hitTwice"].map((name) => ({ name, exportName: "Counter", module: "src/work.ts", kind: "method" as const, className: "Counter" })),
  },
  { name: "api", type: "lb", functions: [], lbExport: { module: "src/work.ts", exportName: "api" } },
];

async function tarGz(files: Array<{ name: string; body: string | Buffer }>): Promise<Buffer> {
  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const chunk of pack) chunks.push(chunk as Buffer);
  })();
  for (const f of files) {
    const body = Buffer.isBuffer(f.body) ? f.body : Buffer.from(f.body);
    await new Promise<void>((res, rej) => pack.entry({ name: f.name, size: body.length, mode: 0o644 }, body, (e) => (e ? rej(e) : res())));
  }
  pack.finalize();
  await collected;
  return gzipSync(Buffer.concat(chunks));
}

/** A CPU resource as `svc build` would write it; `overrides` per endpoint name. */
function resourceFor(endpoint: HandlerEndpoint, handler: string, overrides: Partial<ManifestResource> = {}): ManifestResource {
  return {
    is_load_balanced: endpoint.type === "lb",
    imageName: "svc-node20",
    workersMin: 0,
    workersMax: 1,
    gpuIds: "",
    env: {},
    functions: endpoint.functions.map((f) => ({
      name: f.name,
      module: f.module,
      export: f.exportName,
      kind: f.kind,
      ...(f.className ? { class: f.className } : {}),
    })),
    computeType: "CPU",
    gpuTypeIds: [],
    instanceIds: ["cpu3c-1-2"],
    dependencies: [],
    idleTimeout: 5,
    executionTimeoutMs: 600_000,
    maxConcurrency: 1,
    retries: 0,
    volume: null,
    handler,
    ...overrides,
  };
}

export interface TestArtifact {
  path: string;
  manifest: Manifest;
}

/** Bundle every endpoint of `root` and write `<outFile>` (a .tar.gz) with its manifest. */
export async function buildTestArtifact(
  outFile: string,
  overrides: Record<string, Partial<ManifestResource>> = {},
  root = FIXTURE,
  endpoints = FIXTURE_ENDPOINTS,
): Promise<TestArtifact> {
  const files: Array<{ name: string; body: string | Buffer }> = [];
  const resources: Record<string, ManifestResource> = {};
  for (const endpoint of endpoints) {
    const result = await esbuild.build({
      stdin: { contents: generateHandlerSource(endpoint, "."), resolveDir: root, loader: "ts", sourcefile: `${endpoint.name}.handler.ts` },
      bundle: true,
      write: false,
      platform: "node",
      format: "esm",
      target: "node20",
      alias: { svc: SDK_ENTRY },
      // As the real build: bundled CommonJS (the SDK's dotenv) requires builtins through it.
      banner: { js: REQUIRE_BANNER },
      logLevel: "silent",
      // As the real build: a source map beside the handler, so stacks name the fixture's sources.
      sourcemap: true,
      sourcesContent: false,
      outfile: join(root, "endpoints", endpoint.name, "handler.mjs"),
    });
    const handler = `endpoints/${endpoint.name}/handler.mjs`;
    for (const out of result.outputFiles) files.push({ name: out.path.endsWith(".map") ? `${handler}.map` : handler, body: Buffer.from(out.contents) });
    resources[endpoint.name] = resourceFor(endpoint, handler, overrides[endpoint.name]);
  }
  const manifest: Manifest = {
    version: 1,
    app: "runtime-basic",
    fingerprint: "test",
    svcVersion: "test",
    resources,
    routes: {},
    excluded: [],
  };
  files.unshift({ name: "svc_manifest.json", body: JSON.stringify(manifest, null, 2) });
  await writeFile(outFile, await tarGz(files));
  return { path: outFile, manifest };
}
