import { describe, expect, it } from "vitest";
import { projectRelativeStack, projectSourceMap } from "./source-paths.js";

describe("source paths of a deployed endpoint", () => {
  it("writes the project's sources as svc-project:/// paths and others as file URLs", () => {
    const map = JSON.stringify({ version: 3, sources: ["../../../../src/boom.ts", "../../../../../svc/src/sdk/handler.ts", "node:fs"], mappings: "" });
    const out = JSON.parse(projectSourceMap(map, "/home/ada/app/.svc/.build/endpoints/boom", "/home/ada/app"));
    expect(out.sources).toEqual(["svc-project:///src/boom.ts", "file:///home/ada/svc/src/sdk/handler.ts", "node:fs"]);
    expect(out.sourceRoot).toBeUndefined();
  });

  it("turns those paths into project-relative ones in a stack", () => {
    expect(projectRelativeStack("RangeError: x\n    at deeper (svc-project:///src/boom.ts:4:20)\n    at (file:///x.js:1:1)")).toBe(
      "RangeError: x\n    at deeper (src/boom.ts:4:20)\n    at (file:///x.js:1:1)",
    );
  });
});
