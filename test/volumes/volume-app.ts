// fixtures/volume-app (a "writer" and a "reader" endpoint on one network volume, "shared-data") built for real
// (esbuild) and deployed to a service in this process with real process workers (the runtime from dist/: compile
// first): the set-up of the tests of what workers see on a volume.

import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
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

export async function startVolumeAppService(key: string): Promise<VolumeApp> {
  const dir = mkdtempSync(join(tmpdir(), "svc-volume-app-"));
  cpSync(join(repo, "fixtures", "volume-app"), join(dir, "app"), { recursive: true });
  const service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [key],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
  });
  const close = async () => {
    await service.close();
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
