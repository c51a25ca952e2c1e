// The GPU inventory against the fake nvidia-smi (test/fakes/gpu/nvidia-smi) put first on PATH, as the service and
// `svc doctor` run it: real processes, the real binary lookup; no GPU needed.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readInventory } from "../../src/gpus/inventory.js";
import { pathWithFailingCriu, runProgram, SVC_BIN } from "../cli-output.js";

const FAKE_DIR = fileURLToPath(new URL("../fakes/gpu", import.meta.url));
/** This process's environment with the fake first on PATH (node stays reachable for its #! line). */
const withFake = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${FAKE_DIR}${delimiter}${process.env.PATH ?? ""}`,
  ...extra,
});

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "svc-gpu-inventory-"));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("readInventory with nvidia-smi on PATH", () => {
  it("finds every GPU of both types, with UUIDs, memory, type ids and the driver and CUDA versions", async () => {
    const inventory = await readInventory({ env: withFake() });
    expect(inventory).toMatchObject({ source: "nvidia-smi", driverVersion: "580.159.04", cudaVersion: "13.0" });
    expect(inventory.gpus.map((g) => [g.index, g.name, g.memoryTotalMiB, g.typeIds])).toEqual([
      [0, "NVIDIA H100 80GB HBM3", 81559, ["ADA_80_PRO", "NVIDIA H100 80GB HBM3"]],
      [1, "NVIDIA H100 80GB HBM3", 81559, ["ADA_80_PRO", "NVIDIA H100 80GB HBM3"]],
      [2, "NVIDIA GeForce RTX 4090", 24564, ["ADA_24", "NVIDIA GeForce RTX 4090"]],
      [3, "NVIDIA GeForce RTX 4090", 24564, ["ADA_24", "NVIDIA GeForce RTX 4090"]],
    ]);
    expect(new Set(inventory.gpus.map((g) => g.uuid)).size).toBe(4);
    expect(inventory.gpus[0]!.uuid).toMatch(/^GPU-/);
  });

  it("reads what the GPUs report now: memory used, utilization, MIG mode (a file the test rewrites)", async () => {
    const file = join(scratch, "gpus.json");
    writeFileSync(
      file,
      JSON.stringify([{ name: "NVIDIA H200", memoryMiB: 143771, usedMiB: 70000, utilization: 93, uuid: "GPU-db2ab84d-d2ea-5ed7-5d6b-31d649f0d15a" }]),
    );
    const busy = await readInventory({ env: withFake({ FAKE_NVIDIA_SMI_FILE: file }) });
    expect(busy.gpus).toEqual([
      {
        index: 0,
        uuid: "GPU-db2ab84d-d2ea-5ed7-5d6b-31d649f0d15a",
        name: "NVIDIA H200",
        memoryTotalMiB: 143771,
        memoryUsedMiB: 70000,
        utilizationPercent: 93,
        migMode: "Disabled",
        typeIds: ["HOPPER_141", "NVIDIA H200"],
      },
    ]);
    writeFileSync(file, JSON.stringify([{ name: "NVIDIA H200", memoryMiB: 143771, mig: "Enabled" }]));
    expect((await readInventory({ env: withFake({ FAKE_NVIDIA_SMI_FILE: file }) })).gpus[0]).toMatchObject({
      memoryUsedMiB: 0,
      utilizationPercent: 0,
      migMode: "Enabled",
    });
  });

  it("no nvidia-smi on PATH: no GPUs; a failing one: an error with what it printed", async () => {
    expect(await readInventory({ env: { ...process.env, PATH: scratch } })).toEqual({ gpus: [], driverVersion: null, cudaVersion: null, source: "none" });
    const driverGone =
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.";
    await expect(readInventory({ env: withFake({ FAKE_NVIDIA_SMI_FAIL: driverGone }) })).rejects.toThrow(
      /nvidia-smi --query-gpu=.* failed \(exit 9\): NVIDIA-SMI has failed because it couldn't communicate/,
    );
  });
});

describe("svc doctor with nvidia-smi on PATH", () => {
  const doctor = (extra: Record<string, string>) => {
    const env = withFake(extra);
    for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k === "DOCKER_HOST") delete env[k];
    // No service to reach: its finding fails, the GPU findings are what this test reads.
    return runProgram(process.execPath, [SVC_BIN, "doctor", "--json"], {
      cwd: scratch,
      env: {
        ...env,
        PATH: pathWithFailingCriu(env.PATH),
        NO_COLOR: "1",
        SVC_CONFIG_DIR: scratch,
        SVC_API_URL: "http://127.0.0.1:9",
        SVC_API_KEY: "k",
        DOCKER_HOST: `unix://${join(scratch, "none.sock")}`,
        ...extra,
      },
    });
  };

  it("lists each GPU with its index, name, memory and type ids", async () => {
    const r = await doctor({});
    const findings = (JSON.parse(r.stdout) as { findings: Array<{ check: string; level: string; detail: string }> }).findings.filter((f) =>
      f.check.startsWith("gpu"),
    );
    expect(findings.map((f) => [f.check, f.level])).toEqual([
      ["gpu", "ok"],
      ["gpu 0", "ok"],
      ["gpu 1", "ok"],
      ["gpu 2", "ok"],
      ["gpu 3", "ok"],
    ]);
    expect(findings[0]!.detail).toBe("4 GPUs (driver 580.159.04, CUDA 13.0)");
    expect(findings[1]!.detail).toBe(
      "NVIDIA H100 80GB HBM3, 81559 MiB, 0 MiB used; type ADA_80_PRO / NVIDIA H100 80GB HBM3; GPU-fa4e0000-0000-4000-8000-000000000000",
    );
    expect(findings[3]!.detail).toMatch(/^NVIDIA GeForce RTX 4090, 24564 MiB, 0 MiB used; type ADA_24 \/ NVIDIA GeForce RTX 4090; GPU-/);
  });

  it("a failing nvidia-smi is a warning with its message and a fix, not 'no GPU'", async () => {
    const r = await doctor({ FAKE_NVIDIA_SMI_FAIL: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." });
    const gpu = (JSON.parse(r.stdout) as { findings: Array<{ check: string; level: string; detail: string; fix?: string }> }).findings.filter((f) =>
      f.check.startsWith("gpu"),
    );
    expect(gpu).toEqual([
      { check: "gpu", level: "warn", detail: expect.stringContaining("couldn't communicate with the NVIDIA driver"), fix: expect.stringContaining("driver") },
    ]);
  });
});
