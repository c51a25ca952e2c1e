import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { prepareVolumeDir, remoteVolumeRefusal } from "./volume-dir.js";

it("makes a volume's directory open to every worker of the volume", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-volume-dir-"));
  try {
    const path = join(dir, "volumes", "vol0123456789ab");
    prepareVolumeDir(path);
    expect(statSync(path).mode & 0o777).toBe(0o777);
    prepareVolumeDir(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("Swarm and Kubernetes refuse a worker whose volume cannot follow it to its node", () => {
  expect(remoteVolumeRefusal({ endpointName: "e", volumePath: "/data/volumes/vol0123456789ab" }, "Kubernetes")).toMatch(/Endpoint e mounts a network volume, which Kubernetes workers cannot reach/);
  expect(remoteVolumeRefusal({ endpointName: "e" }, "Kubernetes")).toBeUndefined();
  expect(remoteVolumeRefusal({ endpointName: "e", volumeName: "models" }, "Docker Swarm")).toBeUndefined();
});
