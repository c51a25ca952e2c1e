// `svc build` end to end through the real binary, on fixture projects copied to temp dirs.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cleanupTemps, copyFixture, extract, requireCompiled, runNode, svc, tarListing, type RunResult } from "./harness.js";

beforeAll(requireCompiled);
afterAll(cleanupTemps);

describe("svc build on a project with every endpoint form", () => {
  let project: string;
  let first: RunResult;

  beforeAll(async () => {
    project = copyFixture("build-basic");
    first = await svc(["build", "-C", project]);
  });

  it("prints a summary and exits 0", () => {
    expect(first.stderr).not.toMatch(/error/i);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("Built build-basic: 4 endpoint(s)");
    expect(first.stdout).toMatch(/gpu-worker \(queue, gpu ADA_24,AMPERE_48, workers 1-4\)/);
    expect(first.stdout).toContain("functions: count, upscale");
    expect(first.stdout).toContain("functions: tokens");
    expect(first.stdout).toContain("functions: embed");
    expect(first.stdout).toMatch(/api \(load-balanced, cpu cpu3c-1-2, workers 1-3\)/);
    expect(first.stdout).toContain("routes: GET /status, POST /process");
    expect(first.stdout).toContain("Dependencies: none");
    // Nothing is excluded by default (the worker images carry no package a handler can import).
    expect(first.stdout).not.toContain("Excluded");
    expect(first.stdout).toMatch(/Artifact: .*\.svc\/artifact\.tar\.gz \(\d+(\.\d)? kB\)/);
    expect(first.stderr).not.toMatch(/torch|numpy|preinstalled/);
  });

  it("writes a manifest with every spec field", () => {
    const manifest = JSON.parse(readFileSync(join(project, ".svc/svc_manifest.json"), "utf8"));
    expect(manifest.app).toBe("build-basic");
    expect(manifest.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(Object.keys(manifest.resources)).toEqual(["api", "embedder", "gpu-worker", "llm"]);
    expect(manifest.resources["gpu-worker"]).toMatchObject({
      is_load_balanced: false,
      imageName: expect.stringMatching(/^svc-worker-gpu:\d+\.\d+\.\d+/),
      workersMin: 1,
      workersMax: 4,
      gpuIds: "ADA_24,AMPERE_48",
      env: { CACHE_DIR: "/tmp/cache", MODEL: "esrgan" },
      // exampleInput: built from each function's TypeScript input type (for the console's "Try it").
      functions: [
        { name: "count", module: "src/gpu.ts", export: "count", kind: "function", exampleInput: { text: "" } },
        { name: "upscale", module: "src/gpu.ts", export: "upscale", kind: "function", exampleInput: { url: "", factor: 0 } },
      ],
      computeType: "GPU",
      executionTimeoutMs: 120_000,
      maxConcurrency: 2,
      retries: 3,
      handler: "endpoints/gpu-worker/handler.mjs",
    });
    expect(manifest.resources.llm).toMatchObject({ gpuIds: "ANY", dependencies: [], functions: [{ name: "tokens", kind: "generator" }] });
    expect(manifest.resources.embedder).toMatchObject({
      is_load_balanced: false,
      imageName: expect.stringMatching(/^svc-worker-cpu:/),
      gpuIds: "",
      instanceIds: ["cpu5c-2-4"],
      workersMin: 0,
      workersMax: 2,
      env: {},
      functions: [{ name: "embed", module: "src/embedder.ts", export: "Embedder", kind: "method", class: "Embedder", exampleInput: { text: "" } }],
    });
    expect(manifest.resources.api).toMatchObject({
      is_load_balanced: true,
      workersMin: 1,
      workersMax: 3,
      gpuIds: "",
      // the route handlers: what `routes.api` maps to
      functions: [
        { name: "get_status", module: "src/api.ts", export: "api", kind: "function" },
        { name: "post_process", module: "src/api.ts", export: "api", kind: "function" },
      ],
    });
    expect(manifest.routes).toEqual({ api: { "GET /status": "get_status", "POST /process": "post_process" } });
    expect(manifest.excluded).toEqual([]);
    // The artifact carries the same manifest at its root.
    const root = extract(join(project, ".svc/artifact.tar.gz"));
    expect(readFileSync(join(root, "svc_manifest.json"), "utf8")).toBe(readFileSync(join(project, ".svc/svc_manifest.json"), "utf8"));
  });

  it("removes .svc/.build and packs one handler per endpoint", () => {
    const listing = tarListing(join(project, ".svc/artifact.tar.gz"));
    expect(listing).toEqual(
      expect.arrayContaining([
        "endpoints/",
        "endpoints/api/handler.mjs",
        "endpoints/api/handler.mjs.map",
        "endpoints/embedder/handler.mjs",
        "endpoints/gpu-worker/handler.mjs",
        "endpoints/llm/handler.mjs",
        "svc_manifest.json",
      ]),
    );
    expect(listing.filter((name) => name.includes("node_modules"))).toEqual([]);
    expect(() => readFileSync(join(project, ".svc/.build/handlers/api.ts"))).toThrow();
  });

  it("gives handlers that run in a plain node process: functions answer, generators stream, classes and routes work", () => {
    const root = extract(join(project, ".svc/artifact.tar.gz"));
    const script = `
      const ctx = { jobId: "job-1", signal: new AbortController().signal };
      const load = async (name) => { const h = (await import("./endpoints/" + name + "/handler.mjs")).default; await h.init(); return h; };
      const gpu = await load("gpu-worker");
      const up = gpu.invoke("upscale", { url: "u", factor: 3 }, ctx);
      const counted = gpu.invoke("count", { text: "a b  c" }, ctx);
      const llm = await load("llm");
      const stream = llm.invoke(undefined, { prompt: "one two three" }, ctx);
      const chunks = [];
      for await (const chunk of stream.stream) chunks.push(chunk);
      const embedder = await load("embedder");
      const api = await load("api");
      const post = api.routes.find((r) => r.method === "POST" && r.path === "/process");
      console.log(JSON.stringify({
        functions: gpu.functionNames, up: await up.value, counted: await counted.value,
        streamKind: stream.kind, chunks,
        embed: await embedder.invoke("embed", { text: "abcd" }, ctx).value,
        routes: api.routes.map((r) => r.method + " " + r.path), posted: await post.handler({ n: 21 }, {}),
      }));`;
    expect(JSON.parse(runNode(root, script))).toEqual({
      functions: ["count", "upscale"],
      up: { url: "u", width: 768 },
      counted: { words: 3 },
      streamKind: "stream",
      chunks: [{ text: "one" }, { text: "two" }, { text: "three" }],
      embed: { vector: [40] },
      routes: ["POST /process", "GET /status"],
      posted: { doubled: 42 },
    });
  });

  it("is deterministic: a clean rebuild gives identical artifact and manifest bytes", async () => {
    const artifact = readFileSync(join(project, ".svc/artifact.tar.gz"));
    const manifest = readFileSync(join(project, ".svc/svc_manifest.json"));
    rmSync(join(project, ".svc"), { recursive: true, force: true });
    const again = await svc(["build", "-C", project]);
    expect(again.code).toBe(0);
    expect(readFileSync(join(project, ".svc/artifact.tar.gz")).equals(artifact)).toBe(true);
    expect(readFileSync(join(project, ".svc/svc_manifest.json")).equals(manifest)).toBe(true);
    // --keep-build writes the intermediate files to disk; the artifact must not change.
    const kept = await svc(["build", "--keep-build", "-C", project]);
    expect(kept.code).toBe(0);
    expect(readFileSync(join(project, ".svc/artifact.tar.gz")).equals(artifact)).toBe(true);
    expect(readFileSync(join(project, ".svc/.build/artifact/endpoints/llm/handler.mjs"), "utf8")).toContain("__defineHandler");
  });

  it("prints the summary as JSON with --json and keeps .svc/.build with --keep-build", async () => {
    const result = await svc(["build", "--json", "--keep-build", "--exclude", "left-pad,zod"], { cwd: project });
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.stdout);
    expect(summary).toMatchObject({
      app: "build-basic",
      artifactPath: join(project, ".svc/artifact.tar.gz"),
      manifestPath: join(project, ".svc/svc_manifest.json"),
      dependencies: [],
      excluded: ["left-pad", "zod"],
    });
    expect(summary.artifactBytes).toBeGreaterThan(1000);
    expect(summary.durationMs).toBeGreaterThan(0);
    expect(summary.endpoints).toContainEqual({ name: "api", type: "lb", functions: [], routes: ["GET /status", "POST /process"], dependencies: [] });
    expect(summary.warnings).toContain("--exclude left-pad matches no dependency or import of any endpoint");
    expect(result.stderr).toContain("warning: --exclude zod matches no dependency or import of any endpoint");
    expect(readFileSync(join(project, ".svc/.build/handlers/gpu-worker.ts"), "utf8")).toContain("__defineHandler");
  });

  it("refuses an artifact over the size limit, naming what is largest", async () => {
    const result = await svc(["build", "-C", project], { env: { SVC_MAX_ARTIFACT_BYTES: "500" } });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/error: The artifact is [\d.]+ kB, over the 500 B limit/);
    expect(result.stderr).toMatch(/endpoints\/\S+\/handler\.mjs \(bundled code\): [\d.]+ kB/);
    expect(result.stderr).toContain("--exclude");
    expect(result.stderr).not.toMatch(/\n\s+at /);
    // No artifact is left that could pass for this build's.
    expect(() => readFileSync(join(project, ".svc/artifact.tar.gz"))).toThrow();
    expect(() => readFileSync(join(project, ".svc/svc_manifest.json"))).toThrow();
  });
});

