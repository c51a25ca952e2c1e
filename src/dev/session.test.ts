import { describe, expect, it } from "vitest";
import { isWatchedChange } from "./session.js";

describe("dev session helpers", () => {
  it("rebuilds for source changes only", () => {
    for (const f of ["src/a.ts", "src/b.mjs", "lib/c.tsx", "package.json", ".env"]) expect(isWatchedChange("/p", f)).toBe(true);
    for (const f of [".svc/artifact.tar.gz", "node_modules/x/index.js", "dist/a.js", "README.md", ".git/HEAD", "data.json"]) {
      expect(isWatchedChange("/p", f)).toBe(false);
    }
  });
});
