// Long-running commands (`svc dev --json`, `svc deploy --preview --json`) print one JSON object on stdout once
// they are ready, then keep running: read that object, or fail with what the command said on stderr. And
// short commands run without blocking the test's own process.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { startTestService, type TestService } from "./service/helpers.js";

/** The compiled CLI, as users run it. */
export const SVC_BIN = fileURLToPath(new URL("../bin/svc.js", import.meta.url));

export function firstJsonOnStdout<T>(child: ChildProcessWithoutNullStreams, what: string, timeoutMs: number, stderr: () => string): Promise<T> {
  let stdout = "";
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not become ready:\n${stderr()}`)), timeoutMs);
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      try {
        const parsed = JSON.parse(stdout) as T;
        clearTimeout(timer);
        resolve(parsed);
      } catch {
        // not complete yet
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited ${code}:\n${stderr()}`));
    });
  });
}

/**
 * Run a program to its end without blocking this process (a service started by the test keeps answering),
 * writing `input` to its stdin when given; its exit code and output.
 */
export function runProgram(
  file: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; input?: string },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd: opts.cwd, env: opts.env, stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d) => (stdout += d.toString()));
    child.stderr!.on("data", (d) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    if (opts.input !== undefined) child.stdin!.end(opts.input);
  });
}

/**
 * For a test file that drives the CLI against a real service: the service and a scratch working directory
 * (started before the file's tests, removed after), the environment to run the CLI with (this process's SVC_*
 * settings and CI left out, NO_COLOR set, the service's URL and admin key, then `extra`), and `svc` running
 * node bin/svc.js with it.
 */
export function cliAgainstTestService(cwdPrefix: string) {
  let service: TestService | undefined;
  let dir: string | undefined;
  beforeAll(async () => {
    service = await startTestService();
    dir = mkdtempSync(join(tmpdir(), cwdPrefix));
  });
  afterAll(async () => {
    await service?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const env = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
    const base: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" };
    for (const k of Object.keys(base)) if (k.startsWith("SVC_") || k === "CI") delete base[k];
    return { ...base, SVC_API_URL: service!.service.url, SVC_API_KEY: service!.key, ...extra };
  };
  return {
    get t(): TestService {
      return service!;
    },
    get cwd(): string {
      return dir!;
    },
    env,
    /** Run `file` (node bin/svc.js by default is `svc`) with the CLI's environment, in the scratch directory. */
    run: (file: string, args: string[], extra: Record<string, string> = {}, input?: string) => runProgram(file, args, { cwd: dir!, env: env(extra), input }),
    svc: (args: string[], extra: Record<string, string> = {}, input?: string) =>
      runProgram(process.execPath, [SVC_BIN, ...args], { cwd: dir!, env: env(extra), input }),
  };
}
