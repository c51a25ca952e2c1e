// Volume quotas inside workers (SVC_VOLUME_QUOTAS=loop, src/service/volumes/storage.ts): each network volume a
// filesystem of its size, so a process worker writing past it gets ENOSPC; grown online, never shrunk, removed
// with the volume, mounted again (once) by the next start, and an older plain volume moved into one. Real loop
// devices and mkfs.ext4 (root); the volume app's real build and process workers (the runtime from dist/).

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { call } from "../service/helpers.js";
import { startVolumeAppService, unmountUnder, type VolumeApp } from "./volume-app.js";
import { hasCapability, loopQuotaProblem, mountsOf } from "../../src/service/volumes/storage.js";
import { startService } from "../../src/service/index.js";

const KEY = "volume-quota-admin-key";
/** One "GB" of size is 4 MiB here: the app's 10 GB volume is a 40 MiB filesystem. */
const GB = 4 * 1024 * 1024;
const MB = 1024 * 1024;
const unavailable = loopQuotaProblem();
const CAP_SYS_RESOURCE = 24;

let app: VolumeApp;

const mounts = () => mountsOf(readFileSync("/proc/self/mountinfo", "utf8"));
const volumeDir = (id: string) => join(app.dir, "data", "volumes", id);

async function write(input: Record<string, unknown>) {
  return (await call(`${app.endpoints.writer!.url}/runsync`, { key: KEY, body: { input } })).body;
}

beforeAll(async () => {
  if (unavailable) return;
  app = await startVolumeAppService(KEY, { volumeQuotas: "loop", volumeGbBytes: GB });
}, 120_000);
afterAll(async () => {
  await app?.close();
});

it.skipIf(unavailable !== undefined)(
  `a worker writing past its volume's size gets ENOSPC; it grows online where the service may resize a mounted filesystem${unavailable ? ` (skipped: ${unavailable})` : ""}`,
  async () => {
    expect((await call(`${app.service.url}/v1/me`, { key: KEY })).body.volumeQuotas).toBe("filesystem");
    expect((await call(`${app.service.url}/metrics`, { key: KEY })).text).toMatch(/^svc_volume_quotas_enforced 1$/m);
    expect(mounts().get(volumeDir(app.volume.id))).toMatch(/^\/dev\/loop/);
    // 20 MB fit in 40 MiB; 30 MB more do not.
    expect(await write({ file: "first.bin", bytes: 20 * MB })).toMatchObject({ status: "COMPLETED" });
    const over = await write({ file: "second.bin", bytes: 30 * MB });
    expect(over.status).toBe("FAILED");
    expect(JSON.stringify(over.error)).toContain("ENOSPC");
    // What fit is intact.
    expect(readFileSync(join(volumeDir(app.volume.id), "first.bin")).length).toBe(20 * MB);
    expect(await write({ file: "second.bin", remove: true })).toMatchObject({ status: "COMPLETED" });
    // A smaller size is refused while quotas are on; a larger one grows the filesystem under the running workers.
    const shrink = await call(`${app.service.url}/v2/network-volumes/${app.volume.id}`, { key: KEY, method: "PATCH", body: { size: 5 } });
    expect(shrink.status).toBe(422);
    expect(JSON.stringify(shrink.body.errors)).toContain("can only grow");
    const grow = await call(`${app.service.url}/v2/network-volumes/${app.volume.id}`, { key: KEY, method: "PATCH", body: { size: 20 } });
    if (!hasCapability(CAP_SYS_RESOURCE)) {
      // Where the service may not resize a mounted filesystem, the grow is refused and changes nothing.
      expect(grow.status).toBe(503);
      expect(grow.body.detail).toContain("CAP_SYS_RESOURCE");
      expect((await call(`${app.service.url}/v2/network-volumes/${app.volume.id}`, { key: KEY })).body.size).toBe(10);
      return;
    }
    expect(grow.body).toMatchObject({ size: 20 });
    expect(await write({ file: "second.bin", bytes: 30 * MB })).toMatchObject({ status: "COMPLETED" });
  },
  120_000,
);

it.skipIf(unavailable !== undefined)(
  "a volume's filesystem goes with it; the next start mounts each once and moves an older plain volume into one",
  async () => {
    const made = (await call(`${app.service.url}/v2/network-volumes`, { key: KEY, body: { name: "scratch", size: 10, dataCenter: "local" } })).body;
    expect(made).toMatchObject({ name: "scratch" });
    expect(mounts().has(volumeDir(made.id))).toBe(true);
    expect((await call(`${app.service.url}/v2/network-volumes/${made.id}`, { key: KEY, method: "DELETE" })).status).toBe(204);
    expect(mounts().has(volumeDir(made.id))).toBe(false);
    expect(existsSync(volumeDir(made.id))).toBe(false);
    expect(existsSync(join(app.dir, "data", "volume-images", `${made.id}.ext4`))).toBe(false);

    // A volume made with quotas off (a plain directory with a file in it), then the service started with them on.
    const dataDir = join(app.dir, "data-migrate");
    const plain = await startService({ dataDir, apiKeys: [KEY], volumeGbBytes: GB });
    const old = (await call(`${plain.url}/v2/network-volumes`, { key: KEY, body: { name: "old", size: 10, dataCenter: "local" } })).body;
    writeFileSync(join(dataDir, "volumes", old.id, "kept.txt"), "from before quotas");
    await plain.close();
    for (let start = 0; start < 2; start++) {
      const quota = await startService({ dataDir, apiKeys: [KEY], volumeGbBytes: GB, volumeQuotas: "loop" });
      try {
        const dir = join(dataDir, "volumes", old.id);
        expect(mounts().get(dir)).toMatch(/^\/dev\/loop/);
        // Mounted once, however many starts.
        expect(
          readFileSync("/proc/self/mountinfo", "utf8")
            .split("\n")
            .filter((l) => l.split(" ")[4] === dir),
        ).toHaveLength(1);
        expect(readFileSync(join(dir, "kept.txt"), "utf8")).toBe("from before quotas");
      } finally {
        await quota.close();
      }
    }
    unmountUnder(dataDir);
  },
);
