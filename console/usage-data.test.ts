// The Usage page's pure helpers: the route's hourly rows added up per endpoint (GPU time by type included) and
// seconds in units a person reads.

import { expect, it } from "vitest";
import { formatByType, formatSeconds, hoursNewestFirst, totalsByEndpoint, type UsageHour } from "./usage-data.js";

const row = (over: Partial<UsageHour>): UsageHour => ({
  hour: "2026-11-27T12:00:00.000Z",
  userId: "default",
  endpointId: "e1",
  gpuType: null,
  workerSeconds: 0,
  gpuSeconds: 0,
  jobs: 0,
  requests: 0,
  ...over,
});

it("adds the hours up per user and endpoint, GPU time kept apart by type, most worker time first", () => {
  const hours = [
    row({ endpointId: "gpu", gpuType: "HOPPER_141", workerSeconds: 100, gpuSeconds: 200, jobs: 4 }),
    row({ endpointId: "gpu", gpuType: "ADA_80_PRO", workerSeconds: 50, gpuSeconds: 50, jobs: 1, hour: "2026-11-27T13:00:00.000Z" }),
    row({ endpointId: "gpu", gpuType: "HOPPER_141", workerSeconds: 10, gpuSeconds: 20, jobs: 2, hour: "2026-11-27T13:00:00.000Z" }),
    row({ endpointId: "cpu", workerSeconds: 30, jobs: 7 }),
    row({ endpointId: "cpu", userId: "bob", workerSeconds: 500, jobs: 1 }),
    row({ endpointId: "api", workerSeconds: 20, requests: 40 }),
    row({ endpointId: "api", workerSeconds: 5, requests: 2, hour: "2026-11-27T13:00:00.000Z" }),
  ];
  expect(totalsByEndpoint(hours)).toEqual([
    { endpointId: "cpu", userId: "bob", workerSeconds: 500, gpuSeconds: 0, gpuSecondsByType: {}, jobs: 1, requests: 0 },
    { endpointId: "gpu", userId: "default", workerSeconds: 160, gpuSeconds: 270, gpuSecondsByType: { HOPPER_141: 220, ADA_80_PRO: 50 }, jobs: 7, requests: 0 },
    { endpointId: "cpu", userId: "default", workerSeconds: 30, gpuSeconds: 0, gpuSecondsByType: {}, jobs: 7, requests: 0 },
    { endpointId: "api", userId: "default", workerSeconds: 25, gpuSeconds: 0, gpuSecondsByType: {}, jobs: 0, requests: 42 },
  ]);
  expect(formatByType({ HOPPER_141: 220, ADA_80_PRO: 50 })).toBe("ADA_80_PRO 50 s, HOPPER_141 3 min 40 s");
  expect(formatByType({})).toBe("—");
  expect(hoursNewestFirst(hours).map((h) => h.hour)).toEqual([
    "2026-11-27T13:00:00.000Z",
    "2026-11-27T13:00:00.000Z",
    "2026-11-27T13:00:00.000Z",
    "2026-11-27T12:00:00.000Z",
    "2026-11-27T12:00:00.000Z",
    "2026-11-27T12:00:00.000Z",
    "2026-11-27T12:00:00.000Z",
  ]);
});

it("says seconds as a person reads them, with no '60 s' at the edge of a minute", () => {
  expect(formatSeconds(0)).toBe("0 s");
  expect(formatSeconds(12.34)).toBe("12.3 s");
  expect(formatSeconds(59.96)).toBe("1 min 00 s");
  expect(formatSeconds(245)).toBe("4 min 05 s");
  expect(formatSeconds(7380)).toBe("2 h 03 min");
});
