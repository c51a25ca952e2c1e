import { describe, expect, it } from "vitest";
import { volumeNameProblem } from "./context.js";
import { planDeployVolumes, planUpdateVolume } from "./volumes.js";
import type { VolumeRecord } from "./store.js";

const volume = (id: string, userId: string, name: string): VolumeRecord => ({
  id,
  userId,
  name,
  size: 10,
  dataCenter: "local",
  type: "STANDARD",
  createdAt: 0,
});
const made = (name: string) => volume(`vol${"f".repeat(12)}`, "alice", name);

describe("volume names", () => {
  it.each(["models", "shared-data", "v1.2_x", "mine now", "A".repeat(64)])("accepts %s", (name) => expect(volumeNameProblem(name)).toBeUndefined());
  it.each(["", "..", ".", "../x", "a/b", "/etc", "x..y", ".hidden", "-x", "a\\b", "a\nb", "A".repeat(65)])("refuses %j", (name) => {
    expect(volumeNameProblem(name)).toMatch(/is not a volume name/);
  });
});

describe("planDeployVolumes", () => {
  const volumes = [volume("vol111111111111", "alice", "models"), volume("vol222222222222", "bob", "bobs"), volume("vol333333333333", "bob", "models")];

  it("resolves the user's own volumes by id or name, and creates one per unknown name (once)", () => {
    const plan = planDeployVolumes(
      volumes,
      "alice",
      { a: { volume: "vol111111111111" }, b: { volume: "models" }, c: { volume: "cache" }, d: { volume: "cache" }, e: { volume: null }, f: {} },
      made,
    );
    expect(plan).toEqual({ create: [made("cache")], errors: [] });
  });

  it("gives a user a volume of their own for another user's volume's name", () => {
    expect(planDeployVolumes(volumes, "alice", { a: { volume: "bobs" } }, made)).toEqual({ create: [made("bobs")], errors: [] });
  });

  it("refuses another user's id, an unknown id and a name with / or .., in the same words for both ids, and creates nothing then", () => {
    const plan = planDeployVolumes(
      volumes,
      "alice",
      { a: { volume: "vol222222222222" }, b: { volume: "vol999999999999" }, c: { volume: "../bobs" }, d: { volume: "fresh" } },
      made,
    );
    expect(plan).toEqual({
      create: [],
      errors: [
        'endpoint "a": volume "vol222222222222" is not one of your network volumes (name one of yours by id or name)',
        'endpoint "b": volume "vol999999999999" is not one of your network volumes (name one of yours by id or name)',
        `endpoint "c": volume "../bobs" is not a volume name (1 to 64 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit, without '..')`,
      ],
    });
  });

  it("refuses a name two of the user's volumes share (the REST API allows it) rather than mounting the first", () => {
    const twins = [...volumes, volume("vol444444444444", "alice", "models")];
    expect(planDeployVolumes(twins, "alice", { a: { volume: "models" } }, made)).toEqual({
      create: [],
      errors: ['endpoint "a": 2 of your network volumes are named "models" (vol111111111111, vol444444444444): name one by id, or rename the other'],
    });
    expect(planDeployVolumes(twins, "alice", { a: { volume: "vol444444444444" } }, made)).toEqual({ create: [], errors: [] });
  });
});

describe("planUpdateVolume sizes", () => {
  const current = { ...volume("vol111111111111", "alice", "models"), size: 20 };
  const room = (usedBytes: number) => ({ usedBytes, gbBytes: 100 });

  it("grows without measuring", () => {
    expect(planUpdateVolume(current, { size: 30 })).toEqual({ volume: { ...current, size: 30 }, errors: [] });
  });

  it("shrinks while the bytes used fit in the new size (exactly full included)", () => {
    expect(planUpdateVolume(current, { size: 15 }, room(1500))).toEqual({ volume: { ...current, size: 15 }, errors: [] });
  });

  it("refuses a size below the bytes used, naming them and the least size that holds them", () => {
    expect(planUpdateVolume(current, { size: 12 }, room(1501))).toEqual({
      errors: ["$.size: the volume holds 1501 bytes, more than 12 GB (1200 bytes); delete files first or give 16 GB or more"],
    });
  });

  it("refuses a shrink when the bytes used are not known, and reports a size the schema refuses only once", () => {
    expect(planUpdateVolume(current, { size: 10 }).errors).toEqual([
      "$.size: the bytes the volume holds are not known here, so it cannot shrink (it has 20 GB)",
    ]);
    expect(planUpdateVolume(current, { size: 5 }, room(0)).errors).toEqual(["$.size: must be at least 10"]);
  });
});
