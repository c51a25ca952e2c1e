import { describe, expect, it } from "vitest";
import type { WorkerDriver, WorkerHandle, WorkerLaunch } from "../../drivers/types.js";
import type { JobEngine } from "../engine/index.js";
import type { EndpointRow } from "../store/types.js";
import { imageNotice, planScaling, providerImageOf, Scaler, snapshotNotice, type ScalingInput } from "./scaler.js";

const base: ScalingInput = {
  workersMin: 0,
  workersMax: 3,
  maxConcurrency: 1,
  idleTimeoutMs: 1000,
  queued: 0,
  inProgress: 0,
  revision: "r2",
  workers: [],
  now: 10_000,
  backoffUntil: 0,
};
const worker = (id: string, state: "initializing" | "idle" | "running", idleSince = 10_000, revision = "r2") => ({ id, state, idleSince, revision });

describe("planScaling", () => {
  it("starts workers from zero for waiting jobs, up to workersMax and by concurrency", () => {
    expect(planScaling({ ...base, queued: 1 })).toEqual({ start: 1, drain: [] });
    expect(planScaling({ ...base, queued: 10 })).toEqual({ start: 3, drain: [] });
    expect(planScaling({ ...base, queued: 10, maxConcurrency: 4 })).toEqual({ start: 3, drain: [] });
    expect(planScaling({ ...base, queued: 3, maxConcurrency: 4 })).toEqual({ start: 1, drain: [] });
    expect(planScaling({ ...base, queued: 2, workers: [worker("a", "initializing")] })).toEqual({ start: 1, drain: [] });
  });

  it("keeps workersMin running with nothing to do", () => {
    expect(planScaling({ ...base, workersMin: 2 })).toEqual({ start: 2, drain: [] });
    expect(planScaling({ ...base, workersMin: 1, workers: [worker("a", "idle", 0)] })).toEqual({ start: 0, drain: [] });
  });

  it("drains idle workers above the minimum after idleTimeout, oldest idle first", () => {
    const workers = [worker("a", "idle", 9_500), worker("b", "idle", 8_000), worker("c", "running")];
    expect(planScaling({ ...base, inProgress: 1, workers })).toEqual({ start: 0, drain: ["b"] });
    expect(planScaling({ ...base, inProgress: 1, workers, now: 20_000 })).toEqual({ start: 0, drain: ["b", "a"] });
    expect(planScaling({ ...base, queued: 1, inProgress: 1, workers, now: 20_000 }).drain).toEqual([]);
  });

  it("waits out the crash backoff before starting more", () => {
    expect(planScaling({ ...base, queued: 1, backoffUntil: 10_500 })).toEqual({ start: 0, drain: [] });
    expect(planScaling({ ...base, queued: 1, backoffUntil: 9_000 })).toEqual({ start: 1, drain: [] });
  });

  it("replaces workers of an old revision: idle ones at once, busy ones once new workers exist", () => {
    const old = [worker("a", "idle", 10_000, "r1"), worker("b", "running", 10_000, "r1")];
    expect(planScaling({ ...base, inProgress: 1, queued: 1, workers: old })).toEqual({ start: 2, drain: ["a", "b"] });
    expect(planScaling({ ...base, workers: [worker("a", "idle", 10_000, "r1")] })).toEqual({ start: 0, drain: ["a"] });
  });
});

