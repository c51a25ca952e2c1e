// `svc init` writes a starter that type-checks and builds.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cleanupTemps, extract, REPO, requireCompiled, runNode, svc, tempDir } from "./harness.js";
import { SVC_VERSION } from "../../src/version.js";

beforeAll(requireCompiled);
afterAll(cleanupTemps);

const STARTER_FILES = [
  ".env.example",
  ".gitignore",
  "README.md",
  "package.json",
  "scripts/call.ts",
  "src/api.ts",
  "src/embedder.ts",
  "src/gpu.ts",
  "src/llm.ts",
  "tsconfig.json",
  "weights.json",
];

describe("svc init", () => {
  let app: string;
  beforeAll(async () => {
    app = join(tempDir(), "My App");
    const result = await svc(["init", app, "--json"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout).files.sort()).toEqual(STARTER_FILES);
  });

  it("writes a portable package: the SDK as a dependency, the CLI as a dev dependency, both by version range", () => {
    const pkg = JSON.parse(readFileSync(join(app, "package.json"), "utf8"));
    expect(pkg.name).toBe("my-app");
    expect(pkg.type).toBe("module");
    expect(pkg.dependencies.svc).toBe(`^${SVC_VERSION}`);
    expect(pkg.devDependencies["svc-cli"]).toBe(`^${SVC_VERSION}`);
    // No path of this machine anywhere: every dependency is a semver range another machine can install.
    for (const range of Object.values({ ...pkg.dependencies, ...pkg.devDependencies }) as string[]) expect(range).toMatch(/^[\^~]?\d+\.\d+\.\d+$/);
    expect(readFileSync(join(app, "package.json"), "utf8")).not.toContain(REPO);
    expect(pkg.scripts.build).toBe("svc build");
    expect(readFileSync(join(app, ".env.example"), "utf8")).toMatch(/^SVC_API_KEY=$/m);
    expect(readFileSync(join(app, ".gitignore"), "utf8")).toMatch(/^\.svc\/$/m);
    expect(readFileSync(join(app, "README.md"), "utf8")).toContain("# my-app");
  });

  it("names the templates when asked for one that does not exist", async () => {
    const result = await svc(["init", join(tempDir(), "x"), "--template", "nope"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('There is no template "nope"');
    expect(result.stderr).toContain("starter, textgen");
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it("refuses to overwrite existing files without --force", async () => {
    writeFileSync(join(app, "src/gpu.ts"), "// mine\n");
    const refused = await svc(["init", app]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("file(s) of the starter template already exist");
    expect(refused.stderr).toContain("  - src/gpu.ts");
    expect(refused.stderr).toContain("--force");
    expect(readFileSync(join(app, "src/gpu.ts"), "utf8")).toBe("// mine\n");
    const forced = await svc(["init", app, "--force"]);
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain("Created a svc project in");
    // A plain `npm install` fails today (no svc-cli on the npm registry; its `svc` is another package): the next
    // steps say where the two packages come from.
    // By the real paths of the checkout this svc runs from, not a placeholder to fill in.
    expect(forced.stdout).toContain(`npm install ${join(REPO, `svc-${SVC_VERSION}.tgz`)} ${join(REPO, `svc-cli-${SVC_VERSION}.tgz`)}`);
    expect(forced.stdout).toContain(
      `svc and svc-cli are not on the npm registry yet: make the two tarballs first with \`cd ${REPO} && npm pack -w svc && npm pack\``,
    );
    expect(forced.stdout).not.toContain("<svc checkout>");
    expect(readFileSync(join(app, "src/gpu.ts"), "utf8")).toContain("Endpoint(");
  });

  it("type-checks with the real TypeScript compiler against the svc SDK", () => {
    // What `npm install` would give it, without the network: this svc and @types/node.
    mkdirSync(join(app, "node_modules/@types"), { recursive: true });
    symlinkSync(join(REPO, "packages/svc"), join(app, "node_modules/svc"));
    symlinkSync(join(REPO, "node_modules/@types/node"), join(app, "node_modules/@types/node"));
    const tsc = join(REPO, "node_modules/typescript/bin/tsc");
    expect(() => execFileSync(process.execPath, [tsc, "-p", app], { encoding: "utf8" })).not.toThrow();
  });

  it("builds, and its endpoints answer from the artifact", async () => {
    const result = await svc(["build", "--json"], { cwd: app });
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.stdout);
    expect(summary.endpoints.map((e: { name: string; type: string }) => `${e.name}:${e.type}`)).toEqual([
      "api:lb",
      "embedder:queue",
      "gpu-worker:queue",
      "llm:queue",
    ]);
    const root = extract(summary.artifactPath);
    const output = runNode(
      root,
      `
      const ctx = { jobId: "j", signal: new AbortController().signal };
      const load = async (n) => { const h = (await import("./endpoints/" + n + "/handler.mjs")).default; await h.init(); return h; };
      const chunks = [];
      for await (const c of (await load("llm")).invoke("tokens", { prompt: "hi there" }, ctx).stream) chunks.push(c);
      const embed = await (await load("embedder")).invoke("embed", { text: "abc" }, ctx).value;
      console.log(JSON.stringify({
        upscale: await (await load("gpu-worker")).invoke("upscale", { url: "u" }, ctx).value,
        chunks, dims: embed.vector.length,
        routes: (await load("api")).routes.map((r) => r.method + " " + r.path),
      }));`,
    );
    expect(JSON.parse(output)).toEqual({
      upscale: { url: "u", factor: 2, width: 1024, height: 1024 },
      chunks: [{ text: "HI" }, { text: "THERE" }],
      dims: 8,
      routes: ["POST /process", "GET /status"],
    });
  });
});
