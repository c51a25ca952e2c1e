import { describe, expect, it } from "vitest";
import type { WorkerDriver, WorkerHandle, WorkerLaunch } from "../../drivers/types.js";
import { JobEngine } from "../engine/index.js";
import { SQLITE_MIGRATIONS } from "../schema/sqlite.js";
import { openSqliteStore } from "../store/sqlite.js";
import type { EndpointRow } from "../store/types.js";
import { Scaler } from "./scaler.js";

/** A real engine over an in-memory store: the worker registry the scaler writes to and reads. */
async function memoryEngine(): Promise<JobEngine> {
  const engine = new JobEngine(openSqliteStore(":memory:", SQLITE_MIGRATIONS), { leaseMs: 30_000, heartbeatMs: 5_000 });
  await engine.load([]);
  return engine;
}

/** A driver that starts nothing and finds `handle` left running by an earlier run, for endpoint ep1 at revision r1. */
type AdoptLog = Parameters<NonNullable<WorkerDriver["adopt"]>>[0];
function adoptingDriver(name: WorkerDriver["name"], handle: WorkerHandle, onAdopt?: (onLog: AdoptLog) => void): WorkerDriver {
  return {
    name,
    start: () => Promise.reject(new Error("this test starts no worker")),
    async adopt(onLog) {
      onAdopt?.(onLog);
      return [{ handle, endpointId: "ep1", revision: "r1" }];
    },
    close: async () => undefined,
  };
}

/** A worker handle whose process never ends unless `exit` is called. */
function runningHandle(
  workerId: string,
  extra: Partial<WorkerHandle> = {},
): { handle: WorkerHandle; exit: (e: { code: number | null; signal: string | null }) => void } {
  let exit!: (e: { code: number | null; signal: string | null }) => void;
  const handle: WorkerHandle = {
    workerId,
    exited: new Promise((resolve) => (exit = resolve)),
    stop: async () => ({ code: 0, signal: null }),
    kill: () => undefined,
    ...extra,
  };
  return { handle, exit };
}

/** A started scaler over `engine` and `driver`, with what these tests do not use refused or ignored. */
async function startedScaler(engine: JobEngine, driver: WorkerDriver, deps: Partial<ConstructorParameters<typeof Scaler>[0]> = {}): Promise<Scaler> {
  const scaler = new Scaler(
    {
      engine,
      driver,
      apiUrl: "http://svc.test:8600",
      mintWorkerKeys: () => Promise.reject(new Error("no keys in this test")),
      revokeWorkerKeys: async () => undefined,
      endpoints: () => [],
      onLog: () => undefined,
      ...deps,
    },
    60_000,
  );
  await scaler.start();
  return scaler;
}

describe("Scaler adoption", () => {
  it("records an adopted worker in the worker registry as one it runs, with its revision and its driver's addresses, and hands its output to onLog", async () => {
    const engine = await memoryEngine();
    const { handle } = runningHandle("wadopted", {
      address: "http://10.244.0.7:8080",
      directAddress: "http://10.244.0.7:8081",
      localSocket: "/tmp/svc-lb-wadopted.sock",
    });
    const driver = adoptingDriver("kubernetes", handle, (onLog) =>
      onLog?.("ep1", "wadopted", { ts: 1, stream: "stdout", text: "a line after the adoption", jobId: "j1" }),
    );
    const events: string[] = [];
    for (const name of ["known", "addressed", "registered", "ready", "gone"] as const)
      engine.workerEvents.on(name, ({ worker }) => events.push(`${name} ${worker.id}`));
    const logs: Array<[string, string, string, string | undefined]> = [];
    const scaler = await startedScaler(engine, driver, { onLog: (endpointId, workerId, line) => logs.push([endpointId, workerId, line.text, line.jobId]) });
    expect(engine.workers.get("wadopted")).toMatchObject({
      endpointId: "ep1",
      managed: true,
      revision: "r1",
      registered: false,
      reach: { address: "http://10.244.0.7:8080", direct: "http://10.244.0.7:8081", socket: "/tmp/svc-lb-wadopted.sock" },
    });
    expect(scaler.workerRevision("wadopted")).toBe("r1");
    expect(events).toEqual(["known wadopted", "addressed wadopted"]);
    expect(logs).toEqual([["ep1", "wadopted", "a line after the adoption", "j1"]]);
    await scaler.close();
  });
});

describe("Scaler adoption and the model cache", () => {
  it("holds the models an adopted worker's endpoint names, so the cache keeps them while it runs, and lets them go when it ends", async () => {
    const engine = await memoryEngine();
    const { handle, exit } = runningHandle("wkept");
    const held = new Map<string, readonly string[]>();
    const endpoint = { id: "ep1", name: "llm", userId: "u1", revision: "r1", resource: { models: ["acme/tiny@main", "acme/vocab@v2"] } };
    const gone: string[] = [];
    engine.workerEvents.on("gone", ({ worker }) => gone.push(worker.id));
    const scaler = await startedScaler(engine, adoptingDriver("process", handle), {
      endpoints: () => [endpoint] as unknown as Iterable<EndpointRow>,
      models: {
        root: "/data/models",
        ready: () => true,
        ensure: async () => undefined,
        hold: (workerId, models) => held.set(workerId, models),
        release: (workerId) => held.delete(workerId),
        reason: () => undefined,
        fetching: () => false,
      },
    });
    expect([...held]).toEqual([["wkept", ["acme/tiny@main", "acme/vocab@v2"]]]);
    exit({ code: 0, signal: null });
    await new Promise((r) => setTimeout(r, 20));
    expect([...held]).toEqual([]);
    // Its end is the registry's too: gone, and no longer known.
    expect(gone).toEqual(["wkept"]);
    expect(engine.workers.has("wkept")).toBe(false);
    await scaler.close();
  });
});

describe("Scaler stopping workers", () => {
  it("says and counts a worker its driver failed to stop, with the worker's id and the driver's error", async () => {
    const engine = await memoryEngine();
    const { handle } = runningHandle("wstuck", { stop: () => Promise.reject(new Error("the Docker daemon did not answer")) });
    const events: string[] = [];
    const scaler = await startedScaler(engine, adoptingDriver("docker", handle), { onEvent: (message) => events.push(message) });
    expect(await scaler.stopWorkersOf(new Set(["ep1"]), 100)).toBe(false);
    expect(events).toContain("the docker driver failed to stop worker wstuck of endpoint ep1: the Docker daemon did not answer");
    expect(scaler.stopFailures.get("ep1")).toEqual({ count: 1, lastError: "the Docker daemon did not answer" });
    await scaler.close();
    expect(scaler.stopFailures.get("ep1")?.count).toBe(2);
  });
});

describe("Scaler replacing a worker on request", () => {
  it("drains a worker it runs that asked to be replaced (refresh_worker), and knows no other", async () => {
    const engine = await memoryEngine();
    const { handle } = runningHandle("wrefresh");
    const drained: string[] = [];
    engine.workerEvents.on("draining", ({ worker }) => drained.push(worker.id));
    const scaler = await startedScaler(engine, adoptingDriver("docker", handle));
    expect(scaler.replace("wrefresh")).toBe(true);
    expect(drained).toEqual(["wrefresh"]);
    expect(engine.workers.get("wrefresh")?.draining).toBe(true);
    expect(scaler.replace("wunknown")).toBe(false);
    expect(drained).toEqual(["wrefresh"]);
    await scaler.close();
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
  const run = async (nodeModelCache: boolean) => {
    const engine = await memoryEngine();
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
