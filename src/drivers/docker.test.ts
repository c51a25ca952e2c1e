import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { describe, expect, it } from "vitest";
import { UserError } from "../errors.js";
import { createDockerDriver } from "./docker.js";
import {
  containerCreateOptions,
  containerEnv,
  containerLabels,
  exitFromStatus,
  gpuDecision,
  isLoopbackUrl,
  LB_CONTAINER_PORT,
  networkNameFor,
  publishedPorts,
  startError,
  volumeFor,
  type ContainerPlan,
} from "./docker-spec.js";
import type { WorkerLaunch } from "./types.js";

function launch(over: Partial<WorkerLaunch> = {}): WorkerLaunch {
  return {
    workerId: "w123",
    endpointId: "ep1",
    endpointName: "gpu-worker",
    app: "shop",
    env: "prod",
    artifactPath: "/data/artifacts/abc.tar.gz",
    apiUrl: "http://127.0.0.1:4000",
    workerToken: "svcw_token",
    apiKey: "svc_key",
    environment: { MODEL: "tiny", SVC_API_URL: "http://user-cannot-override", SVC_ARTIFACT_DIR: "/host/only" },
    maxConcurrency: 2,
    computeType: "CPU",
    gpuTypeIds: [],
    onLog: () => undefined,
    ...over,
  };
}

const plan = (over: Partial<ContainerPlan> = {}): ContainerPlan => ({
  name: "svc-gpu-worker-w123",
  image: "svc-worker-cpu:1.0.0",
  network: "svc-shop-prod",
  serviceHostIp: "172.18.0.1",
  apiUrl: "http://svc-api:40123",
  labels: containerLabels(launch(), "sess1"),
  requestGpus: false,
  publish: [],
  ...over,
});

describe("gpuDecision", () => {
  const none = { available: false, reason: "this host has no NVIDIA GPU" };
  it("requests GPUs when the host has them; CPU endpoints never", () => {
    expect(gpuDecision("GPU", { available: true, reason: "" }, false, "e")).toEqual({ requestGpus: true });
    expect(gpuDecision("CPU", none, false, "e")).toEqual({ requestGpus: false });
  });
  it("refuses a GPU endpoint on a host without GPUs, naming why, unless CPU fallback is allowed", () => {
    expect(() => gpuDecision("GPU", none, false, "llm")).toThrow(UserError);
    expect(() => gpuDecision("GPU", none, false, "llm")).toThrow(/GPU endpoint "llm": this host has no NVIDIA GPU/);
    const fallback = gpuDecision("GPU", none, true, "llm");
    expect(fallback.requestGpus).toBe(false);
    expect(fallback.warning).toMatch(/running it on CPU/);
  });
});

describe("names", () => {
  it("names networks per app/environment or per session", () => {
    expect(networkNameFor("app-env", { app: "My App", env: "prod" }, "s1")).toBe("svc-my-app-prod");
    expect(networkNameFor("session", { app: "a", env: "b" }, "S1")).toBe("svc-session-s1");
  });
  it("names Docker volumes by volumeName, scoped to the session on request; a launch with a host directory gets none (it is bind-mounted)", () => {
    expect(volumeFor({}, "persistent", "s")).toBeUndefined();
    expect(volumeFor({ volumeName: "Models" }, "persistent", "s")).toEqual({ name: "svc-vol-models", key: "Models" });
    expect(volumeFor({ volumeName: "models" }, "session", "s9")!.name).toBe("svc-vol-s9-models");
    expect(volumeFor({ volumePath: "/data/one/volumes/vol0123456789ab" }, "persistent", "s")).toBeUndefined();
    expect(volumeFor({ volumePath: "/data/one/volumes/vol0123456789ab", volumeName: "models" }, "session", "s")).toBeUndefined();
  });
  it("knows loopback service URLs", () => {
    expect(isLoopbackUrl("http://127.0.0.1:4000")).toBe(true);
    expect(isLoopbackUrl("http://localhost:4000/")).toBe(true);
    expect(isLoopbackUrl("http://[::1]:4000")).toBe(true);
    expect(isLoopbackUrl("https://svc.example.com")).toBe(false);
  });
});

