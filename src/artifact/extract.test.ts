import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import tarStream from "tar-stream";
import { UserError, errorMessage } from "../errors.js";
import { entryPath, extractArtifact, extractArtifactCached, safeMode, UnsafeArtifactError } from "./extract.js";

interface Entry {
  name: string;
  type?: tarStream.Header["type"];
  body?: string | Buffer;
  mode?: number;
  linkname?: string;
}

async function tarGz(entries: Entry[]): Promise<Buffer> {
  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const chunk of pack) chunks.push(chunk as Buffer);
  })();
  for (const e of entries) {
    const body = e.body === undefined ? undefined : Buffer.isBuffer(e.body) ? e.body : Buffer.from(e.body);
    await new Promise<void>((resolve, reject) =>
      pack.entry({ name: e.name, type: e.type ?? "file", mode: e.mode, linkname: e.linkname, size: body?.length ?? 0 }, body ?? Buffer.alloc(0), (err) =>
        err ? reject(err) : resolve(),
      ),
    );
  }
  pack.finalize();
  await done;
  return gzipSync(Buffer.concat(chunks));
}

let work: string;
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-extract-"));
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

async function writeArtifact(name: string, entries: Entry[]): Promise<string> {
  const file = join(work, `${name}.tar.gz`);
  await writeFile(file, await tarGz(entries));
  return file;
}

async function leftovers(): Promise<string[]> {
  return (await readdir(work)).filter((f) => f.includes(".partial-") || f.includes(".staging-") || f.includes(".download-"));
}

describe("entryPath / safeMode", () => {
  it("normalises and refuses", () => {
    expect(entryPath("./a/b.txt")).toEqual({ path: "a/b.txt" });
    expect(entryPath("./")).toEqual({ path: null });
    expect(entryPath("/etc/passwd")).toHaveProperty("refused");
    expect(entryPath("C:/x")).toHaveProperty("refused");
    expect(entryPath("a/../../x")).toHaveProperty("refused");
    expect(entryPath("a\\..\\x")).toHaveProperty("refused");
    expect(safeMode(0o4755, "file")).toBe(0o755);
    expect(safeMode(0o666, "file")).toBe(0o644);
    expect(safeMode(0o7777, "directory")).toBe(0o755);
  });
});

describe("extractArtifact", () => {
  it("extracts files and directories with sane modes", async () => {
    const src = await writeArtifact("good", [
      { name: "svc_manifest.json", body: '{"version":1}' },
      { name: "endpoints/", type: "directory" },
      { name: "endpoints/w/handler.mjs", body: "export default 1;", mode: 0o4777 },
      { name: "./endpoints/w/node_modules/x/index.js", body: "module.exports = 2;", mode: 0o600 },
    ]);
    const dest = join(work, "good-out");
    const result = await extractArtifact(src, dest);
    expect(result.files).toBe(3);
    expect(await readFile(join(dest, "endpoints/w/handler.mjs"), "utf8")).toBe("export default 1;");
    expect((await stat(join(dest, "endpoints/w/handler.mjs"))).mode & 0o7777).toBe(0o755);
    expect((await stat(join(dest, "endpoints/w/node_modules/x/index.js"))).mode & 0o7777).toBe(0o644);
  });

  const hostile: Array<[string, Entry[], RegExp]> = [
    [
      "symlink",
      [
        { name: "a.txt", body: "x" },
        { name: "evil", type: "symlink", linkname: "/etc/passwd" },
      ],
      /symlink/,
    ],
    [
      "hardlink",
      [
        { name: "a.txt", body: "x" },
        { name: "evil", type: "link", linkname: "a.txt" },
      ],
      /is a link/,
    ],
    ["device", [{ name: "dev", type: "character-device" }], /character-device/],
    ["fifo", [{ name: "pipe", type: "fifo" }], /fifo/],
    ["absolute path", [{ name: "/tmp/svc-evil.txt", body: "x" }], /absolute path/],
    [
      "dot-dot",
      [
        { name: "ok.txt", body: "x" },
        { name: "a/../../evil.txt", body: "x" },
      ],
      /"\.\." segment/,
    ],
    [
      "duplicate",
      [
        { name: "a.txt", body: "x" },
        { name: "a.txt", body: "y" },
      ],
      /duplicate/,
    ],
  ];
  for (const [label, entries, message] of hostile) {
    it(`refuses a ${label} and leaves nothing behind`, async () => {
      const src = await writeArtifact(label.replace(/\W/g, "-"), entries);
      const dest = join(work, `${label.replace(/\W/g, "-")}-out`);
      const failure = await extractArtifact(src, dest).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(UnsafeArtifactError);
      expect(failure).toBeInstanceOf(UserError);
      expect(errorMessage(failure)).toMatch(message);
      await expect(stat(dest)).rejects.toThrow();
      expect(await leftovers()).toEqual([]);
    });
  }

  it("refuses a zip bomb by compression ratio", async () => {
    const src = await writeArtifact("bomb", [{ name: "zeros.bin", body: Buffer.alloc(64 * 1024 * 1024) }]);
    expect((await stat(src)).size).toBeLessThan(200_000);
    const failure = await extractArtifact(src, join(work, "bomb-out")).catch((e: unknown) => e);
    expect(errorMessage(failure)).toMatch(/compression ratio above 200:1/);
    expect(await leftovers()).toEqual([]);
  });

  it("bounds total size and entry count", async () => {
    const src = await writeArtifact("many", [
      { name: "a.txt", body: "a".repeat(1000) },
      { name: "b.txt", body: "b".repeat(1000) },
      { name: "c.txt", body: "c" },
    ]);
    await expect(extractArtifact(src, join(work, "size-out"), { maxBytes: 1500 })).rejects.toThrow(/more than 1500 bytes/);
    await expect(extractArtifact(src, join(work, "count-out"), { maxEntries: 2 })).rejects.toThrow(/more than 2 entries/);
    expect(await leftovers()).toEqual([]);
  });

  it("refuses something that is not a tar.gz, and names a missing file", async () => {
    const junk = join(work, "junk.tar.gz");
    await writeFile(junk, "not gzip at all");
    await expect(extractArtifact(junk, join(work, "junk-out"))).rejects.toThrow(/not a valid \.tar\.gz/);
    await expect(extractArtifact(join(work, "missing.tar.gz"), join(work, "missing-out"))).rejects.toThrow(/Artifact not found/);
    expect(await leftovers()).toEqual([]);
  });
});

