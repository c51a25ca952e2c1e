import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { installSteps, svcCheckout } from "./init.js";

describe("svc init's install step", () => {
  it("names the checkout's tarballs by their real paths", () => {
    const lines = installSteps("/src/svc", "1.2.3");
    expect(lines[0]).toBe("  npm install /src/svc/svc-1.2.3.tgz /src/svc/svc-cli-1.2.3.tgz");
    expect(lines[1]).toContain("`cd /src/svc && npm pack -w svc && npm pack`");
  });
  it("keeps a placeholder only for a CLI that runs from no checkout", () => {
    expect(installSteps(undefined, "1.2.3")[0]).toContain("<svc checkout>/svc-1.2.3.tgz");
  });
  it("tells a checkout (packages/svc beside it) from an installed package", () => {
    const root = mkdtempSync(join(tmpdir(), "svc-checkout-"));
    try {
      expect(svcCheckout(root)).toBeUndefined();
      mkdirSync(join(root, "packages", "svc"), { recursive: true });
      writeFileSync(join(root, "packages", "svc", "package.json"), "{}");
      expect(svcCheckout(root)).toBe(root);
      // The package root as the CLI knows it ends in a slash; the `cd` it prints does not.
      expect(svcCheckout(`${root}/`)).toBe(root);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