describe("Scaler adoption", () => {
  it("hands an adopted worker's driver addresses to the load balancer, as a started worker's, and its output to onLog", async () => {
    const handle: WorkerHandle = {
      workerId: "wadopted",
      exited: new Promise(() => undefined),
      stop: async () => ({ code: null, signal: null }),
      kill: () => undefined,
      address: "http://10.244.0.7:8080",
      directAddress: "http://10.244.0.7:8080",
      localSocket: "/tmp/svc-lb-wadopted.sock",
    };
    const driver: WorkerDriver = {
      name: "kubernetes",
      start: () => Promise.reject(new Error("this test starts no worker")),
      async adopt(onLog) {
        onLog?.("ep1", "wadopted", { ts: 1, stream: "stdout", text: "a line after the adoption", jobId: "j1" });
        return [{ handle, endpointId: "ep1", revision: "r1" }];
      },
      close: async () => undefined,
    };
    // The engine as far as adoption uses it: a worker entry per id, nothing queued.
    const engine = {
      ensureWorker: () => ({}),
      workerGone: () => undefined,
      drain: () => undefined,
      workers: new Map(),
      queuedCount: () => 0,
      runningCount: () => 0,
    } as unknown as JobEngine;
    const told: Array<[string, string, string | undefined]> = [];
    const logs: Array<[string, string, string, string | undefined]> = [];
    const scaler = new Scaler(
      {
        engine,
        driver,
        apiUrl: "http://svc.test:8600",
        mintWorkerKeys: () => Promise.reject(new Error("no keys in this test")),
        revokeWorkerKeys: async () => undefined,
        endpoints: () => [],
        onLog: (endpointId, workerId, line) => logs.push([endpointId, workerId, line.text, line.jobId]),
        lb: {
          load: () => ({ queued: 0, inProgress: 0 }),
          busy: () => false,
          workerAddress: (id, address) => told.push(["address", id, address]),
          workerSocket: (id, path) => told.push(["socket", id, path]),
          workerDirectAddress: (id, address) => told.push(["direct", id, address]),
        },
      },
      60_000,
    );
    await scaler.start();
    expect(told).toEqual([
      ["address", "wadopted", "http://10.244.0.7:8080"],
      ["socket", "wadopted", "/tmp/svc-lb-wadopted.sock"],
      ["direct", "wadopted", "http://10.244.0.7:8080"],
    ]);
    expect(logs).toEqual([["ep1", "wadopted", "a line after the adoption", "j1"]]);
    await scaler.close();
  });
});

describe("Scaler adoption and the model cache", () => {
  it("holds the models an adopted worker's endpoint names, so the cache keeps them while it runs, and lets them go when it ends", async () => {
    let exit!: (e: { code: number | null; signal: string | null }) => void;
    const handle: WorkerHandle = {
      workerId: "wkept",
      exited: new Promise((resolve) => (exit = resolve)),
      stop: async () => ({ code: null, signal: null }),
      kill: () => undefined,
    };
    const driver: WorkerDriver = {
      name: "process",
      start: () => Promise.reject(new Error("this test starts no worker")),
      adopt: async () => [{ handle, endpointId: "ep1", revision: "r1" }],
      close: async () => undefined,
    };
    const engine = {
      ensureWorker: () => ({}),
      workerGone: () => undefined,
      drain: () => undefined,
      workers: new Map(),
      queuedCount: () => 0,
      runningCount: () => 0,
    } as unknown as JobEngine;
    const held = new Map<string, readonly string[]>();
    const endpoint = { id: "ep1", name: "llm", userId: "u1", revision: "r1", resource: { models: ["acme/tiny@main", "acme/vocab@v2"] } };
    const scaler = new Scaler(
      {
        engine,
        driver,
        apiUrl: "http://svc.test:8600",
        mintWorkerKeys: () => Promise.reject(new Error("no keys in this test")),
        revokeWorkerKeys: async () => undefined,
        endpoints: () => [endpoint] as unknown as Iterable<EndpointRow>,
        onLog: () => undefined,
        models: {
          root: "/data/models",
          ready: () => true,
          ensure: async () => undefined,
          hold: (workerId, models) => held.set(workerId, models),
          release: (workerId) => held.delete(workerId),
          reason: () => undefined,
          fetching: () => false,
        },
      },
      60_000,
    );
    await scaler.start();
    expect([...held]).toEqual([["wkept", ["acme/tiny@main", "acme/vocab@v2"]]]);
    exit({ code: 0, signal: null });
    await new Promise((r) => setTimeout(r, 20));
    expect([...held]).toEqual([]);
    await scaler.close();
  });
});

