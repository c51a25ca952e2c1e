import { describe, expect, it } from "vitest";
import { BASE_IMAGE_PACKAGES, parseExcludeList, planExclusions } from "./exclusions.js";

describe("exclusions", () => {
  it("lists the spec's base-image packages", () => {
    expect([...BASE_IMAGE_PACKAGES].sort()).toEqual(["numpy", "torch", "torchaudio", "torchvision", "triton"]);
  });

  it("splits --exclude values", () => {
    expect(parseExcludeList(["a,b", " c ", "a", ""])).toEqual(["a", "b", "c"]);
    expect(parseExcludeList(undefined)).toEqual([]);
  });

  it("never installs base-image or user-excluded packages, and warns about declared ones", () => {
    const plan = planExclusions(
      { gpu: ["torch@2", "sharp@^0.34", "lodash"], cpu: ["left-pad@1"] },
      ["lodash", "nothing-here"],
      new Set(["sharp", "lodash"]),
    );
    expect(plan.install).toEqual({ cpu: ["left-pad@1"], gpu: ["sharp@^0.34"] });
    expect(plan.excluded).toEqual(["lodash", "nothing-here", "numpy", "torch", "torchaudio", "torchvision", "triton"]);
    expect(plan.warnings).toEqual([
      'endpoint "gpu": dependency "torch@2" is not installed: it is preinstalled in the worker base image',
      'endpoint "gpu": dependency "lodash" is not installed: it is excluded with --exclude',
      "--exclude nothing-here matches no dependency or import of any endpoint",
    ]);
  });

  it("counts an import as a match for --exclude", () => {
    const plan = planExclusions({ a: [] }, ["chalk"], new Set(["chalk"]));
    expect(plan.warnings).toEqual([]);
  });
});
