// A provider worker as a driver starts one, run as a child process: the standard-library worker that follows the
// provider's SDK (fixtures/provider-worker), a token of its own, and the variables drivers give such workers
// (drivers/provider-env.ts). For tests against the real service without a container engine.

import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { providerWorkerEnv } from "../../src/drivers/provider-env.js";
import type { DeployedEndpoint } from "../../src/service/index.js";
import { ProtocolWorker, until, type TestService } from "./helpers.js";

export const PROVIDER_WORKER_FIXTURE = join(import.meta.dirname, "../../fixtures/provider-worker/provider-worker.py");

export interface ProviderWorkerProcess {
  id: string;
  /** Its RUNPOD_AI_API_KEY. */
  token: string;
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
  /** Resolves with the first line starting with `prefix`. */
  line(prefix: string, timeoutMs?: number): Promise<string>;
  /** SIGKILL, if it still runs. */
  kill(): void;
}

export interface ProviderWorkerSettings {
  concurrency?: number;
  ping?: boolean;
  startDelayS?: number;
  pingIntervalMs?: number;
}

export async function startProviderWorker(t: TestService, endpoint: DeployedEndpoint, settings: ProviderWorkerSettings = {}): Promise<ProviderWorkerProcess> {
  const keys = await ProtocolWorker.mint(t, endpoint.id);
  const env = {
    PATH: process.env.PATH,
    ...providerWorkerEnv({
      apiUrl: t.service.url,
      workerId: keys.workerId,
      endpointId: endpoint.id,
      workerToken: keys.token,
      pingIntervalMs: settings.pingIntervalMs ?? 1000,
    }),
    PROVIDER_WORKER_CONCURRENCY: String(settings.concurrency ?? 1),
    PROVIDER_WORKER_PING: settings.ping === false ? "0" : "1",
    PROVIDER_WORKER_START_DELAY: String(settings.startDelayS ?? 0),
  };
  const child = spawn("python3", [PROVIDER_WORKER_FIXTURE], { env, stdio: ["ignore", "pipe", "pipe"] });
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
    lines,
    exited,
    line: (prefix, timeoutMs = 15_000) =>
      until(() => lines.find((l) => l.startsWith(prefix)), timeoutMs).catch(() => {
        throw new Error(`no line "${prefix}" from the worker; it said:\n${lines.join("\n")}\n${stderr}`);
      }),
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}
