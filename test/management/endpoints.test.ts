// Templates and REST endpoints against a real service: creation with the spec's body, GPU allocation in
// priority order from the host's GPU types, a visible WAITING reason, updates (which restart, which do not),
// persistence over a restart, and deletion with the job history.

import { afterAll, beforeAll, expect, it } from "vitest";
import { join } from "node:path";
import { startService } from "../../src/service/index.js";
import type { DataCenter } from "../../src/service/management/datacenters.js";
import { call, startTestService, type TestService } from "../service/helpers.js";

const dataCenters: DataCenter[] = [{ id: "local", name: "box", primaryVolumeType: "STANDARD", volumeTypes: ["STANDARD"], gpuTypes: ["AMPERE_48", "ADA_24"] }];
let t: TestService;
let url: string;
let template: { id: string };

beforeAll(async () => {
  t = await startTestService({ dataCenters });
  url = t.service.url;
  template = (
    await call(`${url}/v1/templates`, { key: t.key, body: { name: "vllm", imageName: "vllm/vllm-openai:latest", env: { MODEL: "m" }, containerDiskInGb: 20 } })
  ).body;
});
afterAll(async () => {
  await t?.close();
});

it("creates, lists and validates templates", async () => {
  expect(template).toMatchObject({
    id: expect.stringMatching(/^tpl/),
    name: "vllm",
    imageName: "vllm/vllm-openai:latest",
    env: { MODEL: "m" },
    containerDiskInGb: 20,
  });
  const list = await call(`${url}/v1/templates`, { key: t.key });
  expect(list.body).toEqual([template]);
  const bad = await call(`${url}/v1/templates`, { key: t.key, body: { name: "", env: { A: 1 }, ports: "80" } });
  expect(bad.status).toBe(422);
  expect(bad.body.errors).toEqual(["$.imageName: is required", "$.name: must not be empty", "$.env.A: must be a string", "$.ports: unknown property"]);
  // A bigger /dev/shm for the image's containers is a template's to allow; the engine's default unless it does.
  expect(template).toMatchObject({ shmSizeMb: null });
  const shm = await call(`${url}/v1/templates`, { key: t.key, body: { name: "shm", imageName: "acme/worker:1", shmSizeMb: 2048 } });
  expect([shm.status, shm.body.shmSizeMb]).toEqual([201, 2048]);
  expect((await call(`${url}/v1/templates/${shm.body.id}`, { key: t.key })).body.shmSizeMb).toBe(2048);
  const tiny = await call(`${url}/v1/templates`, { key: t.key, body: { name: "tiny", imageName: "acme/worker:1", shmSizeMb: 1 } });
  expect(tiny.status).toBe(422);
  await call(`${url}/v1/templates/${shm.body.id}`, { key: t.key, method: "DELETE" });
});

it("creates an endpoint from the spec's body and allocates the first available GPU type in priority order", async () => {
  const r = await call(`${url}/v1/endpoints`, {
    key: t.key,
    body: { name: "llm", templateId: template.id, gpuTypeIds: ["ADA_80_PRO", "ADA_24", "AMPERE_48"], workersMin: 0, workersMax: 2, idleTimeout: 30 },
  });
  expect(r.status).toBe(201);
  expect(r.body).toEqual({
    id: expect.stringMatching(/^[a-z0-9]{16}$/),
    name: "llm",
    templateId: template.id,
    computeType: "GPU",
    gpuTypeIds: ["ADA_80_PRO", "ADA_24", "AMPERE_48"],
    gpuCount: 1,
    allocatedGpuType: "ADA_24",
    workersMin: 0,
    workersMax: 2,
    idleTimeout: 30,
    env: {},
    networkVolumeId: null,
    // No models named: its workers need none from the host's model cache.
    models: [],
    executionTimeoutMs: 600_000,
    scalerType: "QUEUE_DELAY",
    scalerValue: 4,
    type: "queue",
    url: `${url}/v2/${r.body.id}`,
    // a worker image built for the provider, on a service whose driver runs no images: provisioned, no workers,
    // and it says so
    status: "WAITING",
    statusReason: expect.stringContaining('image "vllm/vllm-openai:latest" is a worker image, and '),
    // No worker failed to start (docs/deploy.md, Releases: health)
    unhealthyWorkers: 0,
    lastStartError: null,
    createdAt: expect.any(Number),
    updatedAt: expect.any(Number),
  });
  expect((await call(`${url}/v1/endpoints/${r.body.id}`, { key: t.key })).body).toEqual(r.body);
  expect((await call(`${url}/v1/endpoints`, { key: t.key })).body.map((e: { id: string }) => e.id)).toContain(r.body.id);
});

