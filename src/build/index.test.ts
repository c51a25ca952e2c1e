import { describe, expect, it } from "vitest";
import { formatBytes, largestItems, maxArtifactBytes, mergeDependencies, MAX_ARTIFACT_BYTES } from "./index.js";

describe("build helpers", () => {
  it("adds detected natives as name@version unless declared or excluded", () => {
    const natives = [
      { name: "bufferutil", version: "4.0.9", reason: "r" },
      { name: "sharp", version: "0.34.1", reason: "r" },
      { name: "torch", version: "1", reason: "r" },
    ];
    expect(mergeDependencies(["sharp@^0.34", "zod@3"], natives, new Set(["torch"]))).toEqual(["bufferutil@4.0.9", "sharp@^0.34", "zod@3"]);
  });

  it("names the largest packages and bundles", () => {
    const file = (name: string, size: number) => ({ name, type: "file" as const, mode: 0o644, size });
    expect(
      largestItems(
        [
          file("endpoints/a/handler.mjs", 10),
          file("endpoints/a/node_modules/big/a.js", 500),
          file("endpoints/a/node_modules/big/b.js", 600),
          file("endpoints/a/node_modules/@s/p/x.node", 700),
          file("endpoints/b/node_modules/small/i.js", 5),
          file("svc_manifest.json", 10_000),
        ],
        3,
      ),
    ).toEqual([
      { label: 'big (endpoint "a")', bytes: 1100 },
      { label: '@s/p (endpoint "a")', bytes: 700 },
      { label: "endpoints/a/handler.mjs (bundled code)", bytes: 10 },
    ]);
  });

  it("reads the size limit from SVC_MAX_ARTIFACT_BYTES", () => {
    expect(maxArtifactBytes({})).toBe(MAX_ARTIFACT_BYTES);
    expect(MAX_ARTIFACT_BYTES).toBe(1_500_000_000);
    expect(maxArtifactBytes({ SVC_MAX_ARTIFACT_BYTES: "1000" })).toBe(1000);
    expect(() => maxArtifactBytes({ SVC_MAX_ARTIFACT_BYTES: "lots" })).toThrow(/positive integer/);
    expect(formatBytes(999)).toBe("999 B");
    expect(formatBytes(1_500_000_000)).toBe("1.5 GB");
  });
});