describe("containerCreateOptions", () => {
  it("gives the worker the protocol environment, which user variables cannot override", () => {
    const env = containerEnv(launch(), "http://svc-api:40123", true);
    expect(env).toEqual(
      expect.arrayContaining([
        "MODEL=tiny",
        "SVC_API_URL=http://svc-api:40123",
        "SVC_WORKER_ID=w123",
        "SVC_WORKER_TOKEN=svcw_token",
        "SVC_ENDPOINT_ID=ep1",
        "SVC_ENDPOINT_NAME=gpu-worker",
        "SVC_APP=shop",
        "SVC_ENV=prod",
        "SVC_API_KEY=svc_key",
        "SVC_ARTIFACT=/svc/artifact.tar.gz",
        "SVC_MAX_CONCURRENCY=2",
        "SVC_VOLUME_PATH=/svc-volume",
      ]),
    );
    expect(env.some((e) => e.startsWith("SVC_ARTIFACT_DIR="))).toBe(false);
    expect(env.filter((e) => e.startsWith("SVC_API_URL="))).toHaveLength(1);
    expect(containerEnv(launch(), "http://x", false).some((e) => e.startsWith("SVC_VOLUME_PATH="))).toBe(false);
  });

  it("labels, mounts the artifact read-only, maps svc-api to the gateway and publishes only on 127.0.0.1", () => {
    const options = containerCreateOptions(
      launch(),
      plan({ volume: "svc-vol-models", publish: [{ containerPort: 8080 }, { containerPort: 9000, hostPort: 19000 }] }),
    );
    expect(options.Labels).toEqual({
      "svc.managed": "true",
      "svc.app": "shop",
      "svc.env": "prod",
      "svc.endpoint": "ep1",
      "svc.session": "sess1",
      "svc.worker": "w123",
    });
    expect(options.HostConfig?.Binds).toEqual(["/data/artifacts/abc.tar.gz:/svc/artifact.tar.gz:ro"]);
    expect(options.HostConfig?.ExtraHosts).toEqual(["svc-api:172.18.0.1"]);
    expect(options.HostConfig?.NetworkMode).toBe("svc-shop-prod");
    expect(options.HostConfig?.Mounts).toEqual([{ Type: "volume", Source: "svc-vol-models", Target: "/svc-volume", ReadOnly: false }]);
    expect(options.HostConfig?.PortBindings).toEqual({
      "8080/tcp": [{ HostIp: "127.0.0.1", HostPort: "" }],
      "9000/tcp": [{ HostIp: "127.0.0.1", HostPort: "19000" }],
    });
    expect(options.HostConfig?.DeviceRequests).toBeUndefined();
    expect(containerCreateOptions(launch(), plan()).HostConfig?.PortBindings).toEqual({});
  });
  it("bind-mounts the volume's host directory: the same files the process driver's workers get", () => {
    const options = containerCreateOptions(launch({ volumePath: "/data/volumes/vol0123456789ab" }), plan({ volumeHostPath: "/data/volumes/vol0123456789ab" }));
    expect(options.HostConfig?.Mounts).toEqual([{ Type: "bind", Source: "/data/volumes/vol0123456789ab", Target: "/svc-volume", ReadOnly: false }]);
    expect(options.Env).toContain("SVC_VOLUME_PATH=/svc-volume");
  });

  it("mounts the host's model cache read-only and points huggingface_hub at it, offline, whatever the endpoint's env says", () => {
    const options = containerCreateOptions(launch({ modelCache: "/data/models", environment: { HF_HUB_OFFLINE: "0", HF_HOME: "/elsewhere" } }), plan());
    expect(options.HostConfig?.Mounts).toEqual([{ Type: "bind", Source: "/data/models", Target: "/svc-models", ReadOnly: true }]);
    expect(options.Env).toEqual(expect.arrayContaining(["HF_HOME=/svc-models", "HF_HUB_CACHE=/svc-models/hub", "HF_HUB_OFFLINE=1"]));
    expect(options.Env).not.toContain("HF_HOME=/elsewhere");
    const provider = containerCreateOptions(launch({ modelCache: "/data/models", image: "acme/worker:1", protocol: "provider" }), plan());
    expect(provider.Env).toEqual(expect.arrayContaining(["HF_HOME=/svc-models", "HF_HUB_OFFLINE=1"]));
    expect(containerCreateOptions(launch(), plan()).Env?.some((e) => e.startsWith("HF_"))).toBe(false);
  });

  it("load-balanced workers listen on every interface at the fixed container port, published on loopback only", () => {
    expect(LB_CONTAINER_PORT).toBe(8080);
    expect(publishedPorts(launch({ loadBalanced: true }))).toEqual([{ containerPort: 8080 }]);
    expect(publishedPorts(launch({ loadBalanced: true }), [{ containerPort: 8080, hostPort: 18080 }])).toEqual([{ containerPort: 8080, hostPort: 18080 }]);
    expect(publishedPorts(launch())).toEqual([]);
    const options = containerCreateOptions(launch({ loadBalanced: true }), plan({ publish: publishedPorts(launch({ loadBalanced: true })), httpPort: 8080 }));
    expect(options.Env).toEqual(expect.arrayContaining(["SVC_HTTP_HOST=0.0.0.0", "SVC_HTTP_PORT=8080"]));
    expect(options.HostConfig?.PortBindings).toEqual({ "8080/tcp": [{ HostIp: "127.0.0.1", HostPort: "" }] });
    // Queue-based workers keep the runtime's loopback default (no server to reach).
    expect(containerEnv(launch(), "http://x", false).some((e) => e.startsWith("SVC_HTTP_"))).toBe(false);
  });

  it("adds the driver's extra labels (a preview's owner) without letting them replace svc's own", () => {
    const labels = containerLabels(launch(), "sess1", { "svc.preview": "true", "svc.session": "forged" });
    expect(labels).toMatchObject({ "svc.preview": "true", "svc.session": "sess1", "svc.worker": "w123" });
  });

  it("confines the worker: non-root, no capabilities, no-new-privileges, read-only root, a bounded /tmp, the instance's limits", () => {
    const options = containerCreateOptions(launch({ placement: { cpus: 2, memoryMb: 4096, gpus: 0 } }), plan());
    expect(options.User).toBe("1000:1000");
    expect(options.HostConfig).toMatchObject({
      SecurityOpt: ["no-new-privileges"],
      CapDrop: ["ALL"],
      ReadonlyRootfs: true,
      // exec: native addons of the artifact unpacked there are mapped executable.
      Tmpfs: { "/tmp": "rw,exec,nosuid,nodev,size=1024m,mode=1777" },
      PidsLimit: 1024,
      Memory: 4 * 1024 ** 3,
      MemorySwap: 4 * 1024 ** 3,
      NanoCpus: 2_000_000_000,
    });
    expect(options.HostConfig?.Runtime).toBeUndefined();
    expect(options.HostConfig?.Privileged).toBeUndefined();
    // HOME is writable (/tmp) unless the endpoint names its own.
    expect(options.Env).toContain("HOME=/tmp");
    expect(containerEnv(launch({ environment: { HOME: "/svc-volume/home" } }), "http://x", true)).toContain("HOME=/svc-volume/home");
    // The driver's limits and runtime; no instance shape (GPU endpoints): no memory or CPU limit.
    const gvisor = containerCreateOptions(
      launch({ computeType: "GPU", placement: { gpus: 1 } }),
      plan({ limits: { pidsLimit: 64, tmpMb: 256 }, runtime: "runsc" }),
    );
    expect(gvisor.HostConfig).toMatchObject({ Runtime: "runsc", PidsLimit: 64, Tmpfs: { "/tmp": "rw,exec,nosuid,nodev,size=256m,mode=1777" } });
    expect(gvisor.HostConfig?.Memory).toBeUndefined();
    expect(gvisor.HostConfig?.NanoCpus).toBeUndefined();
  });

  it("a prebuilt image: confined the same, but under its own user and with the writable layer its template allows", () => {
    const options = containerCreateOptions(
      launch({ image: "nginx:1", loadBalanced: true, placement: { cpus: 1, memoryMb: 2048, gpus: 0 }, containerDiskInGb: 10 }),
      plan({ httpPort: 8080 }),
    );
    expect(options.User).toBeUndefined();
    expect(options.HostConfig).toMatchObject({
      SecurityOpt: ["no-new-privileges"],
      CapDrop: ["ALL"],
      ReadonlyRootfs: false,
      PidsLimit: 1024,
      Memory: 2048 * 1024 ** 2,
    });
    expect(options.Env!.some((e) => e.startsWith("HOME="))).toBe(false);
    // Bounded only where the engine can bound a layer.
    expect(options.HostConfig!.StorageOpt).toBeUndefined();
    expect(containerCreateOptions(launch({ image: "nginx:1", containerDiskInGb: 10 }), plan({ boundsLayer: true })).HostConfig!.StorageOpt).toEqual({
      size: "10G",
    });
  });

  it("a prebuilt image whose template allows no container disk (containerDiskInGb 0, or none said) gets a read-only root, as svc's own", () => {
    for (const containerDiskInGb of [0, undefined]) {
      const options = containerCreateOptions(launch({ image: "acme/worker:1", protocol: "provider", containerDiskInGb }), plan({ boundsLayer: true }));
      expect(options.HostConfig).toMatchObject({ ReadonlyRootfs: true, Tmpfs: { "/tmp": expect.any(String) } });
      expect(options.HostConfig!.StorageOpt).toBeUndefined();
    }
  });

  it("a provider worker image: the provider's variables and its token, the volume at /runpod-volume too, GPUs by UUID, confined the same", () => {
    const options = containerCreateOptions(
      launch({
        image: "acme/worker:1",
        protocol: "provider",
        heartbeatMs: 2000,
        workerToken: "tok",
        computeType: "GPU",
        gpus: ["GPU-aaaa"],
        environment: { MODEL: "m", SVC_API_URL: "x" },
        containerDiskInGb: 20,
      }),
      plan({ volumeHostPath: "/data/volumes/vol0123456789ab", requestGpus: true }),
    );
    expect(options.User).toBeUndefined();
    expect(options.HostConfig?.Binds).toEqual([]);
    expect(options.HostConfig?.Mounts?.map((m) => [m.Source, m.Target])).toEqual([
      ["/data/volumes/vol0123456789ab", "/svc-volume"],
      ["/data/volumes/vol0123456789ab", "/runpod-volume"],
    ]);
    expect(options.HostConfig?.DeviceRequests).toEqual([{ Driver: "nvidia", DeviceIDs: ["GPU-aaaa"], Capabilities: [["gpu"]] }]);
    expect(options.HostConfig).toMatchObject({ SecurityOpt: ["no-new-privileges"], CapDrop: ["ALL"], ReadonlyRootfs: false });
    expect(options.Env).toEqual(expect.arrayContaining(["MODEL=m", "RUNPOD_AI_API_KEY=tok", "RUNPOD_PING_INTERVAL=2000", "CUDA_VISIBLE_DEVICES=GPU-aaaa"]));
    expect(options.Env!.filter((e) => e.startsWith("SVC_") || e.startsWith("PORT=") || e.startsWith("HOME="))).toEqual([]);
    expect(options.HostConfig?.ShmSize).toBeUndefined();
    // A bigger /dev/shm only where its template allows one.
    expect(containerCreateOptions(launch({ image: "acme/worker:1", protocol: "provider", shmSizeMb: 512 }), plan()).HostConfig?.ShmSize).toBe(
      512 * 1024 * 1024,
    );
  });

  it("gives a GPU worker exactly the GPUs it holds, by UUID, and says so in its environment", () => {
    const gpus = ["GPU-aaaa", "GPU-bbbb"];
    const options = containerCreateOptions(launch({ computeType: "GPU", gpus }), plan({ requestGpus: true }));
    expect(options.HostConfig?.DeviceRequests).toEqual([{ Driver: "nvidia", DeviceIDs: ["GPU-aaaa", "GPU-bbbb"], Capabilities: [["gpu"]] }]);
    expect(options.Env).toEqual(expect.arrayContaining(["CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb", "NVIDIA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb"]));
  });

  it("a CPU worker: no device request, and no GPU even where the NVIDIA runtime is the default", () => {
    const options = containerCreateOptions(launch({ gpus: [], environment: { NVIDIA_VISIBLE_DEVICES: "all" } }), plan());
    expect(options.HostConfig?.DeviceRequests).toBeUndefined();
    expect(options.Env).toEqual(expect.arrayContaining(["CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void"]));
  });

  it("without an assignment (no GPU inventory where the service runs) requests every GPU, as before assignment", () => {
    const options = containerCreateOptions(launch({ computeType: "GPU" }), plan({ requestGpus: true }));
    expect(options.HostConfig?.DeviceRequests).toEqual([{ Driver: "", Count: -1, DeviceIDs: [], Capabilities: [["gpu"]], Options: {} }]);
  });
});

