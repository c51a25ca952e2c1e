// fixtures/volume-app (a "writer" and a "reader" endpoint on one network volume, "shared-data") built for real
// (esbuild) and deployed to a service in this process with real process workers (the runtime from dist/: compile
// first): the set-up of the tests of what workers see on a volume.

import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type DeployedEndpoint, type Service, type ServiceOptions } from "../../src/service/index.js";
import { mountsOf } from "../../src/service/volumes/storage.js";
import { call } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));

export interface VolumeApp {
  /** The temp directory: the service's data is under data/, the volume's files under data/volumes/<id>. */
  dir: string;
  service: Service;
  volume: { id: string; name: string };
  /** The app's endpoints by name: writer, reader. */
  endpoints: Record<string, DeployedEndpoint>;
  close(): Promise<void>;
}

/** The volume app's service: `options` add to (or replace) the service's (volume quotas, a smaller GB). */
export async function startVolumeAppService(key: string, options: Partial<ServiceOptions> = {}): Promise<VolumeApp> {
  const dir = mkdtempSync(join(tmpdir(), "svc-volume-app-"));
  cpSync(join(repo, "fixtures", "volume-app"), join(dir, "app"), { recursive: true });
  const service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [key],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
    ...options,
  });
  const close = async () => {
    await service.close();
    unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const volume = (await call(`${service.url}/v2/network-volumes`, { key, body: { name: "shared-data", size: 10, dataCenter: "local" } })).body;
    const build = await buildProject(join(dir, "app"));
    const deployed = await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath });
    return { dir, service, volume, endpoints: Object.fromEntries(deployed.map((e) => [e.name, e])), close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Unmount what is mounted under `dir` (volumes' filesystems, where quotas are on), deepest first. */
export function unmountUnder(dir: string): void {
  const points = [...mountsOf(readFileSync("/proc/self/mountinfo", "utf8")).keys()].filter((p) => p.startsWith(`${dir}/`));
  for (const point of points.sort((a, b) => b.length - a.length)) execFileSync("umount", [point]);
}
