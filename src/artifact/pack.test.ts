import { gunzipSync, inflateRawSync } from "node:zlib";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { UserError } from "../errors.js";
import { memoryEntries, mergeEntries, packDirectory, packEntries, planEntries } from "./pack.js";

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-pack-"));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function makeTree(root: string, mtime: Date, reverse = false): void {
  const files: Array<[string, string]> = [
    ["b/z.txt", "zed"],
    ["a.txt", "alpha"],
    ["b/a/deep.txt", "deep"],
    ["run.sh", "#!/bin/sh\necho hi\n"],
    [`long/${"x".repeat(120)}/file.txt`, "long path"],
  ];
  for (const [path, contents] of reverse ? files.reverse() : files) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), contents);
    utimesSync(join(root, path), mtime, mtime);
  }
  chmodSync(join(root, "run.sh"), 0o700);
  chmodSync(join(root, "a.txt"), 0o600);
}

describe("packDirectory", () => {
  it("gives identical bytes for the same tree regardless of mtimes, creation order and permissions", async () => {
    const one = tempDir();
    const two = tempDir();
    makeTree(one, new Date("2020-05-05"));
    makeTree(two, new Date("2024-01-01"), true);
    chmodSync(join(two, "a.txt"), 0o644);
    const out = tempDir();
    await packDirectory(one, join(out, "one.tar.gz"));
    await packDirectory(two, join(out, "two.tar.gz"));
    expect(readFileSync(join(out, "one.tar.gz")).equals(readFileSync(join(out, "two.tar.gz")))).toBe(true);
  });

  it("streams big trees to the same tar as the in-memory path, each path giving the same bytes every time", async () => {
    const root = tempDir();
    makeTree(root, new Date());
    writeFileSync(join(root, "big.bin"), Buffer.alloc(3 * 1024 * 1024, 7));
    const out = tempDir();
    await packDirectory(root, join(out, "memory.tar.gz"));
    await packDirectory(root, join(out, "memory2.tar.gz"));
    await packDirectory(root, join(out, "stream.tar.gz"), { inMemoryBytes: 0 });
    await packDirectory(root, join(out, "stream2.tar.gz"), { inMemoryBytes: 0 });
    const bytes = (name: string) => readFileSync(join(out, name));
    expect(bytes("memory2.tar.gz").equals(bytes("memory.tar.gz"))).toBe(true);
    expect(bytes("stream2.tar.gz").equals(bytes("stream.tar.gz"))).toBe(true);
    // The in-memory path gzips a large tar in two members at once (pack.ts): the same tar inside.
    expect(gunzipSync(bytes("stream.tar.gz")).equals(gunzipSync(bytes("memory.tar.gz")))).toBe(true);
    // Members, walked: a 10-byte header (node writes no optional fields), the deflate data, an 8-byte trailer.
    const members = (gz: Buffer) => {
      let count = 0;
      for (let at = 0; at < gz.length; count++) {
        expect([gz[at], gz[at + 1], gz[at + 3]]).toEqual([0x1f, 0x8b, 0]);
        at += 10 + (inflateRawSync(gz.subarray(at + 10), { info: true }) as unknown as { engine: { bytesWritten: number } }).engine.bytesWritten + 8;
      }
      return count;
    };
    expect(members(bytes("memory.tar.gz"))).toBe(2);
    expect(members(bytes("stream.tar.gz"))).toBe(1);
    const extracted = tempDir();
    execFileSync("tar", ["-xzf", join(out, "stream.tar.gz"), "-C", extracted]);
    expect(readFileSync(join(extracted, "big.bin")).equals(Buffer.alloc(3 * 1024 * 1024, 7))).toBe(true);
  });

  it("stores sorted entries with directories, root owner, fixed mtime and normalized modes, readable by tar", async () => {
    const root = tempDir();
    makeTree(root, new Date());
    const out = join(tempDir(), "a.tar.gz");
    const { bytes } = await packDirectory(root, out);
    expect(bytes).toBeGreaterThan(0);
    const listing = execFileSync("tar", ["--numeric-owner", "-tvzf", out], { encoding: "utf8" }).trim().split("\n");
    const names = listing.map((line) => line.split(/\s+/).slice(5).join(" "));
    expect(names).toEqual([
      "a.txt",
      "b/",
      "b/a/",
      "b/a/deep.txt",
      "b/z.txt",
      "long/",
      `long/${"x".repeat(120)}/`,
      `long/${"x".repeat(120)}/file.txt`,
      "run.sh",
    ]);
    for (const line of listing) {
      const [mode, owner, , date] = line.split(/\s+/);
      expect(owner).toBe("0/0");
      expect(date).toMatch(/^(2000-01-01|1999-12-31)$/);
      if (line.endsWith("/") || line.endsWith("run.sh")) expect(mode).toMatch(/^[d-]rwxr-xr-x$/);
      else expect(mode).toBe("-rw-r--r--");
    }
    const extracted = tempDir();
    execFileSync("tar", ["-xzf", out, "-C", extracted]);
    expect(readFileSync(join(extracted, "b/a/deep.txt"), "utf8")).toBe("deep");
  });

  it("stores a symlink to a file inside the tree as that file, and refuses links that leave it", async () => {
    const root = tempDir();
    writeFileSync(join(root, "real.txt"), "real");
    symlinkSync("real.txt", join(root, "link.txt"));
    const entries = await planEntries(root);
    expect(entries.map((e) => [e.name, e.type, e.size])).toEqual([
      ["link.txt", "file", 4],
      ["real.txt", "file", 4],
    ]);
    const out = join(tempDir(), "l.tar.gz");
    await packDirectory(root, out);
    const listing = execFileSync("tar", ["-tvzf", out], { encoding: "utf8" });
    expect(listing).not.toContain("->");

    const outside = tempDir();
    writeFileSync(join(outside, "secret"), "s");
    symlinkSync(join(outside, "secret"), join(root, "escape"));
    await expect(packDirectory(root, join(tempDir(), "x.tar.gz"))).rejects.toThrow(UserError);
    await expect(planEntries(root)).rejects.toThrow(/escape: it is a symbolic link/);
  });

  it("packs files held in memory beside files on disk, the same as if all were on disk", async () => {
    const disk = tempDir();
    mkdirSync(join(disk, "endpoints/a/node_modules/x"), { recursive: true });
    writeFileSync(join(disk, "endpoints/a/node_modules/x/index.js"), "x");
    const memory = new Map([
      ["endpoints/a/handler.mjs", Buffer.from("a")],
      ["endpoints/b/handler.mjs", Buffer.from("b")],
      ["svc_manifest.json", Buffer.from("{}")],
    ]);
    const entries = mergeEntries(await planEntries(disk), memoryEntries(memory));
    expect(entries.map((e) => e.name)).toEqual([
      "endpoints/",
      "endpoints/a/",
      "endpoints/a/handler.mjs",
      "endpoints/a/node_modules/",
      "endpoints/a/node_modules/x/",
      "endpoints/a/node_modules/x/index.js",
      "endpoints/b/",
      "endpoints/b/handler.mjs",
      "svc_manifest.json",
    ]);
    const out = tempDir();
    await packEntries(entries, join(out, "mixed.tar.gz"));
    for (const [name, data] of memory) {
      mkdirSync(join(disk, name, ".."), { recursive: true });
      writeFileSync(join(disk, name), data);
    }
    await packDirectory(disk, join(out, "disk.tar.gz"));
    expect(readFileSync(join(out, "mixed.tar.gz")).equals(readFileSync(join(out, "disk.tar.gz")))).toBe(true);
  });
});
