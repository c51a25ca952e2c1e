// Long-running commands (`svc dev --json`, `svc deploy --preview --json`) print one JSON object on stdout once
// they are ready, then keep running: read that object, or fail with what the command said on stderr.

import type { ChildProcessWithoutNullStreams } from "node:child_process";

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
