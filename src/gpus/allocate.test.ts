import { describe, expect, it } from "vitest";
import { allocateGpus, gpuCountOf, gpuRequestOf, pickWaiting, waitingOrder, type WaitingEndpoint } from "./allocate.js";

const H100 = "NVIDIA H100 80GB HBM3";
const RTX4090 = "NVIDIA GeForce RTX 4090";
// Two H100s (ADA_80_PRO) and two 4090s (ADA_24), listed out of index order.
const GPUS = [
  { index: 2, uuid: "GPU-c", name: RTX4090, migMode: "Disabled" },
  { index: 0, uuid: "GPU-a", name: H100, migMode: "Disabled" },
  { index: 3, uuid: "GPU-d", name: RTX4090, migMode: "Disabled" },
  { index: 1, uuid: "GPU-b", name: H100, migMode: "Disabled" },
];
const holds = (entries: Record<string, string> = {}) => new Map(Object.entries(entries));

/** A clock the test moves by hand. */
function fakeClock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

describe("allocateGpus", () => {
  it("gives the first type with enough free GPUs, lowest index first", () => {
    expect(allocateGpus(GPUS, holds(), { typeIds: ["ADA_80_PRO", "ADA_24"], count: 1 })).toEqual({
      kind: "allocated",
      typeId: "ADA_80_PRO",
      uuids: ["GPU-a"],
      indexes: [0],
    });
    expect(allocateGpus(GPUS, holds({ "GPU-a": "w1" }), { typeIds: ["ADA_80_PRO"], count: 1 })).toMatchObject({ uuids: ["GPU-b"] });
  });

  it("falls back to the next type when the first is full", () => {
    const full = holds({ "GPU-a": "w1", "GPU-b": "w2" });
    expect(allocateGpus(GPUS, full, { typeIds: ["ADA_80_PRO", "ADA_24"], count: 1 })).toEqual({
      kind: "allocated",
      typeId: "ADA_24",
      uuids: ["GPU-c"],
      indexes: [2],
    });
  });

  it("gpuCount: that many GPUs of one type, never a mix", () => {
    expect(allocateGpus(GPUS, holds(), { typeIds: ["ADA_24"], count: 2 })).toMatchObject({ kind: "allocated", uuids: ["GPU-c", "GPU-d"] });
    // One H100 and one 4090 free: two GPUs, but not two of one type.
    const r = allocateGpus(GPUS, holds({ "GPU-a": "w1", "GPU-d": "w2" }), { typeIds: ["ADA_80_PRO", "ADA_24"], count: 2 });
    expect(r).toMatchObject({ kind: "waiting", reason: "ADA_80_PRO: 1 of 2 in use, 2 needed; ADA_24: 1 of 2 in use, 2 needed", satisfiable: true });
  });

  it("ANY and exact card names match the cards they name", () => {
    expect(allocateGpus(GPUS, holds({ "GPU-a": "w1" }), { typeIds: ["ANY"], count: 1 })).toMatchObject({ typeId: "ANY", uuids: ["GPU-b"] });
    expect(allocateGpus(GPUS, holds(), { typeIds: [RTX4090], count: 1 })).toMatchObject({ typeId: RTX4090, uuids: ["GPU-c"] });
  });

  it("waiting says what the host has and what is in use", () => {
    const all = holds({ "GPU-a": "w1", "GPU-b": "w2", "GPU-c": "w3", "GPU-d": "w4" });
    expect(allocateGpus(GPUS, all, { typeIds: ["ADA_80_PRO"], count: 1 })).toEqual({
      kind: "waiting",
      reason: "ADA_80_PRO: 2 of 2 in use",
      usage: [{ typeId: "ADA_80_PRO", total: 2, inUse: 2 }],
      satisfiable: true,
    });
    expect(allocateGpus(GPUS, holds(), { typeIds: ["HOPPER_141", "ADA_24"], count: 3 })).toMatchObject({
      kind: "waiting",
      reason: "HOPPER_141: none on this host; ADA_24: 2 on this host, 3 needed",
      satisfiable: false,
    });
  });

  it("a GPU with MIG enabled is not given whole", () => {
    const mig = [{ index: 0, uuid: "GPU-m", name: "NVIDIA H200", migMode: "Enabled" }];
    expect(allocateGpus(mig, holds(), { typeIds: ["HOPPER_141"], count: 1 })).toMatchObject({
      kind: "waiting",
      reason: "HOPPER_141: none on this host",
      satisfiable: false,
    });
  });
});

