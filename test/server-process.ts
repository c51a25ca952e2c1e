// `svc server` as its own process, as users run it: started with a data directory and an environment (this
// process's SVC_* settings left out), its URL read from stdout, its stderr kept for assertions.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
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
  /** SIGKILL, as a crash or an OOM kill ends it (no shutdown: workers it started are left running), and wait for the exit. */
  kill(): Promise<void>;
}

/** A TCP port free on 127.0.0.1 now: for a server that must come back on the same port after a restart. */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/** The process workers (runtime/worker.js) of a server on `dataDir`: their environment names it (the artifact is extracted under it). */
export function processWorkerPids(dataDir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      // The runtime itself (node), not the sandbox that starts it with the same words on its command line.
      if (!/(^|\/)node$/.test(argv[0] ?? "") || !argv.some((a) => a.includes("runtime/worker.js"))) continue;
      // An unsandboxed worker's environment names its code in the data dir; a sandboxed one sees its code at a path
      // of the sandbox's own, bound in from the data dir (its mounts name it).
      if (readFileSync(`/proc/${entry}/environ`, "utf8").includes(dataDir) || readFileSync(`/proc/${entry}/mountinfo`, "utf8").includes(dataDir))
        pids.push(Number(entry));
    } catch {
      // ended meanwhile
    }
  }
  return pids;
}

/**
 * Kill what a server killed with SIGKILL left of its process workers on `dataDir`: the workers, and the pasta of
 * each sandboxed one (its record names it; no later service on the data directory stops it).
 */
export function killLeftWorkers(dataDir: string): void {
  for (const pid of processWorkerPids(dataDir)) process.kill(pid, "SIGKILL");
  const records = join(dataDir, "workers");
  for (const name of existsSync(records) ? readdirSync(records) : []) {
    try {
      const pasta = (JSON.parse(readFileSync(join(records, name), "utf8")) as { pasta?: number }).pasta;
      if (pasta !== undefined && /^pass?t/.test(readFileSync(`/proc/${pasta}/comm`, "utf8"))) process.kill(pasta, "SIGTERM");
    } catch {
      // a record half written, or its pasta gone already
    }
  }
}

/** `port`: a fixed one (see freePort), so that a restarted server answers at the same URL; by default any free one. */
export async function startServerProcess(opts: {
  dataDir: string;
  env?: Record<string, string>;
  workers?: string;
  args?: string[];
  port?: number;
}): Promise<ServerProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];
  const child = spawn(
    process.execPath,
    [
      join(REPO, "bin", "svc.js"),
      "server",
      "--port",
      String(opts.port ?? 0),
      "--data-dir",
      opts.dataDir,
      "--workers",
      opts.workers ?? "process",
      ...(opts.args ?? []),
    ],
    {
      env: { ...env, ...opts.env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
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
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await exited;
    },
  };
}
