import { describe, expect, it } from "vitest";
import { parseExcludeList, planExclusions } from "./exclusions.js";

describe("exclusions", () => {
  it("excludes nothing by default: the worker images carry no package a handler can import", () => {
    const plan = planExclusions({ gpu: ["torch@2", "numpy"], cpu: ["sharp@^0.34"] }, []);
    expect(plan.excluded).toEqual([]);
    expect(plan.install).toEqual({ cpu: ["sharp@^0.34"], gpu: ["torch@2", "numpy"] });
    expect(plan.warnings).toEqual([]);
  });

  it("splits --exclude values", () => {
    expect(parseExcludeList(["a,b", " c ", "a", ""])).toEqual(["a", "b", "c"]);
    expect(parseExcludeList(undefined)).toEqual([]);
  });

  it("never installs user-excluded packages, and warns about declared ones", () => {
    const plan = planExclusions({ gpu: ["sharp@^0.34", "lodash"], cpu: ["left-pad@1"] }, ["lodash", "nothing-here"], new Set(["sharp", "lodash"]));
    expect(plan.install).toEqual({ cpu: ["left-pad@1"], gpu: ["sharp@^0.34"] });
    expect(plan.excluded).toEqual(["lodash", "nothing-here"]);
    expect(plan.warnings).toEqual([
      'endpoint "gpu": dependency "lodash" is not installed: it is excluded with --exclude',
      "--exclude nothing-here matches no dependency or import of any endpoint",
    ]);
  });

  it("counts an import as a match for --exclude", () => {
    const plan = planExclusions({ a: [] }, ["chalk"], new Set(["chalk"]));
    expect(plan.warnings).toEqual([]);
  });
});
