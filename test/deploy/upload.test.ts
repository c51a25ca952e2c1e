// The service's build upload: streamed, checked (size, sha256, gzip tar with a manifest) before it is accepted;
// the client retries failed attempts and reports progress. Real service, real HTTP, real files.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import tarStream from "tar-stream";
import { DeployClient } from "../../src/deploy/client.js";
import { ApiError } from "../../src/errors.js";
import { startService, type Service } from "../../src/service/index.js";

const KEY = "upload-test-key";
let dir: string;
let service: Service;

async function tarGz(files: Record<string, string>): Promise<Buffer> {
  const pack = tarStream.pack();
  for (const [name, text] of Object.entries(files)) pack.entry({ name }, text);
  pack.finalize();
  const parts: Buffer[] = [];
  for await (const chunk of pack) parts.push(chunk as Buffer);
  return gzipSync(Buffer.concat(parts));
}

const manifest = JSON.stringify({ version: 1, app: "up", fingerprint: "fp", svcVersion: "0.1.0", resources: {}, routes: {}, excluded: [] });
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

function file(name: string, data: Buffer) {
  const path = join(dir, name);
  writeFileSync(path, data);
  return { path, size: data.length, sha256: sha(data) };
}

async function expectProblem(promise: Promise<unknown>, status: number, detail: string) {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).status).toBe(status);
  expect((err as ApiError).problem.detail).toContain(detail);
}

const leftovers = () => readdirSync(join(dir, "data", "artifacts")).filter((n) => n.endsWith(".tmp"));

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-upload-test-"));
  service = await startService({ dataDir: join(dir, "data"), apiKeys: [KEY], maxArtifactBytes: 4096 });
});

afterAll(async () => {
  await service.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("build upload", () => {
  it("accepts a gzip tar with a manifest, by checksum, once", async () => {
    const client = new DeployClient({ url: service.url, apiKey: KEY });
    const artifact = file("ok.tar.gz", await tarGz({ "svc_manifest.json": manifest, "endpoints/a/handler.mjs": "export {}" }));
    const seen: number[] = [];
    const build = await client.upload("up", artifact, { onProgress: (sent) => seen.push(sent) });
    expect(build).toMatchObject({ id: artifact.sha256, app: "up", size: artifact.size, fingerprint: "fp" });
    expect(seen.at(-1)).toBe(artifact.size);
    expect(await client.hasBuild("up", artifact.sha256)).toBe(true);
    expect(await client.hasBuild("up", "0".repeat(64))).toBe(false);
    expect(readdirSync(join(dir, "data", "artifacts"))).toContain(`${artifact.sha256}.tar.gz`);
    // The same bytes again: the existing build, nothing stored twice.
    expect((await client.upload("up", artifact)).id).toBe(artifact.sha256);
  });

  it("refuses a checksum that does not match the body (422) and keeps nothing", async () => {
    const client = new DeployClient({ url: service.url, apiKey: KEY });
    const artifact = file("sum.tar.gz", await tarGz({ "svc_manifest.json": manifest, x: "1" }));
    await expectProblem(client.upload("up", { ...artifact, sha256: "a".repeat(64) }), 422, "checksum does not match");
    expect(await client.hasBuild("up", "a".repeat(64))).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  it("refuses what is not a gzip tar, or has no manifest (422)", async () => {
    const client = new DeployClient({ url: service.url, apiKey: KEY });
    await expectProblem(client.upload("up", file("plain.bin", Buffer.from("just text"))), 422, "not a gzip tar");
    await expectProblem(client.upload("up", file("nomani.tar.gz", await tarGz({ "other.txt": "x" }))), 422, "has no svc_manifest.json");
    expect(leftovers()).toEqual([]);
  });

  it("refuses an artifact over the limit (413), declared or streamed without a length", async () => {
    const client = new DeployClient({ url: service.url, apiKey: KEY });
    const big = Buffer.alloc(10_000, 7);
    await expectProblem(client.upload("up", file("big.bin", big)), 413, "limit is 4096 bytes");
    // Chunked: the service counts as it reads and stops at the limit.
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${service.url}/v1/apps/up/builds`,
        { method: "POST", headers: { authorization: `Bearer ${KEY}`, "x-svc-sha256": sha(big) } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      for (let i = 0; i < 10; i++) req.write(big.subarray(i * 1000, (i + 1) * 1000));
      req.end();
    });
    expect(status).toBe(413);
    expect(leftovers()).toEqual([]);
  });

  it("needs an admin key", async () => {
    const client = new DeployClient({ url: service.url, apiKey: "wrong" });
    await expectProblem(client.upload("up", file("k.tar.gz", await tarGz({ "svc_manifest.json": manifest }))), 401, "not valid");
  });

  it("retries an upload that failed in transit, and succeeds", async () => {
    // A proxy that cuts the first upload off mid-body, then forwards.
    let attempts = 0;
    const proxy: Server = createServer((req, res) => {
      if (req.url?.endsWith("/builds") && ++attempts === 1) {
        req.once("data", () => req.socket.destroy());
        return;
      }
      const upstream = request(`${service.url}${req.url}`, { method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      req.pipe(upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
    try {
      const client = new DeployClient({ url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, apiKey: KEY });
      const artifact = file("retry.tar.gz", await tarGz({ "svc_manifest.json": manifest, y: "retry" }));
      const build = await client.upload("up", artifact, { retryDelayMs: 10 });
      expect(build.id).toBe(artifact.sha256);
      expect(attempts).toBe(2);
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });
});
