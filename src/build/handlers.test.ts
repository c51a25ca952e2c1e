import { describe, expect, it } from "vitest";
import { generateHandlerSource, moduleSpecifier } from "./handlers.js";

describe("generateHandlerSource", () => {
  it("imports each module once with a relative path and lists functions and methods", () => {
    const source = generateHandlerSource({
      name: "gpu-worker",
      type: "queue",
      functions: [
        { name: "upscale", exportName: "upscale", module: "src/gpu.ts", kind: "function" },
        { name: "embed", exportName: "Embedder", module: "src/models/embed.ts", kind: "method", className: "Embedder" },
        { name: "tokens", exportName: "default", module: "src/gpu.ts", kind: "generator" },
      ],
    });
    expect(source).toContain('import * as m0 from "../../../src/gpu.ts";');
    expect(source).toContain('import * as m1 from "../../../src/models/embed.ts";');
    expect(source.match(/src\/gpu\.ts/g)).toHaveLength(1);
    expect(source).toContain('import { __defineHandler } from "svc";');
    expect(source).toContain('endpoint: "gpu-worker",');
    expect(source).toContain('kind: "queue",');
    expect(source).toContain('{ name: "upscale", kind: "function", ref: m0["upscale"] },');
    expect(source).toContain('{ name: "embed", kind: "method", classRef: m1["Embedder"], method: "embed" },');
    expect(source).toContain('{ name: "tokens", kind: "generator", ref: m0["default"] },');
    expect(source).toContain("export default __defineHandler({");
  });

  it("points a load-balanced handler at its definition export", () => {
    const source = generateHandlerSource({
      name: "api",
      type: "lb",
      functions: [],
      lbExport: { module: "src/api.ts", exportName: "api" },
    });
    expect(source).toContain('kind: "lb",');
    expect(source).toContain('lb: m0["api"],');
  });

  it("imports modules that add routes to an imported definition", () => {
    const source = generateHandlerSource({
      name: "api",
      type: "lb",
      functions: [],
      lbExport: { module: "src/api.ts", exportName: "api" },
      routes: [{ loc: { file: "src/api.ts" } }, { loc: { file: "src/more-routes.ts" } }, { loc: { file: "src/more-routes.ts" } }],
    });
    expect(source.match(/more-routes/g)).toHaveLength(1);
    expect(source).toContain('import "../../../src/more-routes.ts";');
    expect(source).not.toContain('import "../../../src/api.ts";');
  });

  it("is deterministic", () => {
    const endpoint = { name: "x", type: "queue" as const, functions: [{ name: "f", exportName: "f", module: "b.ts", kind: "function" as const }] };
    expect(generateHandlerSource(endpoint)).toBe(generateHandlerSource(endpoint));
  });

  it("builds relative specifiers", () => {
    expect(moduleSpecifier("src/a.ts")).toBe("../../../src/a.ts");
    expect(moduleSpecifier("src/a.ts", "src")).toBe("./a.ts");
  });
});