describe("exits and errors", () => {
  it("reads 137 and 143 as the signals that caused them", () => {
    expect(exitFromStatus(0)).toEqual({ code: 0, signal: null });
    expect(exitFromStatus(3)).toEqual({ code: 3, signal: null });
    expect(exitFromStatus(137)).toEqual({ code: null, signal: "SIGKILL" });
    expect(exitFromStatus(143)).toEqual({ code: null, signal: "SIGTERM" });
  });
  it("turns engine failures into user errors", () => {
    const context = { image: "svc-worker-cpu:1", endpointName: "api" };
    const portTaken = Object.assign(new Error("(HTTP code 500) server error - x"), {
      statusCode: 500,
      json: { message: "Bind for 127.0.0.1:8080 failed: port is already allocated" },
    });
    expect(startError(portTaken, context)).toBeInstanceOf(UserError);
    expect(startError(portTaken, context).message).toMatch(/published port is in use/);
    const noImage = Object.assign(new Error("x"), { statusCode: 404, json: { message: "No such image: svc-worker-cpu:1" } });
    expect((startError(noImage, context) as UserError).hint).toMatch(/svc images build/);
    const noRuntime = Object.assign(new Error("x"), { statusCode: 400, json: { message: "Unknown runtime specified runsc" } });
    expect(startError(noRuntime, context).message).toMatch(/the engine has no such runtime/);
    expect((startError(noRuntime, context) as UserError).hint).toMatch(/apt-get install runsc.*ensure-docker\.sh/);
    const oldRunsc = Object.assign(new Error("x"), {
      statusCode: 500,
      json: {
        message:
          'OCI runtime start failed: starting container: setting up network: creating interfaces from net namespace "/proc/1/ns/net": cannot run with network enabled in root network namespace: unknown',
      },
    });
    expect(startError(oldRunsc, context).message).toMatch(/runsc is too old for this kernel/);
    expect((startError(oldRunsc, context) as UserError).hint).toMatch(/--network=host/);
    const refused = Object.assign(new Error("connect ECONNREFUSED /var/run/docker.sock"), { code: "ECONNREFUSED" });
    expect((startError(refused, context) as UserError).hint).toMatch(/ensure-docker\.sh/);
  });
});

describe("createDockerDriver without an engine", () => {
  it("fails start() with a user error saying how to start one (a real socket path nobody listens on)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-docker-none-"));
    const driver = createDockerDriver({ docker: new Docker({ socketPath: join(dir, "docker.sock") }) });
    try {
      const err = await driver.start(launch()).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UserError);
      expect((err as UserError).message).toMatch(/No Docker engine answers/);
      expect((err as UserError).hint).toMatch(/scripts\/ensure-docker\.sh/);
      expect((err as UserError).hint).toMatch(/dockerd/);
    } finally {
      await driver.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
