import { describe, expect, it } from "vitest";
import { projectRelativeStack, projectSourceMap, userStack } from "./source-paths.js";

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

describe("a job's stack trimmed to the user's frames", () => {
  // As a process worker of a checkout reports it (test/runtime/stack-paths.test.ts).
  const stack = [
    "RangeError: too big: 5",
    "    at deeper (src/boom.ts:5:20)",
    "    at boom (src/boom.ts:10:15)",
    "    at parse (node_modules/zod/lib/index.js:7:3)",
    "    at Object.invoke (/home/ada/svc/packages/svc/src/handler.ts:124:30)",
    "    at WorkerLoop.execute (file:///home/ada/svc/dist/runtime/loop.js:351:50)",
    "    at file:///home/ada/svc/dist/runtime/loop.js:342:46",
    "    at AsyncLocalStorage.run (node:async_hooks:346:14)",
    "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
    "    at async WorkerLoop.run (file:///home/ada/svc/dist/runtime/loop.js:108:9)",
  ].join("\n");

  it("keeps the message, the project's frames and its packages'; leaves out svc's runtime, its SDK and Node's", () => {
    expect(userStack(stack, ["/home/ada/svc"])).toBe(
      [
        "RangeError: too big: 5",
        "    at deeper (src/boom.ts:5:20)",
        "    at boom (src/boom.ts:10:15)",
        "    at parse (node_modules/zod/lib/index.js:7:3)",
      ].join("\n"),
    );
  });

  it("knows the SDK as a package of the project, and an installed CLI, without their roots", () => {
    const installed =
      "Error: x\n    at f (src/a.ts:1:1)\n    at invoke (node_modules/svc/dist/handler.js:9:9)\n    at run (/usr/lib/node_modules/svc-cli/dist/runtime/loop.js:1:1)";
    expect(userStack(installed, [])).toBe("Error: x\n    at f (src/a.ts:1:1)");
  });

  it("keeps a stack whole when none of its frames is the user's, and a multi-line message as it is", () => {
    const inside = "Error: boom\n    at WorkerLoop.x (file:///home/ada/svc/dist/runtime/loop.js:1:1)";
    expect(userStack(inside, ["/home/ada/svc"])).toBe(inside);
    expect(userStack("Error: two\nlines\n    at f (src/a.ts:1:1)\n    at g (node:internal/x:1:1)", [])).toBe("Error: two\nlines\n    at f (src/a.ts:1:1)");
  });
});
