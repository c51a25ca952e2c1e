// A shrink and an S3 write at the same moment: the write must not pass the new size because it was admitted
// under the old one after the shrink measured the volume.

import { describe, expect, it } from "vitest";
import { VolumeUsage } from "./usage.js";

/** 100 bytes a GB; the directory does not exist, so the volume holds 0 bytes. */
const DIR = "/nonexistent";

describe("a shrink being decided while writes arrive", () => {
  it("admits writes only under the smaller size from before the measurement, and under the old one again if it is refused", async () => {
    const stored = { id: "v", size: 10 };
    const usage = new VolumeUsage(100, 3000, (id) => (id === "v" ? stored.size : undefined));
    // PATCH size 5: the cap comes first, then the measurement the shrink is checked against.
    const lift = usage.capAdmissions("v", 5);
    expect(await usage.committed("v", DIR)).toBe(0);
    // A write arriving now (its volume looked up with size 10) is checked against 5 GB = 500 bytes.
    await expect(usage.reserve(stored, DIR, 600)).rejects.toMatchObject({ code: "EntityTooLarge" });
    const small = await usage.reserve(stored, DIR, 100);
    small(0);
    // The shrink is refused (or the request fails): 10 GB holds again.
    lift();
    const big = await usage.reserve(stored, DIR, 600);
    big(0);
  });

  it("checks a write against the size stored when it is admitted, not the one it looked up before", async () => {
    const stored = { id: "v", size: 10 };
    const usage = new VolumeUsage(100, 3000, () => stored.size);
    const lookedUp = { ...stored };
    // The shrink is stored and its cap lifted before the write (which looked its volume up earlier) is admitted.
    stored.size = 5;
    await expect(usage.reserve(lookedUp, DIR, 600)).rejects.toMatchObject({ code: "EntityTooLarge" });
  });

  it("keeps the least cap while two shrinks of one volume are decided", async () => {
    const usage = new VolumeUsage(100);
    const volume = { id: "v", size: 10 };
    const toFive = usage.capAdmissions("v", 5);
    const toEight = usage.capAdmissions("v", 8);
    toEight();
    await expect(usage.reserve(volume, DIR, 600)).rejects.toMatchObject({ code: "EntityTooLarge" });
    toFive();
    (await usage.reserve(volume, DIR, 600))(0);
  });
});
