import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  ArtifactCache,
  claimedName,
  claimEnvironment,
  parseClaimedName,
  poolContainerOptions,
  poolLabels,
  poolRefusal,
  poolSizes,
  POOL_ARTIFACTS_MOUNT,
} from "./docker-pool.js";
import type { WorkerLaunch } from "./types.js";

const launch: WorkerLaunch = {
  workerId: "wabc123",
  endpointId: "0123456789abcdef",
  endpointName: "echo",
  app: "a",
  env: "prod",
  artifactPath: "/data/artifacts/x.tar.gz",
  apiUrl: "http://svc-api:1234",
  workerToken: "tok",
  environment: { GREETING: "hi", SVC_WORKER_ID: "forged" },
  maxConcurrency: 2,
  computeType: "CPU",
  gpuTypeIds: [],
  onLog: () => undefined,
};
const plain = { publishes: false, requestGpus: false };

describe("which launches may claim a pre-booted container", () => {
  it("a queue endpoint on CPU with nothing fixed at create may", () => {
    expect(poolRefusal(launch, plain)).toBeUndefined();
    expect(poolRefusal({ ...launch, computeType: "GPU" }, { publishes: false, requestGpus: true })).toBeUndefined();
  });

  it("a volume, a load-balanced port, published ports, GPU on CPU fallback and a prebuilt image may not", () => {
    expect(poolRefusal({ ...launch, volumeName: "v" }, plain)).toMatch(/volume/);
    expect(poolRefusal({ ...launch, volumePath: "/data/volumes/v" }, plain)).toMatch(/volume/);
    expect(poolRefusal({ ...launch, loadBalanced: true }, plain)).toMatch(/load-balanced/);
    expect(poolRefusal(launch, { publishes: true, requestGpus: false })).toMatch(/publishes/);
    expect(poolRefusal({ ...launch, computeType: "GPU" }, plain)).toMatch(/GPU/);
    expect(poolRefusal({ ...launch, image: "nginx" }, plain)).toMatch(/prebuilt/);
  });
});

describe("pool sizes", () => {
  it("a number is that many of each kind the host can run; GPU ones only with GPUs", () => {
    expect(poolSizes(2, false)).toEqual({ cpu: 2, gpu: 0 });
    expect(poolSizes(2, true)).toEqual({ cpu: 2, gpu: 2 });
    expect(poolSizes({ gpu: 1 }, true)).toEqual({ cpu: 0, gpu: 1 });
    expect(poolSizes(undefined, true)).toEqual({ cpu: 0, gpu: 0 });
  });
});

describe("a claimed container's name", () => {
  it("says which endpoint and worker claimed it, and reads back", () => {
    const name = claimedName(launch.endpointId, launch.workerId)!;
    expect(name).toBe("svc-claimed.0123456789abcdef.wabc123");
    expect(parseClaimedName(`/${name}`)).toEqual({ endpointId: launch.endpointId, workerId: launch.workerId });
  });

  it("is not made from ids a name cannot hold, and other names are not claimed ones", () => {
    expect(claimedName("e.1", "w1")).toBeUndefined();
    expect(claimedName("e1", "w 1")).toBeUndefined();
    expect(parseClaimedName("/svc-pool-s1-cpu-0a1b2c3d")).toBeUndefined();
    expect(parseClaimedName("/svc-claimed.e1.w1.extra")).toBeUndefined();
    expect(parseClaimedName("/svc-echo-wabc123")).toBeUndefined();
  });
});

describe("the claim and the pool container", () => {
  it("the claim carries the endpoint's variables under the protocol's, which user variables cannot fake", () => {
    const env = claimEnvironment(launch, "http://172.18.0.1:1234", `${POOL_ARTIFACTS_MOUNT}/abc.tar.gz`);
    expect(env).toMatchObject({
      GREETING: "hi",
      SVC_WORKER_ID: "wabc123",
      SVC_WORKER_TOKEN: "tok",
      SVC_API_URL: "http://172.18.0.1:1234",
      SVC_ARTIFACT: "/svc/artifacts/abc.tar.gz",
      SVC_ENDPOINT_NAME: "echo",
      SVC_MAX_CONCURRENCY: "2",
    });
    expect(env.SVC_VOLUME_PATH).toBeUndefined();
    expect(env.SVC_POOLED).toBeUndefined();
  });

  it("a pool container: no endpoint in its environment or labels, stdin open for the claim, the cache read-only, removed on exit", () => {
    const labels = poolLabels("s1", "cpu", { owner: "me" });
    expect(labels).toEqual({ owner: "me", "svc.managed": "true", "svc.session": "s1", "svc.pool": "true", "svc.image.kind": "cpu" });
    const options = poolContainerOptions({
      name: "svc-pool-s1-cpu-1",
      image: "svc-worker-cpu:1",
      network: "net",
      kind: "cpu",
      labels,
      artifactCache: "/tmp/cache",
      requestGpus: false,
    });
    expect(options.Env).toEqual(["HOME=/tmp", "SVC_POOLED=1", "SVC_POOL_CHANNEL=stdin"]);
    expect(options).toMatchObject({ OpenStdin: true, StdinOnce: true, AttachStdin: true });
    expect(options.HostConfig).toMatchObject({ NetworkMode: "net", Binds: ["/tmp/cache:/svc/artifacts:ro"], AutoRemove: true, Init: true });
    expect(options.HostConfig?.DeviceRequests).toBeUndefined();
    // Confined as a fresh worker's container; the endpoint's memory and CPU come with the claim.
    expect(options.User).toBe("1000:1000");
    expect(options.HostConfig).toMatchObject({
      SecurityOpt: ["no-new-privileges"],
      CapDrop: ["ALL"],
      ReadonlyRootfs: true,
      Tmpfs: { "/tmp": "rw,exec,nosuid,nodev,size=1024m,mode=1777" },
      PidsLimit: 1024,
    });
    expect(options.HostConfig?.Memory).toBeUndefined();
    expect(options.HostConfig?.Runtime).toBeUndefined();
    expect(
      poolContainerOptions({ name: "g", image: "i", network: "n", kind: "gpu", labels, artifactCache: "/c", requestGpus: true }).HostConfig?.DeviceRequests,
    ).toHaveLength(1);
  });
});

describe("the node's artifact cache", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-pool-cache-test-"));
  afterAll(() => {
    // 0311: given back to its owner to be listed and removed.
    chmodSync(join(dir, "cache"), 0o700);
    rmSync(dir, { recursive: true, force: true });
  });

  it("stages an artifact once per content under a name only the driver's key gives, in a directory nobody lists", async () => {
    const artifact = join(dir, "a.tar.gz");
    writeFileSync(artifact, "artifact bytes");
    const cache = new ArtifactCache(join(dir, "cache"), Buffer.alloc(32, 1));
    const inContainer = await cache.stage(artifact);
    expect(inContainer).toMatch(/^\/svc\/artifacts\/[a-f0-9]{64}\.tar\.gz$/);
    const name = inContainer.slice(POOL_ARTIFACTS_MOUNT.length + 1);
    expect(readFileSync(join(dir, "cache", name), "utf8")).toBe("artifact bytes");
    expect(statSync(join(dir, "cache")).mode & 0o777).toBe(0o311);
    // Same content under another path: the same cached file. Another key: another name.
    const again = join(dir, "b.tar.gz");
    writeFileSync(again, "artifact bytes");
    expect(await cache.stage(again)).toBe(inContainer);
    expect(await new ArtifactCache(join(dir, "cache"), Buffer.alloc(32, 2)).stage(artifact)).not.toBe(inContainer);
  });
});