it("leaves an endpoint whose GPU types are all unavailable waiting, with the reason visible, and its jobs queued", async () => {
  const r = await call(`${url}/v1/endpoints`, { key: t.key, body: { name: "big", templateId: template.id, gpuTypeIds: ["ADA_80_PRO", "BLACKWELL_180"] } });
  expect(r.body.status).toBe("WAITING");
  expect(r.body.allocatedGpuType).toBeNull();
  expect(r.body.statusReason).toContain("none of the GPU types ADA_80_PRO, BLACKWELL_180 is available on this host (it has: AMPERE_48, ADA_24)");
  const job = await call(`${r.body.url}/run`, { key: t.key, body: { input: { q: 1 } } });
  expect(job.body.status).toBe("IN_QUEUE");
  const health = (await call(`${r.body.url}/health`, { key: t.key })).body;
  expect(health.jobs.inQueue).toBe(1);
  expect(health.workers.idle + health.workers.running).toBe(0);
});

it("refuses inconsistent settings with every failure listed", async () => {
  const r = await call(`${url}/v1/endpoints`, {
    key: t.key,
    body: { name: "x", templateId: "tplnope", workersMin: 3, workersMax: 1, computeType: "CPU", gpuTypeIds: ["ADA_24"], networkVolumeId: "volnope" },
  });
  expect(r.status).toBe(422);
  expect(r.body.errors).toEqual([
    '$.templateId: no template "tplnope"',
    '$.networkVolumeId: no network volume "volnope"',
    "$.workersMin: must not exceed workersMax (1)",
    "$.gpuTypeIds: must be empty for a CPU endpoint",
  ]);
  const types = await call(`${url}/v1/endpoints`, {
    key: t.key,
    body: { templateId: template.id, workersMax: 101, idleTimeout: 0, gpuTypeIds: "ADA_24", scalerType: "X" },
  });
  expect(types.body.errors).toEqual([
    "$.name: is required",
    "$.gpuTypeIds: must be an array",
    "$.workersMax: must be at most 100",
    "$.idleTimeout: must be at least 1",
    "$.scalerType: must be one of QUEUE_DELAY, REQUEST_COUNT",
  ]);
  expect((await call(`${url}/v1/endpoints`, { key: t.key, method: "POST", raw: "{" })).status).toBe(400);
});

it("refuses GPU type ids it does not know, naming the nearest known ones", async () => {
  const r = await call(`${url}/v1/endpoints`, { key: t.key, body: { name: "typo", templateId: template.id, gpuTypeIds: ["ADA_24", "H100_80", "hopper_141"] } });
  expect(r.status).toBe(422);
  expect(r.body.errors).toEqual([
    expect.stringMatching(/^\$\.gpuTypeIds\[1\]: unknown GPU type "H100_80": did you mean "ADA_80_PRO"/),
    expect.stringMatching(/^\$\.gpuTypeIds\[2\]: unknown GPU type "hopper_141": did you mean "HOPPER_141"/),
  ]);
  const created = (await call(`${url}/v1/endpoints`, { key: t.key, body: { name: "ok", templateId: template.id, gpuTypeIds: ["ADA_24"] } })).body;
  const patch = await call(`${url}/v1/endpoints/${created.id}`, { key: t.key, method: "PATCH", body: { gpuTypeIds: ["B200"] } });
  expect(patch.status).toBe(422);
  expect(patch.body.errors).toEqual([expect.stringMatching(/^\$\.gpuTypeIds\[0\]: unknown GPU type "B200": did you mean "BLACKWELL_180"/)]);
});

