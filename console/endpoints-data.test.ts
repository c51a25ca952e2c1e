import { expect, it } from "vitest";
import { crashLoopText, endpointSummaries, type AppEnvironment, type RestEndpoint } from "./endpoints-data.js";

const rest = (over: Partial<RestEndpoint> & { source?: string }): RestEndpoint =>
  ({
    id: "e1",
    name: "resize",
    url: "http://svc/v2/e1",
    templateId: "t1",
    computeType: "CPU",
    gpuTypeIds: [],
    gpuCount: 0,
    workersMin: 0,
    workersMax: 2,
    idleTimeout: 5,
    env: {},
    networkVolumeId: null,
    executionTimeoutMs: 600_000,
    status: "READY",
    statusReason: null,
    allocatedGpuType: null,
    createdAt: 1,
    ...over,
  }) as RestEndpoint;

const environment = (endpoints: AppEnvironment["endpoints"]): AppEnvironment => ({
  app: "shop",
  env: "prod",
  createdAt: 1,
  activatedAt: 2,
  build: "b7",
  fingerprint: null,
  endpoints,
});
const appEndpoint = (id: string, name: string): AppEnvironment["endpoints"][number] => ({
  id,
  name,
  url: `http://svc/v2/${id}`,
  type: "queue",
  routes: [],
  workersMin: 1,
  workersMax: 3,
  gpuTypeIds: ["ADA_24"],
  idleTimeout: 5,
});

it("lists REST endpoints as they are and deployed ones once, from their app, with the status the REST list gives", () => {
  const list = endpointSummaries(
    [
      rest({ id: "r1", name: "console-made" }),
      rest({ id: "d1", name: "llm", source: "deploy", status: "WAITING", statusReason: "waiting for a GPU (ADA_24: 1 of 1 in use)" }),
    ],
    [environment([appEndpoint("d1", "llm"), appEndpoint("d2", "embed")])],
  );
  expect(list.map((e) => [e.id, e.source, e.app ?? null, e.status ?? null])).toEqual([
    ["r1", "rest", null, "READY"],
    ["d1", "app", "shop", "WAITING"],
    ["d2", "app", "shop", null],
  ]);
  const llm = list.find((e) => e.id === "d1")!;
  expect(llm.statusReason).toBe("waiting for a GPU (ADA_24: 1 of 1 in use)");
  expect([llm.env, llm.build, llm.workersMax, llm.gpuTypeIds]).toEqual(["prod", "b7", 3, ["ADA_24"]]);
});

it("is empty for a user with nothing", () => {
  expect(endpointSummaries([], [])).toEqual([]);
});

it("says a crash loop's deaths, the last one and when the next worker starts", () => {
  const loop = {
    deaths: 5,
    windowMs: 120_000,
    since: 1000,
    lastDeath: { at: 9000, reason: "sigkill" as const, message: "killed (SIGKILL: out of memory, or killed from outside)" },
    nextStartAt: 49_000,
  };
  expect(crashLoopText(loop, 9000)).toEqual({
    headline: "Workers keep dying: 5 in 2 min, last: killed (SIGKILL: out of memory, or killed from outside)",
    next: "The next worker starts in 40 s; restarts back off while they keep dying.",
  });
  expect(crashLoopText({ ...loop, nextStartAt: null }, 9000).next).toBe("The next worker may start now.");
});