describe("Scaler stopping workers", () => {
  it("says and counts a worker its driver failed to stop, with the worker's id and the driver's error", async () => {
    const handle: WorkerHandle = {
      workerId: "wstuck",
      exited: new Promise(() => undefined),
      stop: () => Promise.reject(new Error("the Docker daemon did not answer")),
      kill: () => undefined,
    };
    const driver: WorkerDriver = {
      name: "docker",
      start: () => Promise.reject(new Error("this test starts no worker")),
      adopt: async () => [{ handle, endpointId: "ep1", revision: "r1" }],
      close: async () => undefined,
    };
    const engine = {
      ensureWorker: () => ({}),
      workerGone: () => undefined,
      drain: () => undefined,
      workers: new Map(),
      queuedCount: () => 0,
      runningCount: () => 0,
    } as unknown as JobEngine;
    const events: string[] = [];
    const scaler = new Scaler(
      {
        engine,
        driver,
        apiUrl: "http://svc.test:8600",
        mintWorkerKeys: () => Promise.reject(new Error("no keys in this test")),
        revokeWorkerKeys: async () => undefined,
        endpoints: () => [],
        onLog: () => undefined,
        onEvent: (message) => events.push(message),
      },
      60_000,
    );
    await scaler.start();
    expect(await scaler.stopWorkersOf(new Set(["ep1"]), 100)).toBe(false);
    expect(events).toContain("the docker driver failed to stop worker wstuck of endpoint ep1: the Docker daemon did not answer");
    expect(scaler.stopFailures.get("ep1")).toEqual({ count: 1, lastError: "the Docker daemon did not answer" });
    await scaler.close();
    expect(scaler.stopFailures.get("ep1")?.count).toBe(2);
  });
});

describe("Scaler replacing a worker on request", () => {
  it("drains a worker it runs that asked to be replaced (refresh_worker), and knows no other", async () => {
    const handle: WorkerHandle = {
      workerId: "wrefresh",
      exited: new Promise(() => undefined),
      stop: async () => ({ code: 0, signal: null }),
      kill: () => undefined,
    };
    const driver: WorkerDriver = {
      name: "docker",
      start: () => Promise.reject(new Error("this test starts no worker")),
      adopt: async () => [{ handle, endpointId: "ep1", revision: "r1" }],
      close: async () => undefined,
    };
    const drained: string[] = [];
    const engine = {
      ensureWorker: () => ({}),
      workerGone: () => undefined,
      drain: (id: string) => drained.push(id),
      workers: new Map(),
      queuedCount: () => 0,
      runningCount: () => 0,
    } as unknown as JobEngine;
    const scaler = new Scaler(
      {
        engine,
        driver,
        apiUrl: "http://svc.test:8600",
        mintWorkerKeys: () => Promise.reject(new Error("no keys in this test")),
        revokeWorkerKeys: async () => undefined,
        endpoints: () => [],
        onLog: () => undefined,
      },
      60_000,
    );
    await scaler.start();
    expect(scaler.replace("wrefresh")).toBe(true);
    expect(drained).toEqual(["wrefresh"]);
    expect(scaler.replace("wunknown")).toBe(false);
    expect(drained).toEqual(["wrefresh"]);
    await scaler.close();
  });
});

