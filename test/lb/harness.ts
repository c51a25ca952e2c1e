// Shared by test/lb and test/openai: a fixture project copied to a temp dir and built for real (buildProject:
// discovery, handler generation, esbuild, artifact), a real service over SQLite with real process workers.

import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { afterAll, beforeAll } from "vitest";
import { lbEndpointUrl } from "../../src/service/lb/address.js";
import { startService, type DeployedEndpoint, type Service, type ServiceOptions } from "../../src/service/index.js";
import type { ManifestResource } from "svc/internal";

export const REPO = resolve(fileURLToPath(new URL("../..", import.meta.url)));

export interface LiveApp {
  service: Service;
  key: string;
  endpoints: DeployedEndpoint[];
  dir: string;
  close(): Promise<void>;
}

/** Build fixtures/<fixture> (or a repo-relative project dir) and deploy it to a fresh service with process workers. */
export async function startApp(
  project: string,
  opts: { resources?: Record<string, Partial<ManifestResource>>; service?: Partial<ServiceOptions> } = {},
): Promise<LiveApp> {
  if (!existsSync(join(REPO, "dist", "runtime", "worker.js"))) throw new Error("svc is not compiled: run `npx tsc -p tsconfig.build.json` first");
  const dir = mkdtempSync(join(tmpdir(), "svc-lb-test-"));
  const copy = join(dir, "project");
  cpSync(join(REPO, project), copy, { recursive: true, filter: (src) => !/[\\/](\.svc|node_modules)$/.test(src) });
  const built = await buildProject(copy);
  const manifest = built.manifest;
  for (const [name, overrides] of Object.entries(opts.resources ?? {})) Object.assign(manifest.resources[name]!, overrides);
  const key = "svc_lb_test_key_0123456789abcdef";
  const driver = createProcessDriver({ cacheDir: join(dir, "cache"), closeGraceMs: 500 });
  const service = await startService({ dataDir: join(dir, "data"), apiKeys: [key], driver, leaseMs: 3000, ...opts.service });
  const endpoints = await service.deploy({ app: "lbtest", env: "test", manifest, artifactPath: built.artifactPath });
  return {
    service,
    key,
    endpoints,
    dir,
    async close() {
      await service.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** fixtures/lb-app's `api` endpoint on a live service, as the LB tests use it (set up by `useLbApp`). */
export interface LbApp {
  app: LiveApp;
  endpointId: string;
  /** {service}/lb/{endpoint_id} */
  base: string;
  auth: Record<string, string>;
  /** The endpoint's log lines (oldest first). */
  logLines(): Promise<Array<{ text: string; workerId: string }>>;
  /** The endpoint's /health answer. */
  health(): Promise<any>;
}

/**
 * Start fixtures/lb-app with these `api` settings before the tests of the enclosing describe, and close it after:
 * the returned object is filled in `beforeAll`.
 */
export function useLbApp(resources: Partial<ManifestResource>, service: Partial<ServiceOptions> = {}): LbApp {
  const lb = {} as LbApp;
  beforeAll(async () => {
    const app = await startApp("fixtures/lb-app", { resources: { api: resources }, service });
    const api = app.endpoints.find((e) => e.name === "api")!;
    if (api.type !== "lb") throw new Error(`fixtures/lb-app's api is ${api.type}, not lb`);
    const auth = { authorization: `Bearer ${app.key}` };
    Object.assign(lb, {
      app,
      endpointId: api.id,
      base: lbEndpointUrl(app.service.url, api.id),
      auth,
      logLines: async () =>
        (
          (await (await fetch(`${app.service.url}/v1/endpoints/${api.id}/logs`, { headers: auth })).json()) as {
            lines: Array<{ text: string; workerId: string }>;
          }
        ).lines,
      health: async () => (await fetch(`${app.service.url}/v2/${api.id}/health`, { headers: auth })).json(),
    });
  });
  afterAll(async () => {
    await lb.app?.close();
  });
  return lb;
}
