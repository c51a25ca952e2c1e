import { describe, expect, it } from "vitest";
import { curlFor, isWatchedChange } from "./session.js";

describe("dev session helpers", () => {
  const endpoint = { id: "abc", name: "e", app: "a", env: "dev", url: "http://127.0.0.1:1/v2/abc", type: "queue" as const };

  it("prints a curl that names the function only when the endpoint serves several", () => {
    expect(curlFor(endpoint, "k")).toBe(
      `curl -s -X POST http://127.0.0.1:1/v2/abc/runsync -H "Authorization: Bearer k" -H "Content-Type: application/json" -d '{"input":{}}'`,
    );
    expect(curlFor(endpoint, "k", ["one"])).toContain(`-d '{"input":{}}'`);
    expect(curlFor(endpoint, "k", ["embed", "rank"])).toContain(`-d '{"input":{},"function":"embed"}'`);
  });

  it("rebuilds for source changes only", () => {
    for (const f of ["src/a.ts", "src/b.mjs", "lib/c.tsx", "package.json", ".env"]) expect(isWatchedChange("/p", f)).toBe(true);
    for (const f of [".svc/artifact.tar.gz", "node_modules/x/index.js", "dist/a.js", "README.md", ".git/HEAD", "data.json"]) {
      expect(isWatchedChange("/p", f)).toBe(false);
    }
  });
});
