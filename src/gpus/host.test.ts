import { describe, expect, it } from "vitest";
import { gpuShortfalls, HostGpus } from "./host.js";
import type { GpuInventory } from "./inventory.js";
import { typeIdsOfCard } from "svc/internal";

const gpu = (index: number, name: string) => ({
  index,
  uuid: `GPU-${index}`,
  name,
  memoryTotalMiB: 81559,
  memoryUsedMiB: 0,
  utilizationPercent: 0,
  migMode: "Disabled",
  typeIds: typeIdsOfCard(name),
});
const H100 = "NVIDIA H100 80GB HBM3";
const RTX = "NVIDIA GeForce RTX 4090";
const inventory = (...names: string[]): GpuInventory => ({
  gpus: names.map((n, i) => gpu(i, n)),
  driverVersion: "580",
  cudaVersion: "13.0",
  source: "nvidia-smi",
});

async function host(inv: GpuInventory, override?: string[]): Promise<HostGpus> {
  const h = new HostGpus({ read: async () => inv, override, sampleMs: 0 });
  await h.refresh();
  return h;
}
let n = 0;
const ids = () => `w${++n}`;
const want = (endpointId: string, typeIds: string[], workers = 1, belowMin = false, count = 1) => ({
  endpointId,
  request: { typeIds, count },
  workers,
  belowMin,
});

describe("HostGpus", () => {
  it("gives each worker GPUs no other holds, and says why the rest wait", async () => {
    const h = await host(inventory(H100, H100, RTX));
    const grants = h.assign([want("a", ["ADA_80_PRO"], 3)], 1000, ids);
    expect(grants.map((g) => g.uuids)).toEqual([["GPU-0"], ["GPU-1"]]);
    expect(h.waiting("a")).toEqual({ since: expect.any(Number), reason: "ADA_80_PRO: 2 of 2 in use", workers: 1, satisfiable: true });
    expect(() => h.hold("intruder", "b", ["GPU-0"], null)).toThrow(/held by worker/);
    h.release(grants[0]!.workerId);
    expect(h.assign([want("a", ["ADA_80_PRO"], 1)], 2000, ids).map((g) => g.uuids)).toEqual([["GPU-0"]]);
    expect(h.waiting("a")).toBeUndefined();
  });

  it("endpoints take turns for freed GPUs: workersMin first, then the longest waiting, and a served one goes to the back", async () => {
    const h = await host(inventory(RTX));
    const [first] = h.assign([want("a", ["ADA_24"], 1)], 0, ids);
    h.assign([want("b", ["ADA_24"], 2), want("c", ["ADA_24"], 1)], 10, ids);
    h.assign([want("b", ["ADA_24"], 2), want("c", ["ADA_24"], 1), want("d", ["ADA_24"], 1, true)], 20, ids);
    h.release(first!.workerId);
    // d is below its workersMin: first, though it came last.
    const next = h.assign([want("b", ["ADA_24"], 2), want("c", ["ADA_24"], 1), want("d", ["ADA_24"], 1, true)], 30, ids);
    expect(next.map((g) => g.endpointId)).toEqual(["d"]);
    h.release(next[0]!.workerId);
    const then = h.assign([want("b", ["ADA_24"], 2), want("c", ["ADA_24"], 1)], 40, ids);
    expect(then.map((g) => g.endpointId)).toEqual(["b"]);
    h.release(then[0]!.workerId);
    // b still wants one more, but c has waited longer than b's turn: c.
    expect(h.assign([want("b", ["ADA_24"], 1), want("c", ["ADA_24"], 1)], 50, ids).map((g) => g.endpointId)).toEqual(["c"]);
  });

  it("an operator's override ids apply to every GPU when no card of the host satisfies them", async () => {
    const h = await host(inventory("NVIDIA H200 NVL"), ["HOPPER_141"]);
    expect(h.typeIds()).toEqual(["HOPPER_141"]);
    expect(h.assign([want("a", ["HOPPER_141"])], 0, ids).map((g) => g.uuids)).toEqual([["GPU-0"]]);
    const known = await host(inventory(H100, RTX), ["ADA_24"]);
    expect(known.allocate({ typeIds: ["ADA_24"], count: 2 })).toMatchObject({ kind: "waiting", reason: "ADA_24: 1 on this host, 2 needed" });
  });

  it("a failed read keeps the GPUs it knew and says why; a host without GPUs assigns nothing", async () => {
    let fail = false;
    const h = new HostGpus({ read: async () => (fail ? Promise.reject(new Error("NVIDIA-SMI has failed")) : inventory(RTX)), sampleMs: 0 });
    await h.refresh();
    fail = true;
    await h.refresh();
    expect(h.inventory.gpus).toHaveLength(1);
    expect(h.readError).toBe("NVIDIA-SMI has failed");
    const none = await host(inventory());
    expect(none.assigning).toBe(false);
    expect(none.assign([want("a", ["ANY"])], 0, ids)).toEqual([]);
  });

  it("a build asking for more GPUs than the host has is refused; on a host without GPUs nothing is checked", async () => {
    const resources = {
      pair: { computeType: "GPU" as const, gpuTypeIds: ["ADA_80_PRO"], gpuCount: 3 },
      small: { computeType: "GPU" as const, gpuTypeIds: ["ADA_24"] },
      cpu: { computeType: "CPU" as const, gpuTypeIds: [] },
    };
    expect(gpuShortfalls(await host(inventory(H100, H100, RTX)), resources)).toEqual([
      'endpoint "pair" asks for 3 GPU(s) of ADA_80_PRO per worker, more than this host has (ADA_80_PRO: 2 on this host, 3 needed)',
    ]);
    expect(gpuShortfalls(await host(inventory()), resources)).toEqual([]);
  });
});
