// The standard-library provider worker (fixtures/provider-worker) run as a child process, given the variables a
// driver gives such a worker (drivers/provider-env.ts) and a worker token of its own, against a test service.

import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { ProtocolWorker, until, type TestService } from "./helpers.js";
import { providerWorkerEnv } from "../../src/drivers/provider-env.js";

export const PROVIDER_WORKER = join(import.meta.dirname, "../../fixtures/provider-worker/provider-worker.py");

export interface ProviderWorkerProcess {
  id: string;
  /** Its RUNPOD_AI_API_KEY. */
  token: string;
  child: ChildProcess;
  exited: Promise<number | null>;
  /** Its stdout, line by line (one per event: "taken", "posted", "stopping", "stopped"...). */
  lines: string[];
  /** Resolves with the first line starting with `prefix`. */
  line(prefix: string, timeoutMs?: number): Promise<string>;
  /** SIGKILL, if it still runs. */
  kill(): void;
}

export async function startProviderWorker(
  t: TestService,
  endpointId: string,
  settings: { concurrency?: number; pingMs?: number; env?: Record<string, string> } = {},
): Promise<ProviderWorkerProcess> {
  const keys = await ProtocolWorker.mint(t, endpointId);
  const env = {
    PATH: process.env.PATH,
    ...providerWorkerEnv({ apiUrl: t.service.url, workerId: keys.workerId, endpointId, workerToken: keys.token, pingIntervalMs: settings.pingMs ?? 1000 }),
    PROVIDER_WORKER_CONCURRENCY: String(settings.concurrency ?? 1),
    ...settings.env,
  };
  const child = spawn("python3", [PROVIDER_WORKER], { env, stdio: ["ignore", "pipe", "pipe"] });
  const lines: string[] = [];
  let pending = "";
  child.stdout!.on("data", (data: Buffer) => {
    pending += data.toString();
    const parts = pending.split("\n");
    pending = parts.pop()!;
    lines.push(...parts);
  });
  let stderr = "";
  child.stderr!.on("data", (data: Buffer) => (stderr += data.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    id: keys.workerId,
    token: keys.token,
    child,
    exited,
    lines,
    line: (prefix, timeoutMs = 15_000) =>
      until(() => lines.find((l) => l.startsWith(prefix)), timeoutMs).catch(() => {
        throw new Error(`no line "${prefix}" from the worker; it said:\n${lines.join("\n")}\n${stderr}`);
      }),
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}
