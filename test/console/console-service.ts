// The service the console's browser tests run against: the console built, a fixture app copied into a fresh
// directory, and a service on that directory whose workers are real processes (the built runtime).
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type Service, type ServiceOptions } from "../../src/service/index.js";

export const repo = fileURLToPath(new URL("../..", import.meta.url));
/** Where the console tests leave their screenshots. */
export const shots = join(repo, "test-results", "console");

export interface ConsoleService {
  service: Service;
  /** Its own directory: the service's data, the app's copy, anything else a test keeps there. */
  dir: string;
  /** The copy of the fixture app, ready to build and deploy. */
  app: string;
  /** Stops the service and removes its directory. */
  close(): Promise<void>;
}

export async function startConsoleService(options: { key: string; fixture?: string; service?: Partial<ServiceOptions> }): Promise<ConsoleService> {
  execFileSync(process.execPath, ["scripts/build-console.mjs"], { cwd: repo, stdio: "pipe" });
  mkdirSync(shots, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), "svc-console-"));
  const app = join(dir, "app");
  cpSync(join(repo, "fixtures", options.fixture ?? "console-app"), app, { recursive: true });
  let service: Service;
  try {
    service = await startService({
      dataDir: join(dir, "data"),
      apiKeys: [options.key],
      driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
      leaseMs: 3000,
      heartbeatMs: 500,
      ...options.service,
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    service,
    dir,
    app,
    async close() {
      await service.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
