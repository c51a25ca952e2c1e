// `svc server` as its own process, as users run it: started with a data directory and an environment (this
// process's SVC_* settings left out), its URL read from stdout, its stderr kept for assertions.

import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("..", import.meta.url));

/**
 * For tests whose workers write a file of the test's on the host (a run counter in /tmp) that the test then
 * reads: a sandboxed worker has a /tmp of its own, so these run their workers unsandboxed, as one tenant.
 */
export const UNSANDBOXED = { SVC_SANDBOX: "none" } as const;

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** Everything the server wrote to stderr so far. */
  log(): string;
  /** SIGTERM, then wait for the exit. */
  stop(): Promise<void>;
}

export async function startServerProcess(opts: { dataDir: string; env?: Record<string, string>; workers?: string; args?: string[] }): Promise<ServerProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];
  const child = spawn(process.execPath, [join(REPO, "bin", "svc.js"), "server", "--port", "0", "--data-dir", opts.dataDir, "--workers", opts.workers ?? "process", ...(opts.args ?? [])], {
    env: { ...env, ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${stderr}`)), 30_000);
    let out = "";
    child.stdout!.on("data", (d) => {
      out += d;
      const line = /^(http:\/\/\S+)\n/.exec(out);
      if (line) {
        clearTimeout(timer);
        resolve(line[1]!);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`svc server exited ${code}:\n${stderr}`));
    });
  });
  return {
    url,
    child,
    log: () => stderr,
    async stop() {
      // Exited already (with a code, or killed by a signal: then exitCode stays null and "exit" never comes again).
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    },
  };
}
