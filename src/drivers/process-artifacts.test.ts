import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { deployedSha256, linkTree } from "./process-artifacts.js";

const work = mkdtempSync(join(tmpdir(), "svc-process-artifacts-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("deployedSha256", () => {
  it("reads the sha256 an artifact file is named by, and nothing from any other name", () => {
    const sha = "a".repeat(64);
    expect(deployedSha256(`/data/artifacts/${sha}.tar.gz`)).toBe(sha);
    expect(deployedSha256("/data/artifacts/upload.tar.gz")).toBeUndefined();
    expect(deployedSha256(`/data/artifacts/${"A".repeat(64)}.tar.gz`)).toBeUndefined();
  });
});

describe("linkTree", () => {
  it("fills a directory with the source's tree, files as hard links", async () => {
    const source = join(work, "source");
    const dest = join(work, "dest");
    await mkdir(join(source, "endpoints/fns"), { recursive: true });
    await mkdir(dest);
    await writeFile(join(source, "endpoints/fns/handler.mjs"), "export default {};");
    await linkTree(source, dest);
    expect(readFileSync(join(dest, "endpoints/fns/handler.mjs"), "utf8")).toBe("export default {};");
    expect(statSync(join(dest, "endpoints/fns/handler.mjs")).ino).toBe(statSync(join(source, "endpoints/fns/handler.mjs")).ino);
  });
});
