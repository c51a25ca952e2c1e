// Every `svc` command starts by building its command tree (its own command's module, or every one for help). The heavy parts behind some commands (the
// TypeScript compiler for discovery, the Docker client, the service with its store drivers and metrics, execa,
// fast-glob, the spinner) load when a command uses them, so that `svc run`, `svc jobs` or `svc --version` do not
// pay for them (docs/design/0019-cli-loads-on-use.md). Needs `dist/`.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const repo = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The packages among `watched` that are loaded once the CLI's command tree is built (nothing run): ES modules as
 * a resolve hook sees them, CommonJS ones in require's cache.
 */
function loadedByCommandTree(watched: string[], argv?: string[]): string[] {
  const dir = mkdtempSync(join(tmpdir(), "svc-cli-startup-"));
  try {
    const resolvedLog = join(dir, "resolved.txt");
    const hooks = `
      import { appendFileSync } from "node:fs";
      export async function resolve(specifier, context, next) {
        const resolved = await next(specifier, context);
        appendFileSync(${JSON.stringify(resolvedLog)}, resolved.url + "\\n");
        return resolved;
      }`;
    const script = `
      import { createRequire, register } from "node:module";
      import { appendFileSync } from "node:fs";
      register("data:text/javascript," + encodeURIComponent(${JSON.stringify(hooks)}));
      const { buildProgram } = await import(${JSON.stringify(`${repo}dist/cli/main.js`)});
      await buildProgram(${argv === undefined ? "" : JSON.stringify(argv)});
      appendFileSync(${JSON.stringify(resolvedLog)}, Object.keys(createRequire(import.meta.url).cache).join("\\n") + "\\n");
    `;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: repo, encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    const loaded = readFileSync(resolvedLog, "utf8").split("\n");
    return watched.filter((p) => loaded.some((f) => f.includes(`/node_modules/${p}/`)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("the CLI's start", () => {
  it("loads neither the TypeScript compiler, the Docker client, the service's store drivers and metrics, execa, fast-glob nor the spinner", () => {
    expect(loadedByCommandTree(["typescript", "dockerode", "pg", "prom-client", "ssh2", "better-sqlite3", "execa", "fast-glob", "ora"])).toEqual([]);
  });

  it("loads only the module of the command it runs: `svc run` loads neither the bundler nor the artifact packer", () => {
    expect(loadedByCommandTree(["esbuild", "tar-stream", "commander"], ["run", "hello"])).toEqual(["commander"]);
    expect(loadedByCommandTree(["esbuild", "tar-stream"], ["--version"])).toEqual([]);
  });

  it("sees a package it does load, CommonJS or an ES module (the check itself works)", () => {
    expect(loadedByCommandTree(["commander", "picocolors", "tar-stream"])).toEqual(["commander", "picocolors", "tar-stream"]);
  });
});
