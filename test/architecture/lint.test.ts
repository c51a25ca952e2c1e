// The formatter and linter `npm test` runs (Biome, biome.json): each rule the project relies on refuses a planted
// violation and a clean file passes (`npm test` runs `biome ci` on the tree itself).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const biome = join(repo, "node_modules", ".bin", "biome");
let dir: string;

/** Biome on `files` planted in a scratch directory, with the project's configuration (its includes widened to them). */
function run(command: "lint" | "format", files: Record<string, string>): { code: number | null; output: string } {
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const r = spawnSync(biome, [command, "--config-path", dir, ...Object.keys(files).map((f) => join(dir, f))], { encoding: "utf8" });
  return { code: r.status, output: `${r.stdout}${r.stderr}` };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "svc-lint-"));
  const config = JSON.parse(readFileSync(join(repo, "biome.json"), "utf8"));
  delete config.$schema;
  config.vcs = { enabled: false };
  config.files = { includes: ["**"] };
  config.plugins = (config.plugins as string[]).map((p) => join(repo, p));
  writeFileSync(join(dir, "biome.json"), JSON.stringify(config));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the linter", () => {
  it("refuses a cast of a caught error", () => {
    const r = run("lint", { "cast.ts": "export function f(err: unknown) {\n  return (err as Error).message;\n}\n" });
    expect(r.code).toBe(1);
    expect(r.output).toContain("Cast of a caught error");
  });

  it("refuses a floating promise", () => {
    const r = run("lint", { "floating.ts": "async function f() {}\nexport function g() {\n  f();\n}\n" });
    expect(r.code).toBe(1);
    expect(r.output).toContain("noFloatingPromises");
  });

  it("refuses unused imports and variables", () => {
    const r = run("lint", { "unused.ts": 'import { join } from "node:path";\nexport function g() {\n  const never = 1;\n  return 2;\n}\n' });
    expect(r.code).toBe(1);
    expect(r.output).toContain("noUnusedImports");
    expect(r.output).toContain("noUnusedVariables");
  });

  it("passes a clean file", () => {
    const r = run("lint", { "clean.ts": 'import { errorMessage } from "./errors.js";\nexport function f(err: unknown) {\n  return errorMessage(err);\n}\n' });
    expect(r.code).toBe(0);
  });
});

describe("the formatter", () => {
  it("refuses a file not formatted as the project formats, and passes one that is", () => {
    expect(run("format", { "messy.ts": "export const x = {a:1}\n" }).code).toBe(1);
    expect(run("format", { "tidy.ts": "export const x = { a: 1 };\n" }).code).toBe(0);
  });
});
