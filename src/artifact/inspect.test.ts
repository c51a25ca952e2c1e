import { gzipSync } from "node:zlib";
import tarStream from "tar-stream";
import { describe, expect, it } from "vitest";
import { DEFAULT_EXTRACT_LIMITS } from "./extract.js";
import { ArchiveInspector, ArchiveRefused, DEFAULT_MANIFEST_LIMIT } from "./inspect.js";

async function tarOf(entries: Array<{ name: string; body?: string; type?: tarStream.Header["type"]; linkname?: string }>): Promise<Buffer> {
  const pack = tarStream.pack();
  const parts: Buffer[] = [];
  pack.on("data", (d: unknown) => void parts.push(d as Buffer));
  const done = new Promise<void>((r) => pack.on("end", () => r()));
  for (const e of entries) pack.entry({ name: e.name, type: e.type ?? "file", linkname: e.linkname }, e.body ?? "");
  pack.finalize();
  await done;
  return Buffer.concat(parts);
}

async function inspect(bytes: Buffer, limits = {}) {
  const inspector = new ArchiveInspector({ ...DEFAULT_EXTRACT_LIMITS, maxManifestBytes: DEFAULT_MANIFEST_LIMIT, ...limits });
  // In small pieces, as a request body arrives.
  for (let i = 0; i < bytes.length; i += 1000) await inspector.write(bytes.subarray(i, i + 1000));
  return inspector.end();
}

describe("ArchiveInspector", () => {
  it("reads the manifest and counts entries and bytes of a good archive", async () => {
    const r = await inspect(
      gzipSync(
        await tarOf([
          { name: "./svc_manifest.json", body: '{"a":1}' },
          { name: "dir/", type: "directory" },
          { name: "dir/f.js", body: "abc" },
        ]),
      ),
    );
    expect(r).toEqual({ manifest: '{"a":1}', entries: 3, bytes: 10 });
  });

  it("names every offending entry, and refuses each limit with its status", async () => {
    const unsafe = gzipSync(
      await tarOf([
        { name: "a/../../x", body: "1" },
        { name: "s", type: "symlink", linkname: "/" },
        { name: "ok", body: "1" },
      ]),
    );
    await expect(inspect(unsafe)).rejects.toMatchObject({
      status: 422,
      entries: ['a/../../x: path "a/../../x" has a ".." segment', 's: a symlink (to "/"); only files and directories are allowed'],
    });
    const three = gzipSync(await tarOf([{ name: "a" }, { name: "b" }, { name: "c" }]));
    await expect(inspect(three, { maxEntries: 2 })).rejects.toMatchObject({ status: 413, message: "The artifact has more than 2 entries" });
    await expect(inspect(gzipSync(await tarOf([{ name: "big", body: "x".repeat(5000) }])), { maxBytes: 4096 })).rejects.toMatchObject({ status: 413 });
    await expect(inspect(gzipSync(await tarOf([{ name: "svc_manifest.json", body: "{}".padEnd(100) }])), { maxManifestBytes: 10 })).rejects.toMatchObject({
      status: 413,
    });
    const bomb = gzipSync(await tarOf([{ name: "zeros", body: "\0".repeat(300_000) }]));
    await expect(inspect(bomb, { ratioMinBytes: 100_000, maxRatio: 50 })).rejects.toMatchObject({
      status: 422,
      message: expect.stringContaining("compression bomb"),
    });
  });

  it("refuses a cut-short or non-gzip stream with a 422, never an unhandled error", async () => {
    const whole = gzipSync(await tarOf([{ name: "svc_manifest.json", body: "m".repeat(200_000) }]));
    const refused = await inspect(whole.subarray(0, 200)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ArchiveRefused);
    expect((refused as ArchiveRefused).status).toBe(422);
    await expect(inspect(Buffer.from("not gzip at all"))).rejects.toMatchObject({ status: 422, message: expect.stringContaining("not a gzip tar archive") });
  });
});