it("updates: GPU types and worker counts restart workers, other edits do not; everything survives a restart", async () => {
  const created = (await call(`${url}/v1/endpoints`, { key: t.key, body: { name: "edit-me", templateId: template.id, gpuTypeIds: ["AMPERE_48"] } })).body;
  const rename = await call(`${url}/v1/endpoints/${created.id}`, { key: t.key, method: "PATCH", body: { name: "edited", env: { A: "b" }, idleTimeout: 9 } });
  expect(rename.status).toBe(200);
  expect(rename.headers.get("svc-workers-restarted")).toBe("false");
  expect(rename.body).toMatchObject({ id: created.id, name: "edited", env: { A: "b" }, idleTimeout: 9, allocatedGpuType: "AMPERE_48" });
  const gpus = await call(`${url}/v1/endpoints/${created.id}`, { key: t.key, method: "PATCH", body: { gpuTypeIds: ["ADA_24"] } });
  expect(gpus.headers.get("svc-workers-restarted")).toBe("true");
  expect(gpus.body.allocatedGpuType).toBe("ADA_24");
  const workers = await call(`${url}/v1/endpoints/${created.id}`, { key: t.key, method: "PATCH", body: { workersMax: 5 } });
  expect(workers.headers.get("svc-workers-restarted")).toBe("true");
  const bad = await call(`${url}/v1/endpoints/${created.id}`, { key: t.key, method: "PATCH", body: { workersMin: 6, templateId: 5 } });
  expect(bad.body.errors).toEqual(["$.templateId: must be a string"]);
  const tooMany = await call(`${url}/v1/endpoints/${created.id}`, { key: t.key, method: "PATCH", body: { workersMin: 6 } });
  expect(tooMany.body.errors).toEqual(["$.workersMin: must not exceed workersMax (5)"]);
  const before = (await call(`${url}/v1/endpoints/${created.id}`, { key: t.key })).body;

  await t.service.close();
  t.service = await startService({ dataDir: join(t.dir, "data"), storeUrl: t.storeUrl, apiKeys: [t.key], dataCenters });
  url = t.service.url;
  const after = (await call(`${url}/v1/endpoints/${created.id}`, { key: t.key })).body;
  expect(after).toEqual({ ...before, url: `${url}/v2/${created.id}` });
  expect((await call(`${url}/v1/templates/${template.id}`, { key: t.key })).body).toEqual(template);
});

it("deletes an endpoint with its configuration, jobs and logs", async () => {
  const created = (await call(`${url}/v1/endpoints`, { key: t.key, body: { name: "gone", templateId: template.id, computeType: "CPU" } })).body;
  const job = (await call(`${created.url}/run`, { key: t.key, body: { input: 1 } })).body.id;
  expect((await call(`${created.url}/status/${job}`, { key: t.key })).status).toBe(200);
  expect((await call(`${url}/v1/endpoints/${created.id}`, { key: t.key, method: "DELETE" })).status).toBe(204);
  expect((await call(`${url}/v1/endpoints/${created.id}`, { key: t.key })).status).toBe(404);
  expect((await call(`${created.url}/status/${job}`, { key: t.key })).status).toBe(404);
  expect((await call(`${url}/v1/endpoints/${created.id}/logs`, { key: t.key })).status).toBe(404);
  expect((await call(`${url}/v1/endpoints`, { key: t.key })).body.map((e: { id: string }) => e.id)).not.toContain(created.id);
});
