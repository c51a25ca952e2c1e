// Network volumes on a real single-node swarm (`docker swarm init --advertise-addr 127.0.0.1`, left after when the
// tests made it: swarm-mode.ts): the operator's volume driver is Docker's `local` driver binding each volume's
// directory (`type=none,o=bind,device=<data dir>/volumes/{volume}`), so the Swarm workers of fixtures/volume-app
// mount the same files the S3 API serves. A file uploaded through S3 is read by a Swarm worker, a file a Swarm
// worker writes is in the volume's directory and downloads through S3; the node's Docker volume svc-vol-<id> is
// made by the driver and removed with the volume. A worker whose volume's data center has no node is refused.
// Node model caches: a worker naming models starts after a global job of svc's server image (built here) fetched
// them from the stand-in hub into the node's cache, which the worker's service mounts read-only; a second worker
// runs no job; a model the hub lacks fails the start with the fetcher's error.
// Needs the svc-worker-cpu image (built from dist/ when missing: compile first).

import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { buildProject } from "../../src/build/index.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { createSwarmDriver } from "../../src/drivers/swarm.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";
import { describeDocker, docker, engineUp } from "../docker/engine.js";
import { joinSwarm, leaveSwarm } from "./swarm-mode.js";
import { errorMessage } from "../../src/errors.js";
import { ensureServerImage } from "../../src/drivers/images.js";
import { startFakeHub } from "../fakes/hf-hub.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "swarm-volume-admin-key";
const session = `svctestvol${Date.now().toString(36)}`;
let dir: string | undefined;
let service: Service | undefined;
let driver: WorkerDriver | undefined;

const sessionServices = async () => (await docker.listServices({ filters: { label: [`${LABELS.session}=${session}`] } })) as Array<{ ID: string }>;
const sessionVolumes = async () =>
  ((await docker.listVolumes({ filters: { label: [`${LABELS.session}=${session}`] } })).Volumes ?? []) as Array<{
    Name: string;
    Driver: string;
    Labels?: Record<string, string>;
    Options?: Record<string, string>;
  }>;

beforeAll(() => {
  if (engineUp) joinSwarm();
}, 180_000);