describe("extractArtifactCached and http sources", () => {
  let server: Server;
  let url: string;
  const seenAuth: Array<string | undefined> = [];
  let body: Buffer;

  beforeAll(async () => {
    body = await tarGz([{ name: "endpoints/w/handler.mjs", body: "export default 42;" }]);
    server = createServer((req, res) => {
      seenAuth.push(req.headers.authorization);
      if (req.headers.authorization !== "Bearer worker-token") {
        res.writeHead(401).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/gzip" }).end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address() as { port: number };
    url = `http://127.0.0.1:${address.port}/artifact.tar.gz`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it("extracts the same content once, by sha256", async () => {
    const cache = join(work, "cache");
    const a = join(work, "same-a.tar.gz");
    const b = join(work, "same-b.tar.gz");
    await writeFile(a, body);
    await writeFile(b, body);
    const first = await extractArtifactCached(a, cache);
    await writeFile(join(first, "marker"), "kept");
    const second = await extractArtifactCached(b, cache);
    expect(second).toBe(first);
    expect(await readFile(join(second, "marker"), "utf8")).toBe("kept");
    // Concurrent extractions of one artifact agree on one directory.
    const other = await writeArtifact("other", [{ name: "x.txt", body: "x" }]);
    const dirs = await Promise.all([1, 2, 3].map(() => extractArtifactCached(other, cache)));
    expect(new Set(dirs).size).toBe(1);
    expect((await readdir(cache)).filter((f) => !f.startsWith("."))).toHaveLength(2);
    expect((await readdir(cache)).filter((f) => f.startsWith("."))).toEqual([]);
  });

  it("refuses an artifact whose sha256 is not the one it was deployed with, before unpacking it; the cache is 0700", async () => {
    const cache = join(work, "cache-verified");
    const file = join(work, "verified.tar.gz");
    await writeFile(file, body);
    const digest = createHash("sha256").update(body).digest("hex");
    const dir = await extractArtifactCached(file, cache, { sha256: digest });
    expect(dir).toBe(join(cache, digest));
    expect((await stat(cache)).mode & 0o777).toBe(0o700);
    const changed = join(work, "changed.tar.gz");
    await writeFile(changed, await tarGz([{ name: "endpoints/w/handler.mjs", body: "export default 'not what was deployed';" }]));
    await expect(extractArtifactCached(changed, join(work, "cache-changed"), { sha256: digest })).rejects.toThrow(
      /its sha256 is [0-9a-f]{64}, not the [0-9a-f]{64} it was deployed with/,
    );
    expect(await readdir(join(work, "cache-changed"))).toEqual([]);
  });

  it("downloads http sources with the worker's bearer token", async () => {
    const dest = join(work, "http-out");
    await extractArtifact(url, dest, { token: "worker-token" });
    expect(await readFile(join(dest, "endpoints/w/handler.mjs"), "utf8")).toBe("export default 42;");
    expect(seenAuth.at(-1)).toBe("Bearer worker-token");
    const cached = await extractArtifactCached(url, join(work, "http-cache"), { token: "worker-token" });
    expect(await readFile(join(cached, "endpoints/w/handler.mjs"), "utf8")).toBe("export default 42;");
    await expect(extractArtifact(url, join(work, "http-denied"), { token: "wrong" })).rejects.toThrow(/HTTP 401/);
    expect(await leftovers()).toEqual([]);
  });
});
