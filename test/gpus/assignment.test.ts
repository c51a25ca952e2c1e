// Exclusive GPU assignment with the real service and real process workers, on a host the fake nvidia-smi
// (test/fakes/gpu/nvidia-smi, first on PATH) describes: two H100s (ADA_80_PRO) and one RTX 4090 (ADA_24). Each
// handler of fixtures/gpu-app answers with the CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES its worker got.
// The worker runtime comes from dist/ (compile first).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildProject, type BuildResult } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { readInventory } from "../../src/gpus/inventory.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const FAKE_DIR = join(repo, "test", "fakes", "gpu");
const KEY = "gpu-admin-key";
const GPUS = [
  { name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559, usedMiB: 1200, utilization: 37 },
  { name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559 },
  { name: "NVIDIA GeForce RTX 4090", memoryMiB: 24564 },
];
const uuid = (i: number) => `GPU-fa4e0000-0000-4000-8000-${String(i).padStart(12, "0")}`;
const H100 = [uuid(0), uuid(1)];
const RTX = uuid(2);
/** The fake first on PATH, as the service runs nvidia-smi. */
const fakeEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${FAKE_DIR}${delimiter}${process.env.PATH ?? ""}`,
  FAKE_NVIDIA_SMI_GPUS: JSON.stringify(GPUS),
});

let dir: string;
let service: Service;
let build: BuildResult;
const endpoint: Record<string, DeployedEndpoint> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-gpu-assign-"));
  cpSync(join(repo, "fixtures", "gpu-app"), join(dir, "app"), { recursive: true });
  build = await buildProject(join(dir, "app"));
  service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [KEY],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
    gpus: { read: () => readInventory({ env: fakeEnv() }), sampleMs: 200 },
  });
  for (const e of await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath }))
    endpoint[e.name] = e;
}, 120_000);
afterAll(async () => {
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Report {
  cuda: string | null;
  nvidia: string | null;
  pid: number;
  worker: string;
}
interface GpuRow {
  index: number;
  uuid: string;
  typeIds: string[];
  utilizationPercent: number | null;
  memoryUsedMiB: number | null;
  holder: { workerId: string; endpointId: string; typeId: string | null } | null;
}

const gpuList = async (): Promise<GpuRow[]> => (await call(`${service.url}/v1/gpus`, { key: KEY })).body.gpus;
const allFree = async () => (await gpuList()).every((g) => g.holder === null);
const run = async (name: string, input: object) => (await call(`${endpoint[name]!.url}/run`, { key: KEY, body: { input } })).body.id as string;
const result = async (name: string, id: string): Promise<Report> => {
  const r = (await call(`${endpoint[name]!.url}/status-sync/${id}?wait=60000`, { key: KEY })).body;
  expect(r.status).toBe("COMPLETED");
  return r.output;
};
const health = async (name: string) => (await call(`${endpoint[name]!.url}/health`, { key: KEY })).body;

describe("GPU workers get GPUs of their own", () => {
  it("lists the host's GPUs, their types and utilization, sampled from nvidia-smi", async () => {
    await until(allFree, 20_000, 100);
    const gpus = await gpuList();
    expect(gpus.map((g) => [g.index, g.uuid, g.typeIds])).toEqual([
      [0, H100[0], ["ADA_80_PRO", "NVIDIA H100 80GB HBM3"]],
      [1, H100[1], ["ADA_80_PRO", "NVIDIA H100 80GB HBM3"]],
      [2, RTX, ["ADA_24", "NVIDIA GeForce RTX 4090"]],
    ]);
    expect(gpus[0]).toMatchObject({ utilizationPercent: 37, memoryUsedMiB: 1200 });
    // A key without management scopes may not read them.
    const jobsOnly = await service.mintKey({ scopes: ["jobs:*"] });
    expect((await call(`${service.url}/v1/gpus`, { key: jobsOnly.key })).status).toBe(403);
  }, 30_000);

  it("a CPU worker sees no GPU", async () => {
    const out = await result("plain", await run("plain", {}));
    expect(out).toMatchObject({ cuda: "", nvidia: "void" });
  }, 60_000);

  it("concurrent workers get distinct GPUs: the H100s first, then the 4090 (the list's second type)", async () => {
    await until(allFree, 20_000, 100);
    const ids = await Promise.all([0, 1, 2].map(() => run("first", { ms: 2500 })));
    // While they run, the endpoint's health names the GPUs its workers hold.
    const held = await until(
      async () => {
        const h = await health("first");
        return h.gpus?.length === 3 && h.gpus;
      },
      30_000,
      100,
    );
    expect(held.map((g: GpuRow) => g.uuid).sort()).toEqual([...H100, RTX].sort());
    const outs = await Promise.all(ids.map((id) => result("first", id)));
    expect(new Set(outs.map((o) => o.worker)).size).toBe(3);
    expect(outs.map((o) => o.cuda).sort()).toEqual([...H100, RTX].sort());
    for (const o of outs) expect(o.nvidia).toBe(o.cuda);
  }, 90_000);

  it("the endpoint record shows what each worker got", async () => {
    await until(allFree, 20_000, 100);
    const id = await run("first", { ms: 3000 });
    const record = await until(
      async () => {
        const r = (await call(`${service.url}/v1/endpoints/${endpoint.first!.id}`, { key: KEY })).body;
        return r.workers?.length === 1 && r;
      },
      30_000,
      100,
    );
    expect(record).toMatchObject({ allocatedGpuType: "ADA_80_PRO", workers: [{ gpuType: "ADA_80_PRO", gpus: [H100[0]] }] });
    await result("first", id);
  }, 60_000);

  it("gpuCount 2: one worker gets both H100s", async () => {
    await until(allFree, 20_000, 100);
    const out = await result("pair", await run("pair", {}));
    expect(out.cuda).toBe(H100.join(","));
    expect(out.nvidia).toBe(H100.join(","));
  }, 60_000);

  it("a worker beyond the free GPUs waits, visibly; kill -9 of the holder frees its GPU and the waiting one starts", async () => {
    await until(allFree, 20_000, 100);
    const pidFile = join(dir, "only-pid");
    const a = await run("only", { ms: 6000, pidFile });
    const b = await run("only", { ms: 100 });
    const waiting = await until(
      async () => {
        const h = await health("only");
        return h.throttledReason && h;
      },
      30_000,
      100,
    );
    expect(waiting.throttledReason).toBe("waiting for a GPU (ADA_24: 1 of 1 in use)");
    expect(waiting.workers.throttled).toBe(1);
    const record = (await call(`${service.url}/v1/endpoints/${endpoint.only!.id}`, { key: KEY })).body;
    expect(record).toMatchObject({ status: "WAITING", statusReason: "waiting for a GPU (ADA_24: 1 of 1 in use)" });
    const holder = (await gpuList()).find((g) => g.uuid === RTX)!.holder!;
    expect(holder.endpointId).toBe(endpoint.only!.id);
    // The holder dies without a word: its GPU is free, the waiting worker gets it.
    await until(() => existsSync(pidFile), 30_000, 50);
    process.kill(Number(readFileSync(pidFile, "utf8")), "SIGKILL");
    const next = await until(
      async () => {
        const h = (await gpuList()).find((g) => g.uuid === RTX)!.holder;
        return h && h.workerId !== holder.workerId && h;
      },
      30_000,
      50,
    );
    expect(next.endpointId).toBe(endpoint.only!.id);
    const [outA, outB] = [await result("only", a), await result("only", b)];
    expect(outA.cuda).toBe(RTX);
    expect(outB.cuda).toBe(RTX);
    // Nothing wants a GPU any more: nothing waits.
    await until(async () => (await health("only")).throttledReason === undefined, 10_000, 100);
  }, 90_000);
});

describe("GPUs this host does not have", () => {
  it("the REST API refuses unknown ids and more GPUs than the host has (422), naming what it has", async () => {
    const template = (await call(`${service.url}/v1/templates`, { key: KEY, body: { name: "code", imageName: `svc://${endpoint.first!.id}` } })).body;
    const typo = await call(`${service.url}/v1/endpoints`, { key: KEY, body: { name: "typo", templateId: template.id, gpuTypeIds: ["ADA_24", "H100_80"] } });
    expect(typo.status).toBe(422);
    expect(typo.body.errors).toEqual([expect.stringMatching(/^\$\.gpuTypeIds\[1\]: unknown GPU type "H100_80": did you mean .*"ADA_80_PRO"/)]);
    const three = await call(`${service.url}/v1/endpoints`, {
      key: KEY,
      body: { name: "three", templateId: template.id, gpuTypeIds: ["ADA_80_PRO"], gpuCount: 3 },
    });
    expect(three.status).toBe(422);
    expect(three.body.errors).toEqual(["$.gpuCount: 3 GPU(s) of ADA_80_PRO per worker, more than this host has (ADA_80_PRO: 2 on this host, 3 needed)"]);
    const fits = await call(`${service.url}/v1/endpoints`, { key: KEY, body: { name: "fits", templateId: template.id, gpuTypeIds: ["HOPPER_141", "ADA_24"] } });
    expect(fits.status).toBe(201);
    expect(fits.body).toMatchObject({ status: "READY", allocatedGpuType: "ADA_24" });
  }, 30_000);

  it("a deploy asking for more GPUs than the host has is refused, nothing deployed", async () => {
    const resources = { ...build.manifest.resources, pair: { ...build.manifest.resources.pair!, gpuCount: 3 } };
    await expect(
      service.deploy({ app: build.manifest.app, env: "big", manifest: { ...build.manifest, resources }, artifactPath: build.artifactPath }),
    ).rejects.toThrow(/asks for GPUs this host does not have/);
  }, 30_000);
});