afterAll(async () => {
  await service?.close();
  if (engineUp) {
    for (const s of await sessionServices().catch(() => []))
      await docker
        .getService(s.ID)
        .remove()
        .catch(() => undefined);
    // A volume is in use until its task's container is gone: wait a little for Swarm to remove them.
    for (let i = 0; i < 40 && (await sessionVolumes().catch(() => [])).length > 0; i++) {
      for (const v of await sessionVolumes().catch(() => []))
        await docker
          .getVolume(v.Name)
          .remove()
          .catch(() => undefined);
      await new Promise((r) => setTimeout(r, 250));
    }
    leaveSwarm();
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 120_000);

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describeDocker("network volumes on Swarm workers", () => {
  it("a Swarm worker reads what S3 put in the volume and writes what S3 and the volume's directory then hold; the node's volume goes with it", async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-swarm-volumes-"));
    const dataDir = join(dir, "data");
    cpSync(join(repo, "fixtures", "volume-app"), join(dir, "app"), { recursive: true });
    // Its own app name: the services it makes are this test's alone.
    writeFileSync(join(dir, "app", "package.json"), JSON.stringify({ name: `swarmvol-${Date.now().toString(36)}`, private: true, type: "module" }));
    driver = createSwarmDriver({ session, volumes: { driver: "local", options: { type: "none", o: "bind", device: `${dataDir}/volumes/{volume}` } } });
    service = await startService({ dataDir, apiKeys: [KEY], driver, leaseMs: 5000, heartbeatMs: 500 });
    const volume: string = (await call(`${service.url}/v2/network-volumes`, { key: KEY, body: { name: "shared-data", size: 10, dataCenter: "local" } })).body
      .id;
    const build = await buildProject(join(dir, "app"));
    const endpoints: Record<string, DeployedEndpoint> = Object.fromEntries(
      (await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath })).map((e) => [e.name, e]),
    );
    const k = (await call(`${service.url}/v1/volume-keys`, { key: KEY, body: {} })).body;
    const s3 = new S3Client({
      endpoint: k.endpoint,
      region: k.region,
      forcePathStyle: true,
      credentials: { accessKeyId: k.accessKeyId, secretAccessKey: k.secretAccessKey },
      maxAttempts: 1,
    });

    await s3.send(new PutObjectCommand({ Bucket: volume, Key: "weights.txt", Body: "weights uploaded with the AWS SDK" }));
    const read = await call(`${endpoints.reader!.url}/runsync?wait=120000`, { key: KEY, body: { input: { file: "weights.txt" } } });
    expect(read.body).toMatchObject({ status: "COMPLETED", output: { text: "weights uploaded with the AWS SDK", volume: "/svc-volume" } });

    const wrote = await call(`${endpoints.writer!.url}/runsync?wait=120000`, {
      key: KEY,
      body: { input: { file: "result.txt", text: "written by a Swarm worker" } },
    });
    expect(wrote.body).toMatchObject({ status: "COMPLETED", output: { volume: "/svc-volume" } });
    expect(readFileSync(join(dataDir, "volumes", volume, "result.txt"), "utf8")).toBe("written by a Swarm worker");
    const got = await s3.send(new GetObjectCommand({ Bucket: volume, Key: "result.txt" }));
    expect(await got.Body!.transformToString()).toBe("written by a Swarm worker");

    // The node made svc-vol-<id> with the operator's driver and options, labelled as svc's.
    const [made] = await sessionVolumes();
    expect(made).toMatchObject({ Name: `svc-vol-${volume}`, Driver: "local", Labels: { [LABELS.managed]: "true", [LABELS.volume]: volume } });
    expect(made!.Options).toEqual({ type: "none", o: "bind", device: `${dataDir}/volumes/${volume}` });

    // Both workers idle out (1 s), then the volume's Docker volume is removed with it; its files are the service's.
    await until("the workers' services gone", async () => ((await sessionServices()).length === 0 ? true : undefined), 60_000);
    await until(
      "the volume free of containers",
      async () => {
        try {
          await driver!.removeVolume!(volume);
          return true;
        } catch (err) {
          if (/in use/.test(errorMessage(err))) return undefined;
          throw err;
        }
      },
      60_000,
    );
    expect(await sessionVolumes()).toEqual([]);
    expect(existsSync(join(dataDir, "volumes", volume, "result.txt"))).toBe(true);
  }, 300_000);

  it("refuses a worker whose volume's data center has no node of the swarm, before making anything", async () => {
    const d = createSwarmDriver({ session, volumes: { driver: "local", options: { type: "none", o: "bind", device: "/nowhere/{volume}" } } });
    const launch = {
      workerId: "w1",
      endpointId: "ep1",
      endpointName: "reader",
      app: "app",
      env: "test",
      artifactPath: "/nowhere/a.tar.gz",
      artifactUrl: "http://127.0.0.1:1/_worker/v1/artifacts/a",
      apiUrl: "http://127.0.0.1:1",
      workerToken: "t",
      environment: {},
      maxConcurrency: 1,
      computeType: "CPU" as const,
      gpuTypeIds: [],
      volume: { id: "vol0123456789ab", sizeGb: 10 },
      volumePath: "/nowhere/vol0123456789ab",
      placement: { gpus: 0, dataCenter: "eu-nowhere-1" },
      onLog: () => undefined,
    };
    await expect(d.start(launch)).rejects.toThrow(/data center eu-nowhere-1.*docker node update --label-add svc.data-center=eu-nowhere-1/);
    expect(await sessionServices()).toEqual([]);
    await d.close();
  }, 60_000);

  it("a worker naming models: a global job fetches them into the node's cache first, once; a model the hub lacks fails the start", async () => {
    const hub = await startFakeHub();
    const commit = "e".repeat(40);
    hub.add("acme/tiny", commit, [{ name: "config.json", content: Buffer.from('{"model_type": "bert"}') }]);
    const cacheParent = mkdtempSync(join(tmpdir(), "svc-node-cache-"));
    const nodeCache = join(cacheParent, "models");
    const fetcher = await ensureServerImage(docker);
    const d = createSwarmDriver({ session, image: "svc-worker-cpu:0.1.0", models: { path: nodeCache, image: fetcher.hashTag } });
    const jobs = async () => (await docker.listServices({ filters: { label: ["svc.models-fetch=true", `${LABELS.session}=${session}`] } })) as unknown[];
    const launch = (workerId: string, models: string[]) => ({
      workerId,
      endpointId: "epm",
      endpointName: "embedder",
      app: "app",
      env: "test",
      artifactPath: "/nowhere/a.tar.gz",
      artifactUrl: "http://127.0.0.1:1/_worker/v1/artifacts/a",
      apiUrl: "http://127.0.0.1:1",
      workerToken: "t",
      environment: {},
      maxConcurrency: 1,
      computeType: "CPU" as const,
      gpuTypeIds: [],
      models,
      modelHub: { url: hub.url },
      onLog: () => undefined,
    });
    try {
      expect(d.nodeModelCache).toBe(true);
      const first = await d.start(launch("wm1", ["acme/tiny@main"]));
      // In huggingface_hub's layout on the node, before the worker's service was made.
      expect(readFileSync(join(nodeCache, "hub", "models--acme--tiny", "snapshots", commit, "config.json"), "utf8")).toBe('{"model_type": "bert"}');
      expect(hub.requests.filter((r) => r.method === "GET").length).toBe(2);
      const [worker] = (await sessionServices()) as Array<{ ID: string }>;
      const spec = (await docker.getService(worker!.ID).inspect()) as { Spec: { TaskTemplate: { ContainerSpec: { Mounts?: unknown[]; Env?: string[] } } } };
      expect(spec.Spec.TaskTemplate.ContainerSpec.Mounts).toContainEqual({ Type: "bind", Source: nodeCache, Target: "/svc-models", ReadOnly: true });
      expect(spec.Spec.TaskTemplate.ContainerSpec.Env).toContain("HF_HUB_OFFLINE=1");
      expect(await jobs()).toEqual([]);
      // This node holds them now: the next worker runs no job and asks the hub nothing.
      const asked = hub.requests.length;
      const second = await d.start(launch("wm2", ["acme/tiny@main"]));
      expect(hub.requests.length).toBe(asked);
      first.kill();
      second.kill();
      await expect(d.start(launch("wm3", ["acme/missing@main"]))).rejects.toThrow(
        /fetch of its models on node \S+ failed: Model acme\/missing@main cannot be fetched .*not_found/,
      );
      expect(await jobs()).toEqual([]);
    } finally {
      await d.close();
      await hub.close();
      rmSync(cacheParent, { recursive: true, force: true });
    }
  }, 300_000);
});
