import { describe, expect, it } from "vitest";
import { ExitCode, UserError } from "../errors.js";
import { findVolume, noSuchVolume, volumeToReuse } from "./volume-names.js";

const models = { id: "vol111111111111", name: "models", size: 10 };
const cache = { id: "vol222222222222", name: "cache", size: 20 };

describe("findVolume", () => {
  it("takes an id or a name one volume has", () => {
    expect(findVolume([models, cache], "vol222222222222")).toBe(cache);
    expect(findVolume([models, cache], "models")).toBe(models);
    expect(findVolume([models, cache], "nope")).toBeUndefined();
  });
  it("refuses a name two volumes share, naming both ids", () => {
    const twin = { ...cache, name: "models" };
    expect(() => findVolume([models, twin], "models")).toThrow('2 network volumes are named "models" (vol111111111111, vol222222222222)');
    expect(findVolume([models, twin], twin.id)).toBe(twin);
  });
});

describe("noSuchVolume", () => {
  it("suggests the closest name, when one is close", () => {
    expect(noSuchVolume([models, cache], "modles").message).toBe('No network volume "modles" among yours; did you mean "models"?');
    expect(noSuchVolume([models], "weights").message).toBe('No network volume "weights" among yours');
  });
});

describe("volumeToReuse", () => {
  it("creates a new name, and refuses one the user has, naming the volume and the flag", () => {
    expect(volumeToReuse([cache], "models", false)).toBeUndefined();
    let refused: unknown;
    try {
      volumeToReuse([models, cache], "models", false);
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(UserError);
    expect((refused as UserError).exitCode).toBe(ExitCode.user);
    expect((refused as UserError).message).toContain('already have a network volume named "models" (vol111111111111, 10 GB)');
    expect((refused as UserError).hint).toContain("--reuse");
  });
  it("with reuse, gives back the one volume of that name (never one of several)", () => {
    expect(volumeToReuse([models, cache], "models", true)).toBe(models);
    expect(() => volumeToReuse([models, { ...cache, name: "models" }], "models", true)).toThrow("already have a network volume");
  });
});
