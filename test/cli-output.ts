// Long-running commands (`svc dev --json`, `svc deploy --preview --json`) print one JSON object on stdout once
// they are ready, then keep running: read that object, or fail with what the command said on stderr. And
// short commands run without blocking the test's own process, as the binary or as the CLI's entry point in this
// process.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { startTestService, type TestService } from "./service/helpers.js";

/** The compiled CLI, as users run it. */
export const SVC_BIN = fileURLToPath(new URL("../bin/svc.js", import.meta.url));

/**
 * PATH with a `criu` whose `check` fails at once (test/fakes/criu/check-fails) in front of `path`: for `svc doctor`
 * runs that read its other findings. Its snapshots finding comes from a real dry run of CRIU, which on a host
 * where a dump cannot finish waits seconds for the dump to stall (src/drivers/criu.ts); that dry run is tested in
 * src/drivers/criu.test.ts and test/runtime/snapshot.test.ts.
 */
export function pathWithFailingCriu(path = process.env.PATH ?? ""): string {
  return `${fileURLToPath(new URL("./fakes/criu/check-fails", import.meta.url))}${delimiter}${path}`;
}

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

let inProcessQueue: Promise<unknown> = Promise.resolve();

/**
 * The CLI's entry point (src/cli/main.ts, what bin/svc.js runs) called in this process: the same parsing, output
 * and exit code as the binary, without a Node process started and the CLI's modules loaded for each command. For
 * what a command prints and its exit code; what only a process shows (stdin, a terminal, signals, the .env read
 * once per process) needs `runProgram` with SVC_BIN. While it runs, the process's environment is `env`, its
 * working directory `cwd`, and its stdout and stderr are what the command wrote; calls run one at a time.
 */
export function runCliInProcess(
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const run = async () => {
    const { main } = await import("../src/cli/main.js");
    const savedEnv = { ...process.env };
    const savedCwd = process.cwd();
    const writes = { stdout: process.stdout.write, stderr: process.stderr.write };
    const out = { stdout: "", stderr: "" };
    const capture =
      (stream: "stdout" | "stderr") =>
      (chunk: string | Uint8Array, encoding?: unknown, callback?: unknown): boolean => {
        out[stream] += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString();
        const done = typeof encoding === "function" ? encoding : callback;
        if (typeof done === "function") queueMicrotask(() => (done as () => void)());
        return true;
      };
    for (const k of Object.keys(process.env)) delete process.env[k];
    for (const [k, v] of Object.entries(opts.env)) if (v !== undefined) process.env[k] = v;
    process.chdir(opts.cwd);
    process.exitCode = undefined;
    process.stdout.write = capture("stdout") as typeof process.stdout.write;
    process.stderr.write = capture("stderr") as typeof process.stderr.write;
    try {
      const code = await main(args);
      return { code, ...out };
    } finally {
      process.stdout.write = writes.stdout;
      process.stderr.write = writes.stderr;
      process.exitCode = undefined;
      process.chdir(savedCwd);
      for (const k of Object.keys(process.env)) delete process.env[k];
      Object.assign(process.env, savedEnv);
    }
  };
  const result = inProcessQueue.then(run, run);
  inProcessQueue = result.catch(() => undefined);
  return result;
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
    /** The same command through the CLI's entry point in this process (runCliInProcess): no stdin. */
    inProcess: (args: string[], extra: Record<string, string> = {}) => runCliInProcess(args, { cwd: dir!, env: env(extra) }),
  };
}
