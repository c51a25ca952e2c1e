// Shared by the build e2e tests: copy a fixture to a temp dir, run the real `svc` binary, extract artifacts
// with the system tar, and run code in plain `node` processes.
import { execFile, execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = resolve(fileURLToPath(new URL("../..", import.meta.url)));
export const BIN = join(REPO, "bin", "svc.js");

export function requireCompiled(): void {
  if (!existsSync(join(REPO, "dist", "cli", "main.js")) || !existsSync(join(REPO, "dist", "build", "index.js"))) {
    throw new Error("svc is not compiled: run `npx tsc -p tsconfig.build.json` first");
  }
}

const temps: string[] = [];
export function tempDir(prefix = "svc-build-e2e-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}
export function cleanupTemps(): void {
  for (const dir of temps.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** A fresh copy of fixtures/<name> in a temp dir. */
export function copyFixture(name: string): string {
  const dir = join(tempDir(), name);
  cpSync(join(REPO, "fixtures", name), dir, { recursive: true });
  return dir;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function svc(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<RunResult> {
  return new Promise((resolvePromise) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: options.cwd ?? REPO, env: { ...process.env, NO_COLOR: "1", ...options.env }, maxBuffer: 32 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolvePromise({ code, stdout, stderr });
      },
    );
  });
}

export function extract(artifact: string): string {
  const dir = tempDir("svc-extract-");
  execFileSync("tar", ["-xzf", artifact, "-C", dir]);
  return dir;
}

export function tarListing(artifact: string): string[] {
  return execFileSync("tar", ["-tzf", artifact], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
    .trim()
    .split("\n");
}

/** Run an ES module script in a plain node process (cwd: `dir`) and return its stdout. */
export function runNode(dir: string, script: string): string {
  return execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: dir, encoding: "utf8" });
}