describe("snapshotNotice", () => {
  const endpoint = (snapshot?: boolean) => ({ name: "model", resource: { snapshot } }) as unknown as Parameters<typeof snapshotNotice>[1];
  it("says once that a driver cannot restore snapshots, and why, when the endpoint asks for them", () => {
    expect(snapshotNotice({ name: "docker" }, endpoint(true))).toBe(
      "endpoint model has snapshot: true, but the docker driver cannot restore snapshots (Docker restores a checkpoint only into the container it was taken from): its workers start without one, running their initialisation (docs/cold-start.md)",
    );
    expect(snapshotNotice({ name: "kubernetes" }, endpoint(true))).toMatch(/kubernetes driver cannot restore snapshots \(svc checkpoints only local processes/);
  });
  it("says nothing where snapshots are restored or not asked for", () => {
    expect(snapshotNotice({ name: "process", restoresSnapshots: true }, endpoint(true))).toBeUndefined();
    expect(snapshotNotice({ name: "docker" }, endpoint(false))).toBeUndefined();
    expect(snapshotNotice({ name: "swarm" }, endpoint(undefined))).toBeUndefined();
  });
});

describe("image endpoints of an app (Endpoint({ name, image }))", () => {
  const endpoint = (resource: Record<string, unknown>, type = "queue", artifactPath = "/a/artifact.tar.gz") =>
    ({ name: "llm", type, artifactPath, resource }) as unknown as Parameters<typeof providerImageOf>[0];
  const app = endpoint({ protocol: "provider", imageName: "my/worker:1.2" });

  it("run their image as a provider worker, as a REST endpoint of a worker image does", () => {
    expect(providerImageOf(app)).toBe("my/worker:1.2");
    expect(providerImageOf(endpoint({ imageName: "svc-worker-cpu:0.1.0" }))).toBeUndefined();
    expect(providerImageOf(endpoint({ imageName: "my/worker:1.2" }, "queue", ""))).toBe("my/worker:1.2");
  });

  it("wait, saying why and what to do, where the driver runs no images", () => {
    expect(imageNotice({ name: "process" }, app)).toBe(
      'endpoint llm runs the image "my/worker:1.2", and the process driver runs no images: its jobs wait in the queue. Run it where Docker runs workers (`svc server --workers docker`, `svc deploy --preview`, or `svc dev` with a Docker engine answering)',
    );
    expect(imageNotice({ name: "docker", hasImage: async () => true }, app)).toBeUndefined();
    expect(imageNotice({ name: "kubernetes", pullsImages: true }, app)).toBeUndefined();
    expect(imageNotice({ name: "swarm" }, app)).toMatch(/the swarm driver runs no images/);
    expect(imageNotice({ name: "process" }, endpoint({ imageName: "svc-worker-cpu:0.1.0" }))).toBeUndefined();
  });
});

describe("Scaler and models", () => {
  const endpoint = {
    id: "ep1",
    name: "embedder",
    type: "queue",
    app: "app",
    env: "prod",
    userId: "u1",
    artifactPath: "/data/artifacts/abc.tar.gz",
    resource: {
      workersMin: 1,
      workersMax: 1,
      maxConcurrency: 1,
      idleTimeout: 5,
      computeType: "CPU",
      gpuTypeIds: [],
      instanceIds: [],
      env: {},
      models: ["acme/tiny@main"],
    },
  } as unknown as EndpointRow;
  const engine = {
    ensureWorker: () => ({}),
    workerGone: () => undefined,
    drain: () => undefined,
    workers: new Map(),
    waiting: () => ({ normal: 0, low: 0, waitingSince: [] }),
    queuedCount: () => 0,
    runningCount: () => 0,
  } as unknown as JobEngine;
  const run = async (nodeModelCache: boolean) => {
    const launches: WorkerLaunch[] = [];
    const asked: string[] = [];
    const driver: WorkerDriver = {
      name: nodeModelCache ? "kubernetes" : "docker",
      nodeModelCache,
      async start(launch) {
        launches.push(launch);
        return { workerId: launch.workerId, exited: new Promise(() => undefined), stop: async () => ({ code: 0, signal: null }), kill: () => undefined };
      },
      close: async () => undefined,
    };
    const scaler = new Scaler(
      {
        engine,
        driver,
        apiUrl: "http://svc.test:8600",
        mintWorkerKeys: async () => ({ workerToken: "t", apiKey: "k" }),
        revokeWorkerKeys: async () => undefined,
        endpoints: () => [endpoint],
        onLog: (_e, _w, line) => void asked.push(`log ${line.text}`),
        modelHub: { url: "http://hub.internal", token: "hf" },
        models: {
          root: "/data/models",
          ready: (models) => (asked.push(`ready ${models.join(",")}`), false),
          ensure: async (model) => void asked.push(`ensure ${model}`),
          hold: (_w, models) => void asked.push(`hold ${models.join(",")}`),
          release: () => undefined,
          reason: () => undefined,
          fetching: () => false,
        },
      },
      60_000,
    );
    await scaler.start();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await scaler.close();
    return { launches, asked };
  };

  it("a driver whose nodes fetch: no fetch on the service's host, the models and the hub in the launch", async () => {
    const { launches, asked } = await run(true);
    expect(asked).toEqual([]);
    expect(launches).toHaveLength(1);
    expect(launches[0]).toMatchObject({ models: ["acme/tiny@main"], modelHub: { url: "http://hub.internal", token: "hf" } });
    expect(launches[0]!.modelCache).toBeUndefined();
  });

  it("a driver without node caches: the worker waits for the host's cache, as before", async () => {
    const { launches, asked } = await run(false);
    expect(asked).toEqual(["ready acme/tiny@main"]);
    expect(launches).toEqual([]);
  });
});
