// Long-running commands (`svc dev --json`, `svc deploy --preview --json`) print one JSON object on stdout once
// they are ready, then keep running: read that object, or fail with what the command said on stderr. And
// short commands run without blocking the test's own process.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";

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
