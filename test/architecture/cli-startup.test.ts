// Every `svc` command starts by building the whole command tree. The heavy parts behind some commands (the
// TypeScript compiler for discovery, the Docker client, the service with its store drivers and metrics) load when
// a command uses them, so that `svc run`, `svc jobs` or `svc --version` do not pay for them. Needs `dist/`.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const repo = fileURLToPath(new URL("../..", import.meta.url));

/** The packages among `watched` that are loaded once the CLI's command tree is built (nothing run). */
function loadedByCommandTree(watched: string[]): string[] {
  const script = `
    import { createRequire } from "node:module";
    const { buildProgram } = await import(${JSON.stringify(`${repo}dist/cli/main.js`)});
    buildProgram();
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    const watched = ${JSON.stringify(watched)};
    console.log(JSON.stringify(watched.filter((p) => loaded.some((f) => f.includes(\`/node_modules/\${p}/\`)))));
  `;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: repo, encoding: "utf8" });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as string[];
}

describe("the CLI's start", () => {
  it("loads neither the TypeScript compiler, nor the Docker client, nor the service's store drivers and metrics", () => {
    expect(loadedByCommandTree(["typescript", "dockerode", "pg", "prom-client", "ssh2"])).toEqual([]);
  });

  it("sees a package it does load (the check itself works)", () => {
    expect(loadedByCommandTree(["commander"])).toEqual(["commander"]);
  });
});
