// The console's pure GPU helpers: who holds a GPU, memory as people read it, and the GPUs per worker.

import { expect, it } from "vitest";
import { formatMiB, gpusByWorker, holdingOf, memoryText, type Gpu } from "./gpus-data.js";

const gpu = (index: number, holder: Gpu["holder"]): Gpu => ({
  index,
  uuid: `GPU-${index}`,
  name: "NVIDIA H100 80GB HBM3",
  typeIds: ["ADA_80_PRO", "NVIDIA H100 80GB HBM3"],
  memoryTotalMiB: 81559,
  memoryUsedMiB: 0,
  utilizationPercent: 0,
  migMode: "Disabled",
  holder,
});

it("tells a free GPU, another user's and one of the caller's workers apart", () => {
  expect(holdingOf(gpu(0, null))).toEqual({ kind: "free" });
  expect(holdingOf(gpu(0, { held: true }))).toEqual({ kind: "other" });
  expect(holdingOf(gpu(0, { workerId: "w1", endpointId: "e1", typeId: "ADA_80_PRO" }))).toEqual({
    kind: "worker",
    workerId: "w1",
    endpointId: "e1",
    typeId: "ADA_80_PRO",
  });
});

it("shows memory in GiB with one decimal, small amounts in MiB, and a dash when not sampled", () => {
  expect(formatMiB(512)).toBe("512 MiB");
  expect(formatMiB(81559)).toBe("79.6 GiB");
  expect(memoryText(1200, 81559)).toBe("1.2 of 79.6 GiB used");
  expect(memoryText(0, 24564)).toBe("0.0 of 24.0 GiB used");
  expect(memoryText(100, 512)).toBe("100 of 512 MiB used");
  expect(memoryText(null, 81559)).toBe("— of 79.6 GiB");
});

it("groups the GPUs a worker holds, by worker, in GPU order; free and others' GPUs are nobody's", () => {
  const w = (id: string) => ({ workerId: id, endpointId: "e1", typeId: "ADA_80_PRO" });
  const grouped = gpusByWorker([gpu(3, w("b")), gpu(1, w("a")), gpu(2, null), gpu(0, w("a")), gpu(4, { held: true })]);
  expect(grouped.map((g) => [g.workerId, g.typeId, g.gpus.map((x) => x.index)])).toEqual([
    ["a", "ADA_80_PRO", [0, 1]],
    ["b", "ADA_80_PRO", [3]],
  ]);
});
