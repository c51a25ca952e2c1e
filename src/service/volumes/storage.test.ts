import { describe, expect, it } from "vitest";
import { hasCapability, mountsOf, planAttach } from "./storage.js";
import { volumeQuotaFindingOf } from "../../doctor/checks.js";

describe("volume storage", () => {
  it("reads mount points and their sources from mountinfo, escapes undone", () => {
    const info = [
      "22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw",
      "97 22 7:0 / /srv/data/volumes/vol0123456789ab rw,nosuid,nodev,noatime shared:50 - ext4 /dev/loop0 rw",
      "98 22 7:1 / /srv/my\\040data/volumes/vol1 rw - ext4 /dev/loop1 rw",
      "",
    ].join("\n");
    const mounts = mountsOf(info);
    expect(mounts.get("/srv/data/volumes/vol0123456789ab")).toBe("/dev/loop0");
    expect(mounts.get("/srv/my data/volumes/vol1")).toBe("/dev/loop1");
    expect(mounts.get("/")).toBe("/dev/vda");
  });

  it("at start, mounts an image not mounted, makes one for an empty volume, moves a plain volume's files into one", () => {
    expect(planAttach({ hasImage: true, mounted: true, dirHasFiles: true })).toEqual({ kind: "mounted" });
    expect(planAttach({ hasImage: true, mounted: false, dirHasFiles: false })).toEqual({ kind: "mount" });
    expect(planAttach({ hasImage: false, mounted: false, dirHasFiles: false })).toEqual({ kind: "create" });
    expect(planAttach({ hasImage: false, mounted: false, dirHasFiles: true })).toEqual({ kind: "migrate" });
  });

  it("reads a capability from the effective set", () => {
    expect(hasCapability(24, "Name:\tnode\nCapEff:\t000001ffffffffff\n")).toBe(true);
    expect(hasCapability(24, "CapEff:\t000001fffeffffff\n")).toBe(false);
    expect(hasCapability(24, "Name:\tnode\n")).toBe(false);
  });

  it("svc doctor says whether quotas are in force, with the fix when they are not", () => {
    expect(volumeQuotaFindingOf("filesystem")).toEqual([expect.objectContaining({ check: "volume quotas", level: "ok" })]);
    const off = volumeQuotaFindingOf("s3-only");
    expect(off).toEqual([expect.objectContaining({ level: "warn" })]);
    expect(off[0]!.fix).toContain("SVC_VOLUME_QUOTAS=loop");
    expect(volumeQuotaFindingOf(undefined)).toEqual([]);
  });
});