describe("gpuRequestOf", () => {
  it("a CPU endpoint needs none; a GPU endpoint its types (any when none) and count (1 when absent)", () => {
    expect(gpuRequestOf({ computeType: "CPU", gpuTypeIds: [] })).toBeUndefined();
    expect(gpuRequestOf({ computeType: "GPU", gpuTypeIds: ["HOPPER_141"], gpuCount: 2 })).toEqual({ typeIds: ["HOPPER_141"], count: 2 });
    expect(gpuRequestOf({ computeType: "GPU", gpuTypeIds: [] })).toEqual({ typeIds: ["ANY"], count: 1 });
    expect(gpuCountOf({ computeType: "CPU", gpuCount: 3 })).toBe(0);
  });
});

describe("pickWaiting", () => {
  const one = (typeIds: string[], count = 1) => ({ typeIds, count });

  it("a freed GPU goes to the endpoint that has waited longest", () => {
    const clock = fakeClock();
    const waiting: WaitingEndpoint[] = [];
    waiting.push({ endpointId: "late", request: one(["ADA_80_PRO"]), since: clock.advance(5000), belowMin: false });
    waiting.push({ endpointId: "later", request: one(["ADA_80_PRO"]), since: clock.advance(5000), belowMin: false });
    waiting.unshift({ endpointId: "latest", request: one(["ADA_80_PRO"]), since: clock.advance(5000), belowMin: false });
    // GPU-b was freed; GPU-a is still held.
    expect(pickWaiting(waiting, GPUS, holds({ "GPU-a": "w1" }))).toEqual({
      endpointId: "late",
      allocation: { kind: "allocated", typeId: "ADA_80_PRO", uuids: ["GPU-b"], indexes: [1] },
    });
  });

  it("an endpoint below workersMin goes before one that has waited longer for more", () => {
    const clock = fakeClock();
    const waiting = [
      { endpointId: "scale-up", request: one(["ANY"]), since: clock.now(), belowMin: false },
      { endpointId: "needs-min", request: one(["ANY"]), since: clock.advance(60_000), belowMin: true },
    ];
    expect(waitingOrder(waiting).map((w) => w.endpointId)).toEqual(["needs-min", "scale-up"]);
    expect(pickWaiting(waiting, GPUS, holds({ "GPU-a": "w", "GPU-b": "w", "GPU-c": "w" }))?.endpointId).toBe("needs-min");
  });

  it("a smaller request does not take the GPUs an earlier, larger one is waiting for (no starvation)", () => {
    const clock = fakeClock();
    const waiting = [
      { endpointId: "two-h100", request: one(["ADA_80_PRO"], 2), since: clock.now(), belowMin: false },
      { endpointId: "one-h100", request: one(["ADA_80_PRO"]), since: clock.advance(1000), belowMin: false },
    ];
    // One H100 free: the first needs two, so it keeps that one; the second does not get it.
    expect(pickWaiting(waiting, GPUS, holds({ "GPU-a": "w1" }))).toBeUndefined();
    // Both free: the first starts.
    expect(pickWaiting(waiting, GPUS, holds())).toMatchObject({ endpointId: "two-h100", allocation: { uuids: ["GPU-a", "GPU-b"] } });
  });

  it("an endpoint waiting for other types does not hold up one whose type is free", () => {
    const clock = fakeClock();
    const waiting = [
      { endpointId: "h100", request: one(["ADA_80_PRO"]), since: clock.now(), belowMin: false },
      { endpointId: "rtx", request: one(["ADA_24"]), since: clock.advance(1000), belowMin: false },
    ];
    expect(pickWaiting(waiting, GPUS, holds({ "GPU-a": "w1", "GPU-b": "w2" }))).toMatchObject({ endpointId: "rtx", allocation: { uuids: ["GPU-c"] } });
  });

  it("an endpoint this host can never serve holds nothing up", () => {
    const clock = fakeClock();
    const waiting = [
      { endpointId: "too-big", request: one(["ADA_24"], 4), since: clock.now(), belowMin: true },
      { endpointId: "fits", request: one(["ADA_24"]), since: clock.advance(1000), belowMin: false },
    ];
    expect(pickWaiting(waiting, GPUS, holds())?.endpointId).toBe("fits");
    expect(pickWaiting([], GPUS, holds())).toBeUndefined();
  });
});