describe("svc build errors", () => {
  it("reports invalid endpoint definitions with file:line and no stack trace", async () => {
    const project = copyFixture("build-invalid");
    const result = await svc(["build", "-C", project]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/error: Found \d+ problems? in endpoint definitions\n[\s\S]*  - src\/bad\.ts:3: .*must be statically known/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(result.stdout).toBe("");
  });

  it("reports an import that cannot be resolved with file:line", async () => {
    const project = copyFixture("build-empty");
    writeFileSync(
      join(project, "src/fn.ts"),
      'import { Endpoint } from "svc";\nimport { nothing } from "not-installed-anywhere";\n' +
        'export const f = Endpoint({ name: "f" })(async function f() {\n  return nothing;\n});\n',
    );
    const result = await svc(["build", "-C", project]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('error: Could not bundle endpoint "f"');
    expect(result.stderr).toMatch(/ {2}- src\/fn\.ts:2:25: Could not resolve "not-installed-anywhere"/);
    // esbuild's code frame: the line, and a caret under the import's path.
    expect(result.stderr).toContain('\n    2 | import { nothing } from "not-installed-anywhere";\n      |                         ^^^^^^^^^^^^^^^^^^^^^^^^\n');
    expect(result.stderr).toContain("dependencies");
    // svc has no way to mark a path external: the hint names only what svc offers.
    expect(result.stderr).not.toMatch(/external/i);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it("blames a syntax error on the endpoint whose file has it, not on every endpoint, and says what to fix", async () => {
    const project = copyFixture("build-empty");
    writeFileSync(
      join(project, "src/good.ts"),
      'import { Endpoint } from "svc";\nexport const good = Endpoint({ name: "good" })(async function good() {\n  return 1;\n});\n',
    );
    writeFileSync(
      join(project, "src/bad.ts"),
      'import { Endpoint } from "svc";\nexport const bad = Endpoint({ name: "bad" })(async function bad() {\n  return { a: 1 ;\n});\n',
    );
    const result = await svc(["build", "-C", project]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('error: Could not bundle endpoint "bad"\n');
    expect(result.stderr).not.toContain('"good"');
    expect(result.stderr).toMatch(/ {2}- src\/bad\.ts:3:\d+: Expected "}" but found ";"\n {4}3 \|   return \{ a: 1 ;\n {4}  \| {17}\^\n/);
    expect(result.stderr).toContain("Fix the code at the places above");
    expect(result.stderr).not.toContain("Fix the imports");
  });

  it("rejects an unknown GPU type with file:line and the nearest known ids; gpuCount reaches the manifest", async () => {
    const project = copyFixture("build-empty");
    const source = (gpu: string) =>
      'import { Endpoint } from "svc";\nexport const big = Endpoint({\n  name: "big",\n  gpu: ' +
      gpu +
      ",\n  gpuCount: 2,\n})(async function big() {\n  return 1;\n});\n";
    writeFileSync(join(project, "src/big.ts"), source('["HOPPER_141", "H100_80"]'));
    const bad = await svc(["build", "-C", project]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      / {2}- src\/big\.ts:4: invalid endpoint configuration: "gpu" names an unknown GPU type "H100_80": did you mean "ADA_80_PRO", "NVIDIA H100 80GB HBM3"\?/,
    );
    expect(bad.stderr).toContain("docs/gpus.md");
    expect(bad.stderr).not.toMatch(/\n\s+at /);

    writeFileSync(join(project, "src/big.ts"), source('["HOPPER_141", "NVIDIA H100 80GB HBM3", "ANY"]'));
    const good = await svc(["build", "-C", project]);
    expect(good.code, good.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(join(project, ".svc", "svc_manifest.json"), "utf8"));
    expect(manifest.resources.big).toMatchObject({
      gpuIds: "HOPPER_141,NVIDIA H100 80GB HBM3,ANY",
      gpuTypeIds: ["HOPPER_141", "NVIDIA H100 80GB HBM3", "ANY"],
      gpuCount: 2,
    });
  });

  it("says when there are no endpoint functions", async () => {
    const project = copyFixture("build-empty");
    const result = await svc(["build", "-C", project]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/No endpoint functions found/i);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});
