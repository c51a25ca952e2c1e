import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fingerprintOf, fingerprintProject } from "./fingerprint.js";

describe("fingerprint", () => {
  it("ignores order and changes with any path or content", () => {
    const a = fingerprintOf([
      { path: "a.ts", contents: "1" },
      { path: "b.ts", contents: "2" },
    ]);
    expect(
      fingerprintOf([
        { path: "b.ts", contents: "2" },
        { path: "a.ts", contents: "1" },
      ]),
    ).toBe(a);
    expect(
      fingerprintOf([
        { path: "a.ts", contents: "1" },
        { path: "b.ts", contents: "3" },
      ]),
    ).not.toBe(a);
    expect(
      fingerprintOf([
        { path: "a.ts", contents: "1" },
        { path: "c.ts", contents: "2" },
      ]),
    ).not.toBe(a);
    // Moving bytes between path and contents must not collide.
    expect(fingerprintOf([{ path: "a", contents: "b" }])).not.toBe(fingerprintOf([{ path: "ab", contents: "" }]));
    expect(a).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("includes package.json and lock files of the project", async () => {
    const root = mkdtempSync(join(tmpdir(), "svc-fp-"));
    try {
      writeFileSync(join(root, "a.ts"), "export {}");
      writeFileSync(join(root, "package.json"), '{"name":"x"}');
      const first = await fingerprintProject(root, ["a.ts"]);
      expect(await fingerprintProject(root, ["a.ts"])).toBe(first);
      writeFileSync(join(root, "package.json"), '{"name":"y"}');
      const second = await fingerprintProject(root, ["a.ts"]);
      expect(second).not.toBe(first);
      writeFileSync(join(root, "package-lock.json"), "{}");
      expect(await fingerprintProject(root, ["a.ts"])).not.toBe(second);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
