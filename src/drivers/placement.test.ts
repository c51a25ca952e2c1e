import { describe, expect, it } from "vitest";
import { cpuInstanceShape, placementOf } from "./placement.js";

describe("placement", () => {
  it("reads vCPUs and memory from a CPU instance id", () => {
    expect(cpuInstanceShape("cpu3c-1-2")).toEqual({ cpus: 1, memoryMb: 2048 });
    expect(cpuInstanceShape("cpu5g-8-32")).toEqual({ cpus: 8, memoryMb: 32768 });
    expect(cpuInstanceShape("cpu3c")).toBeUndefined();
    expect(cpuInstanceShape("cpu3c-0-2")).toBeUndefined();
  });
  it("sizes CPU workers by their instance, gives GPU workers one GPU, and pins workers to their volume's data center", () => {
    expect(placementOf({ computeType: "CPU", instanceIds: ["cpu3c-2-4"] })).toEqual({ cpus: 2, memoryMb: 4096, gpus: 0 });
    expect(placementOf({ computeType: "GPU", instanceIds: [] }, "eu-ro-1")).toEqual({ gpus: 1, dataCenter: "eu-ro-1" });
    expect(placementOf({ computeType: "GPU", instanceIds: [], gpuCount: 4 })).toEqual({ gpus: 4 });
    expect(placementOf({ computeType: "CPU", instanceIds: ["custom"] })).toEqual({ gpus: 0 });
  });
});
