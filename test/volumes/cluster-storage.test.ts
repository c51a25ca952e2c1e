// A network volume's storage on the workers' cluster follows the volume through the API: growing its size grows
// it first (a Kubernetes claim's request), deleting the volume deletes it first (the claim, the Swarm manager's
// Docker volume), and a cluster that refuses either is a 503 that leaves the volume as it was. A real service with
// a driver that records what it was asked (the Kubernetes and Swarm drivers' own calls are tested against the fake
// API server and a real swarm).

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { LaunchVolume } from "../../src/drivers/cluster-volumes.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { startService, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";

const KEY = "cluster-storage-admin-key";
let dir: string;
let service: Service;
const asked: string[] = [];
let refuse = false;

const driver: WorkerDriver = {
  name: "kubernetes",
  async start() {
    throw new Error("no workers in this test");
  },
  async removeVolume(id: string) {
    if (refuse) throw new Error("claims are forbidden");
    asked.push(`remove ${id}`);
  },
  async resizeVolume(volume: LaunchVolume) {
    if (refuse) throw new Error("the StorageClass does not allow volume expansion");
    asked.push(`resize ${volume.id} ${volume.sizeGb}`);
  },
  async close() {},
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-cluster-storage-"));
  service = await startService({ dataDir: join(dir, "data"), apiKeys: [KEY], driver });
}, 60_000);
afterAll(async () => {
  await service?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("grows and deletes the cluster's storage with the volume; a refusal there is a 503 that changes nothing", async () => {
  const id: string = (await call(`${service.url}/v2/network-volumes`, { key: KEY, body: { name: "weights", size: 10, dataCenter: "local" } })).body.id;
  expect((await call(`${service.url}/v2/network-volumes/${id}`, { key: KEY, method: "PATCH", body: { size: 20 } })).status).toBe(200);
  // A rename alone asks nothing of the cluster.
  expect((await call(`${service.url}/v2/network-volumes/${id}`, { key: KEY, method: "PATCH", body: { name: "weights2" } })).status).toBe(200);
  expect(asked).toEqual([`resize ${id} 20`]);

  refuse = true;
  const grow = await call(`${service.url}/v2/network-volumes/${id}`, { key: KEY, method: "PATCH", body: { size: 30 } });
  expect(grow.status).toBe(503);
  expect(grow.body.detail ?? grow.body.title).toMatch(/does not allow volume expansion/);
  expect((await call(`${service.url}/v2/network-volumes/${id}`, { key: KEY })).body.size).toBe(20);
  const gone = await call(`${service.url}/v2/network-volumes/${id}`, { key: KEY, method: "DELETE" });
  expect(gone.status).toBe(503);
  expect((await call(`${service.url}/v2/network-volumes/${id}`, { key: KEY })).status).toBe(200);

  refuse = false;
  expect((await call(`${service.url}/v2/network-volumes/${id}`, { key: KEY, method: "DELETE" })).status).toBe(204);
  expect(asked).toEqual([`resize ${id} 20`, `remove ${id}`]);
  expect(existsSync(join(dir, "data", "volumes", id))).toBe(false);
});
