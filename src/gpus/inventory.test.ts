import { describe, expect, it } from "vitest";
import { GpuInventoryError, hostGpuTypeIds, parseCudaVersion, parseGpuQuery } from "./inventory.js";

// What a real H200 host answers (values from ../shared/gpu/h200-nvidia-smi.txt, in this module's column order).
const H200 = "0, GPU-db2ab84d-d2ea-5ed7-5d6b-31d649f0d15a, NVIDIA H200, 143771, 0, 0, Disabled, 580.159.04\n";

describe("parseGpuQuery", () => {
  it("reads each GPU's index, UUID, name, memory, utilization, MIG mode, and the driver version", () => {
    expect(parseGpuQuery(H200)).toEqual({
      driverVersion: "580.159.04",
      gpus: [
        {
          index: 0,
          uuid: "GPU-db2ab84d-d2ea-5ed7-5d6b-31d649f0d15a",
          name: "NVIDIA H200",
          memoryTotalMiB: 143771,
          memoryUsedMiB: 0,
          utilizationPercent: 0,
          migMode: "Disabled",
          typeIds: ["HOPPER_141", "NVIDIA H200"],
        },
      ],
    });
  });

  it("orders GPUs by index, reads [N/A] as absent, and keeps a name with a comma whole", () => {
    const csv = [
      "1, GPU-bbbb, NVIDIA A100-SXM4-80GB, 81920, 1024, [N/A], Enabled, 550.54.15",
      "0, GPU-aaaa, Acme Accelerator, Rev 2, 16384, 12, 57, [N/A], 550.54.15",
      "",
    ].join("\r\n");
    const { gpus } = parseGpuQuery(csv);
    expect(gpus.map((g) => [g.index, g.name, g.utilizationPercent, g.migMode, g.typeIds])).toEqual([
      [0, "Acme Accelerator, Rev 2", 57, null, ["Acme Accelerator, Rev 2"]],
      [1, "NVIDIA A100-SXM4-80GB", null, "Enabled", ["AMPERE_80", "NVIDIA A100-SXM4-80GB"]],
    ]);
  });

  it("no GPUs: nothing; output of another shape: an error naming the line", () => {
    expect(parseGpuQuery("")).toEqual({ gpus: [], driverVersion: null });
    expect(() => parseGpuQuery("No devices were found\n")).toThrow(GpuInventoryError);
    expect(() => parseGpuQuery("0, NVIDIA H200, GPU-x, 1, 2, 3, Disabled, 580\n")).toThrow(/cannot read: "0, NVIDIA H200, GPU-x/);
  });
});

describe("parseCudaVersion", () => {
  it("reads plain nvidia-smi's header and nvidia-smi -q", () => {
    expect(parseCudaVersion("| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |")).toBe("13.0");
    expect(
      parseCudaVersion("Driver Version                                         : 580.159.04\nCUDA Version                                           : 13.0\n"),
    ).toBe("13.0");
    expect(parseCudaVersion("| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: N/A      |")).toBeNull();
  });
});

describe("hostGpuTypeIds", () => {
  const gpus = parseGpuQuery(
    `${H200}1, GPU-2, NVIDIA GeForce RTX 4090, 24564, 0, 0, Disabled, 580.159.04\n2, GPU-3, NVIDIA H200, 143771, 0, 0, Disabled, 580.159.04\n`,
  ).gpus;

  it("is every id the host's GPUs satisfy, each once, in GPU order", () => {
    expect(hostGpuTypeIds({ gpus })).toEqual(["HOPPER_141", "NVIDIA H200", "ADA_24", "NVIDIA GeForce RTX 4090"]);
    expect(hostGpuTypeIds({ gpus: [] })).toEqual([]);
  });

  it("SVC_GPU_TYPES overrides what the GPUs say", () => {
    expect(hostGpuTypeIds({ gpus }, ["AMPERE_48"])).toEqual(["AMPERE_48"]);
    expect(hostGpuTypeIds({ gpus: [] }, ["ADA_24"])).toEqual(["ADA_24"]);
    expect(hostGpuTypeIds({ gpus }, [])).toEqual(["HOPPER_141", "NVIDIA H200", "ADA_24", "NVIDIA GeForce RTX 4090"]);
  });
});
