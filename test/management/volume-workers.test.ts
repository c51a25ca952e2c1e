// A network volume is real storage shared by workers: a real build (esbuild) of fixtures/volume-app, real
// process workers (the runtime from dist/: compile first). A worker of the "writer" endpoint writes a file on
// the volume; a worker of the "reader" endpoint reads it, and so does a worker of an endpoint created through
// the REST API (template "svc://<reader>", networkVolumeId). The file outlives the workers.

import { afterAll, beforeAll, expect, it } from "vitest";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { DeployedEndpoint, Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";
import { startVolumeAppService, type VolumeApp } from "../volumes/volume-app.js";

const KEY = "volume-admin-key";
let app: VolumeApp;
let dir: string;
let service: Service;
let writer: DeployedEndpoint;
let reader: DeployedEndpoint;
let volume: { id: string; name: string };

beforeAll(async () => {
  app = await startVolumeAppService(KEY);
  ({ dir, service, volume } = app);
  writer = app.endpoints.writer!;
  reader = app.endpoints.reader!;
});
afterAll(async () => {
  await app?.close();
});

it("a worker of one endpoint writes a file that a worker of another endpoint on the same volume reads", async () => {
  const volumeDir = join(dir, "data", "volumes", volume.id);
  const wrote = await call(`${writer.url}/runsync`, { key: KEY, body: { input: { file: "note.txt", text: "written by the writer" } } });
  expect(wrote.body).toMatchObject({ status: "COMPLETED", output: { volume: volumeDir } });
  expect(readFileSync(join(volumeDir, "note.txt"), "utf8")).toBe("written by the writer");

  const read = await call(`${reader.url}/runsync`, { key: KEY, body: { input: { file: "note.txt" } } });
  expect(read.body).toMatchObject({ status: "COMPLETED", output: { text: "written by the writer", volume: volumeDir } });
  expect(read.body.output.pid).not.toBe(wrote.body.output.pid);

  // An endpoint made through the REST API, running the reader's code, mounts the volume by networkVolumeId.
  const template = (await call(`${service.url}/v1/templates`, { key: KEY, body: { name: "reader code", imageName: `svc://${reader.id}` } })).body;
  const created = await call(`${service.url}/v1/endpoints`, {
    key: KEY,
    body: { name: "rest-reader", templateId: template.id, computeType: "CPU", workersMin: 0, workersMax: 1, idleTimeout: 1, networkVolumeId: volume.id },
  });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ status: "READY", statusReason: null, networkVolumeId: volume.id, url: `${service.url}/v2/${created.body.id}` });
  const viaRest = await call(`${created.body.url}/runsync`, { key: KEY, body: { input: { file: "note.txt" } } });
  expect(viaRest.body).toMatchObject({ status: "COMPLETED", output: { text: "written by the writer", volume: volumeDir } });

  // Mounted volumes cannot be deleted from under their endpoints.
  const del = await call(`${service.url}/v2/network-volumes/${volume.id}`, { key: KEY, method: "DELETE" });
  expect(del.status).toBe(400);
  expect(del.body.detail).toContain(`rest-reader (${created.body.id})`);
}, 90_000);

it("keeps the files when every worker is gone, for the next worker", async () => {
  // idleTimeout is 1 s: all workers stop
  await until(
    async () => {
      const h = (await call(`${reader.url}/health`, { key: KEY })).body;
      return h.workers.idle + h.workers.running + (h.workers.initializing ?? 0) === 0;
    },
    20_000,
    200,
  );
  const read = await call(`${reader.url}/runsync`, { key: KEY, body: { input: { file: "note.txt" } } });
  expect(read.body).toMatchObject({ status: "COMPLETED", output: { text: "written by the writer" } });
  expect(existsSync(join(dir, "data", "volumes", volume.id, "note.txt"))).toBe(true);
}, 60_000);

it("restarts a REST endpoint's workers when its worker counts change, not when it is renamed", async () => {
  const template = (await call(`${service.url}/v1/templates`, { key: KEY, body: { name: "reader again", imageName: `svc://${reader.id}` } })).body;
  const created = (
    await call(`${service.url}/v1/endpoints`, {
      key: KEY,
      body: { name: "steady", templateId: template.id, computeType: "CPU", workersMin: 1, workersMax: 1, idleTimeout: 60, networkVolumeId: volume.id },
    })
  ).body;
  const pid = async () => (await call(`${created.url}/runsync`, { key: KEY, body: { input: { file: "note.txt" } } })).body.output.pid as number;
  const first = await pid();
  const renamed = await call(`${service.url}/v1/endpoints/${created.id}`, { key: KEY, method: "PATCH", body: { name: "renamed", idleTimeout: 30 } });
  expect(renamed.headers.get("svc-workers-restarted")).toBe("false");
  expect(await pid()).toBe(first);
  const resized = await call(`${service.url}/v1/endpoints/${created.id}`, { key: KEY, method: "PATCH", body: { workersMax: 2 } });
  expect(resized.headers.get("svc-workers-restarted")).toBe("true");
  // The old worker is drained and replaced by one of the new revision.
  await until(async () => (await pid()) !== first, 30_000, 200);
  expect((await call(`${service.url}/v1/endpoints/${created.id}`, { key: KEY, method: "DELETE" })).status).toBe(204);
}, 90_000);
