// Hostile build uploads against a real `svc server` process, with an admin key an ordinary user has: a cut-short
// gzip, a manifest that expands to 600 MB, a compression bomb, more entries than allowed, and every entry kind a
// worker refuses. Each gets its 4xx problem, nothing of it is kept, and the same process answers afterwards.

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync, createGzip } from "node:zlib";
import tarStream from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServerProcess, type ServerProcess } from "../server-process.js";

const KEY = "upload-hostile-admin-key";
const MANIFEST = JSON.stringify({ version: 1, app: "up", fingerprint: "f", svcVersion: "0", resources: {}, routes: {} });

let work: string;
let dataDir: string;
let server: ServerProcess | undefined;
let url: string;

async function startServer(): Promise<void> {
  server = await startServerProcess({ dataDir, env: { SVC_API_KEY: KEY, SVC_UPLOAD_IDLE_MS: "1500" }, workers: "none" });
  url = server.url;
}

async function stopServer(): Promise<void> {
  await server?.stop();
}

/** POST the bytes as a build, reading the answer whenever it comes. */
function upload(body: Buffer, sha = createHash("sha256").update(body).digest("hex")): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/apps/up/builds`,
      { method: "POST", headers: { authorization: `Bearer ${KEY}`, "x-svc-sha256": sha, "content-type": "application/gzip", "content-length": body.length } },
      (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** The same process answers, and no error reached its last resort: each was handled where it happened. */
async function alive(): Promise<void> {
  expect(server!.child.exitCode).toBeNull();
  expect((await fetch(`${url}/openapi.json`)).status).toBe(200);
  expect(server!.log()).not.toContain("the service keeps serving");
}

/** Nothing of refused uploads: no artifact, no temporary file, no build row. */
async function nothingKept(sha: string): Promise<void> {
  const dir = join(dataDir, "artifacts");
  expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
  expect((await fetch(`${url}/v1/apps/up/builds/${sha}`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(404);
}

type Entry = { name: string; type?: tarStream.Header["type"]; linkname?: string; body?: string; size?: number; fill?: (write: (b: Buffer) => void) => void };

/** A gzip tar of these entries (bodies written in pieces, so a huge one never sits in memory uncompressed). */
async function archive(entries: Entry[]): Promise<Buffer> {
  const pack = tarStream.pack();
  const gz = createGzip();
  const out: Buffer[] = [];
  gz.on("data", (d: Buffer) => out.push(d));
  const done = new Promise((r) => gz.on("end", r));
  pack.pipe(gz);
  for (const e of entries) {
    if (e.fill) {
      const stream = pack.entry({ name: e.name, size: e.size, type: "file" });
      const pieces: Buffer[] = [];
      e.fill((b) => pieces.push(b));
      for (const p of pieces) if (!stream.write(p)) await new Promise((r) => stream.once("drain", r));
      await new Promise<void>((r) => stream.end(r));
    } else {
      // Queued, not awaited one by one: packing 200 000 small entries stays quick.
      pack.entry(
        { name: e.name, type: e.type ?? "file", linkname: e.linkname, ...(e.type === "character-device" ? { devmajor: 1, devminor: 3 } : {}) },
        e.body ?? "",
      );
    }
  }
  pack.finalize();
  await done;
  return Buffer.concat(out);
}

/** One ustar entry of a regular file: the 512-byte header, then the content padded to 512. */
function tarFile(name: string, content: Buffer): Buffer {
  const header = Buffer.alloc(512);
  const field = (offset: number, length: number, value: string) => header.write(value, offset, length, "ascii");
  field(0, 100, name);
  field(100, 8, "0000644\0");
  field(108, 8, "0000000\0");
  field(116, 8, "0000000\0");
  field(124, 12, `${content.length.toString(8).padStart(11, "0")}\0`);
  field(136, 12, "00000000000\0");
  field(148, 8, "        ");
  field(156, 1, "0");
  field(257, 6, "ustar\0");
  field(263, 2, "00");
  let sum = 0;
  for (const b of header) sum += b;
  field(148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  return Buffer.concat([header, content, Buffer.alloc((512 - (content.length % 512)) % 512)]);
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-upload-hostile-"));
  dataDir = join(work, "data");
  await startServer();
}, 60_000);
afterAll(async () => {
  await stopServer();
  rmSync(work, { recursive: true, force: true });
});

describe("hostile uploads", () => {
  it("a gzip stream cut short: 422, and the process lives", async () => {
    // Cut inside the manifest's own bytes: where the reader of the entry meets the gzip error.
    const padded = JSON.stringify({ ...JSON.parse(MANIFEST), padding: Array.from({ length: 40_000 }, (_, i) => i.toString(36)).join(" ") });
    const whole = await archive([
      { name: "svc_manifest.json", body: padded },
      { name: "endpoints/a/handler.mjs", body: "x".repeat(100_000) },
    ]);
    const cut = whole.subarray(0, Math.floor(whole.length / 10));
    const r = await upload(cut);
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ status: 422, detail: expect.stringContaining("not a gzip tar archive") });
    await alive();
    await nothingKept(createHash("sha256").update(cut).digest("hex"));
  });

  it("a manifest that expands to 600 MB: 413 at its header, memory untouched", async () => {
    const size = 600 * 1024 * 1024;
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const body = await archive([
      {
        name: "svc_manifest.json",
        size,
        fill: (w) => {
          for (let i = 0; i < 600; i++) w(chunk);
        },
      },
    ]);
    expect(body.length).toBeLessThan(2_000_000);
    const r = await upload(body);
    expect(r.status).toBe(413);
    expect(r.body.detail).toMatch(/svc_manifest\.json is 629145600 bytes; the limit is 4194304/);
    await alive();
    await nothingKept(createHash("sha256").update(body).digest("hex"));
  }, 60_000);

  it("a compression bomb: 422 once the ratio gives it away, without reading it all", async () => {
    const zeros = Buffer.alloc(1024 * 1024);
    const body = await archive([
      { name: "svc_manifest.json", body: MANIFEST },
      {
        name: "weights.bin",
        size: 1024 * 1024 * 1024,
        fill: (w) => {
          for (let i = 0; i < 1024; i++) w(zeros);
        },
      },
    ]);
    const started = Date.now();
    const r = await upload(body);
    expect(r.status).toBe(422);
    expect(r.body.detail).toMatch(/expands more than 200 times its size \(a compression bomb\?\)/);
    expect(Date.now() - started).toBeLessThan(10_000);
    await alive();
    await nothingKept(createHash("sha256").update(body).digest("hex"));
  }, 60_000);

  it("more entries than a worker unpacks: 413", async () => {
    // Written by hand: tar-stream's packer takes half a minute for 200 000 entries.
    const parts = [tarFile("svc_manifest.json", Buffer.from(MANIFEST))];
    for (let i = 0; i < 200_001; i++) parts.push(tarFile(`f/${i}`, Buffer.alloc(0)));
    parts.push(Buffer.alloc(1024));
    const body = gzipSync(Buffer.concat(parts), { level: 1 });
    const r = await upload(body);
    expect(r.status).toBe(413);
    expect(r.body.detail).toBe("The artifact has more than 200000 entries");
    await alive();
    await nothingKept(createHash("sha256").update(body).digest("hex"));
  }, 120_000);

  it("every entry kind a worker refuses: 422 naming each entry", async () => {
    const body = await archive([
      { name: "svc_manifest.json", body: MANIFEST },
      { name: "../escape.txt", body: "x" },
      { name: "/etc/absolute", body: "x" },
      { name: "link", type: "symlink", linkname: "/etc/passwd" },
      { name: "hard", type: "link", linkname: "svc_manifest.json" },
      { name: "dev", type: "character-device" },
      { name: "pipe", type: "fifo" },
      { name: "fine.txt", body: "ok" },
    ]);
    const r = await upload(body);
    expect(r.status).toBe(422);
    expect(r.body.detail).toMatch(/entries no worker would unpack \(6\)/);
    expect(r.body.errors).toEqual([
      '../escape.txt: path "../escape.txt" has a ".." segment',
      '/etc/absolute: absolute path "/etc/absolute"',
      'link: a symlink (to "/etc/passwd"); only files and directories are allowed',
      'hard: a link (to "svc_manifest.json"); only files and directories are allowed',
      "dev: a character-device; only files and directories are allowed",
      "pipe: a fifo; only files and directories are allowed",
    ]);
    await alive();
    await nothingKept(createHash("sha256").update(body).digest("hex"));
  });

  it("an entry announcing more than the artifact may expand to: 413 at its header; the same path twice: 422", async () => {
    const header = tarFile("weights.bin", Buffer.alloc(0));
    // The size field says 5 GiB; nothing of it follows.
    header.write(`${(5 * 1024 ** 3).toString(8).padStart(11, "0")}\0`, 124, 12, "ascii");
    header.write("        ", 148, 8, "ascii");
    let sum = 0;
    for (const b of header.subarray(0, 512)) sum += b;
    header.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "ascii");
    const huge = gzipSync(Buffer.concat([tarFile("svc_manifest.json", Buffer.from(MANIFEST)), header.subarray(0, 512), Buffer.alloc(1024)]));
    const r = await upload(huge);
    expect(r.status).toBe(413);
    expect(r.body.detail).toBe(`The artifact expands to more than ${4 * 1024 ** 3} bytes`);
    const twice = await archive([
      { name: "svc_manifest.json", body: MANIFEST },
      { name: "a.js", body: "1" },
      { name: "./a.js", body: "2" },
    ]);
    const dup = await upload(twice);
    expect(dup.status).toBe(422);
    expect(dup.body.errors).toEqual(["./a.js: a second entry for a.js; a worker never overwrites a file"]);
    await alive();
    await nothingKept(createHash("sha256").update(twice).digest("hex"));
  });

  it("an upload that stalls is cut off with 408 and leaves nothing", async () => {
    const body = await archive([
      { name: "svc_manifest.json", body: MANIFEST },
      { name: "x.bin", body: "z".repeat(200_000) },
    ]);
    const answer = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = request(
        `${url}/v1/apps/up/builds`,
        { method: "POST", headers: { authorization: `Bearer ${KEY}`, "x-svc-sha256": "0".repeat(64), "content-length": body.length } },
        (res) => {
          let text = "";
          res.on("data", (d) => (text += d));
          res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
        },
      );
      req.on("error", reject);
      // Half of it, then nothing more.
      req.write(body.subarray(0, body.length >> 1));
    });
    expect(answer.status).toBe(408);
    expect(answer.body.detail).toMatch(/The upload sent nothing for 2 s; it was cut off/);
    await alive();
    await nothingKept("0".repeat(64));
  });

  it("still takes a good build after all that", async () => {
    const body = await archive([
      { name: "svc_manifest.json", body: MANIFEST },
      { name: "endpoints/a/handler.mjs", body: "export default 1" },
    ]);
    const r = await upload(body);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ id: createHash("sha256").update(body).digest("hex") });
  });

  it("an upload the client abandons midway leaves no temporary file", async () => {
    const body = await archive([
      { name: "svc_manifest.json", body: MANIFEST },
      { name: "big.bin", body: "y".repeat(2_000_000) },
    ]);
    const before = readdirSync(join(dataDir, "artifacts")).sort();
    await new Promise<void>((resolve) => {
      const req = request(`${url}/v1/apps/up/builds`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "x-svc-sha256": "0".repeat(64), "content-length": body.length },
      });
      req.on("error", () => undefined);
      req.on("close", () => resolve());
      req.write(body.subarray(0, 100_000), () => setTimeout(() => req.destroy(), 100));
    });
    const deadline = Date.now() + 5000;
    while (readdirSync(join(dataDir, "artifacts")).some((n) => n.endsWith(".tmp")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(readdirSync(join(dataDir, "artifacts")).sort()).toEqual(before);
    await alive();
  });

  it("a restart removes temporary files a crash left behind", async () => {
    await stopServer();
    mkdirSync(join(dataDir, "artifacts"), { recursive: true });
    writeFileSync(join(dataDir, "artifacts", "upload-123-456-abc.tmp"), gzipSync("half"));
    await startServer();
    expect(readdirSync(join(dataDir, "artifacts")).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    await alive();
  }, 60_000);
});
