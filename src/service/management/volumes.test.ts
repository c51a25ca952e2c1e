import { describe, expect, it } from "vitest";
import { volumeNameProblem } from "./context.js";
import { planDeployVolumes } from "./volumes.js";
import type { VolumeRecord } from "./store.js";

const volume = (id: string, userId: string, name: string): VolumeRecord => ({ id, userId, name, size: 10, dataCenter: "local", type: "STANDARD", createdAt: 0 });
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
    const plan = planDeployVolumes(volumes, "alice", { a: { volume: "vol111111111111" }, b: { volume: "models" }, c: { volume: "cache" }, d: { volume: "cache" }, e: { volume: null }, f: {} }, made);
    expect(plan).toEqual({ create: [made("cache")], errors: [] });
  });

  it("gives a user a volume of their own for another user's volume's name", () => {
    expect(planDeployVolumes(volumes, "alice", { a: { volume: "bobs" } }, made)).toEqual({ create: [made("bobs")], errors: [] });
  });

  it("refuses another user's id, an unknown id and a name with / or .., in the same words for both ids, and creates nothing then", () => {
    const plan = planDeployVolumes(volumes, "alice", { a: { volume: "vol222222222222" }, b: { volume: "vol999999999999" }, c: { volume: "../bobs" }, d: { volume: "fresh" } }, made);
    expect(plan).toEqual({
      create: [],
      errors: [
        'endpoint "a": volume "vol222222222222" is not one of your network volumes (name one of yours by id or name)',
        'endpoint "b": volume "vol999999999999" is not one of your network volumes (name one of yours by id or name)',
        `endpoint "c": volume "../bobs" is not a volume name (1 to 64 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit, without '..')`,
      ],
    });
  });
});
