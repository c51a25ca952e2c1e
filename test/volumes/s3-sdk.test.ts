// The S3 API on network volumes with the AWS SDK for JavaScript, unchanged (@aws-sdk/client-s3, lib-storage for
// multipart), against a real service: objects go in, are listed, read (whole and by range), copied, deleted;
// a file over 100 MB goes up in parts; keys are the user's own, read-only keys only read, revoked keys are
// refused; writes past a volume's size fail; signatures made with a wrong secret, for another time or over
// another body are refused; keys never leave the volume.

import { createHash, randomBytes } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { call, startTestService, type TestService } from "../service/helpers.js";
import { s3Request, s3Signer, sendRaw } from "./s3-signing.js";

/** One "GB" of volume size is 1 MiB here, so a 10 GB volume fills with 10 MiB. */
const GB = 1024 * 1024;
let t: TestService;
let scratch: string;
let bigVolume: string;
let smallVolume: string;
let otherVolume: string;
let otherKey: string;
let keyA: { accessKeyId: string; secretAccessKey: string; endpoint: string; region: string };

const client = (k: { accessKeyId: string; secretAccessKey: string }, extra: Record<string, unknown> = {}) =>
  new S3Client({
    endpoint: keyA.endpoint,
    region: keyA.region,
    forcePathStyle: true,
    credentials: { accessKeyId: k.accessKeyId, secretAccessKey: k.secretAccessKey },
    maxAttempts: 1,
    ...extra,
  });

async function s3Error(p: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof S3ServiceException) return { name: err.name, status: err.$metadata.httpStatusCode };
    throw err;
  }
  throw new Error("expected the request to fail");
}

async function text(body: unknown): Promise<string> {
  return (body as { transformToString(): Promise<string> }).transformToString();
}

async function createVolume(key: string, name: string, size: number): Promise<string> {
  const r = await call(`${t.service.url}/v2/network-volumes`, { key, body: { name, size, dataCenter: "local" } });
  expect(r.status).toBe(201);
  return r.body.id;
}

async function volumeKey(key: string, body: Record<string, unknown> = {}) {
  const r = await call(`${t.service.url}/v1/volume-keys`, { key, body });
  expect(r.status).toBe(201);
  return r.body;
}

beforeAll(async () => {
  t = await startTestService({ volumeGbBytes: GB });
  scratch = mkdtempSync(join(tmpdir(), "svc-s3-sdk-"));
  bigVolume = await createVolume(t.key, "weights", 1000);
  smallVolume = await createVolume(t.key, "tiny", 10);
  otherKey = (await t.service.mintKey({ scopes: ["admin"], userId: "someone-else" })).key;
  otherVolume = await createVolume(otherKey, "theirs", 10);
  keyA = await volumeKey(t.key, { name: "laptop" });
});
afterAll(async () => {
  await t?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("objects with @aws-sdk/client-s3", () => {
  it("creates a key that prints what S3 clients need, and lists the user's volumes as buckets", async () => {
    expect(keyA).toMatchObject({
      accessKeyId: expect.stringMatching(/^[A-Z0-9]{20}$/),
      secretAccessKey: expect.any(String),
      endpoint: t.service.s3!.url,
      region: "us-east-1",
      readOnly: false,
    });
    const buckets = await client(keyA).send(new ListBucketsCommand({}));
    expect(buckets.Buckets!.map((b) => b.Name).sort()).toEqual([bigVolume, smallVolume].sort());
    const listed = await call(`${t.service.url}/v1/volume-keys`, { key: t.key });
    expect(listed.body).toEqual([expect.objectContaining({ accessKeyId: keyA.accessKeyId, name: "laptop" })]);
    expect(listed.text).not.toContain(keyA.secretAccessKey);
  });

  it("puts, lists, heads, gets (whole and by range), copies and deletes objects: files of the volume's directory", async () => {
    const s3 = client(keyA);
    await s3.send(new PutObjectCommand({ Bucket: bigVolume, Key: "models/tiny/config.json", Body: '{"layers":2}' }));
    await s3.send(new PutObjectCommand({ Bucket: bigVolume, Key: "models/tiny/weights.bin", Body: Buffer.from("0123456789abcdef") }));
    await s3.send(new PutObjectCommand({ Bucket: bigVolume, Key: "readme with spaces+plus.txt", Body: "hello" }));
    const dir = join(t.dir, "data", "volumes", bigVolume);
    expect(readFileSync(join(dir, "models", "tiny", "weights.bin"), "utf8")).toBe("0123456789abcdef");

    const all = await s3.send(new ListObjectsV2Command({ Bucket: bigVolume }));
    expect(all.Contents!.map((o) => [o.Key, o.Size])).toEqual([
      ["models/tiny/config.json", 12],
      ["models/tiny/weights.bin", 16],
      ["readme with spaces+plus.txt", 5],
    ]);
    const top = await s3.send(new ListObjectsV2Command({ Bucket: bigVolume, Delimiter: "/" }));
    expect(top.CommonPrefixes!.map((p) => p.Prefix)).toEqual(["models/"]);
    expect(top.Contents!.map((o) => o.Key)).toEqual(["readme with spaces+plus.txt"]);
    const paged = await s3.send(new ListObjectsV2Command({ Bucket: bigVolume, MaxKeys: 2 }));
    expect(paged).toMatchObject({ IsTruncated: true, KeyCount: 2 });
    const rest = await s3.send(new ListObjectsV2Command({ Bucket: bigVolume, ContinuationToken: paged.NextContinuationToken }));
    expect(rest.Contents!.map((o) => o.Key)).toEqual(["readme with spaces+plus.txt"]);
    expect((await s3.send(new ListObjectsV2Command({ Bucket: bigVolume, Prefix: "models/tiny/w" }))).Contents!.map((o) => o.Key)).toEqual([
      "models/tiny/weights.bin",
    ]);

    const head = await s3.send(new HeadObjectCommand({ Bucket: bigVolume, Key: "models/tiny/weights.bin" }));
    expect(head.ContentLength).toBe(16);
    const ranged = await s3.send(new GetObjectCommand({ Bucket: bigVolume, Key: "models/tiny/weights.bin", Range: "bytes=4-7" }));
    expect(ranged.ContentRange).toBe("bytes 4-7/16");
    expect(await text(ranged.Body)).toBe("4567");
    expect(await text((await s3.send(new GetObjectCommand({ Bucket: bigVolume, Key: "models/tiny/weights.bin", Range: "bytes=-3" }))).Body)).toBe("def");
    expect(await s3Error(s3.send(new GetObjectCommand({ Bucket: bigVolume, Key: "models/tiny/weights.bin", Range: "bytes=99-" })))).toEqual({
      name: "InvalidRange",
      status: 416,
    });
    expect(await text((await s3.send(new GetObjectCommand({ Bucket: bigVolume, Key: "readme with spaces+plus.txt" }))).Body)).toBe("hello");

    await s3.send(new CopyObjectCommand({ Bucket: bigVolume, Key: "backup/config.json", CopySource: `${bigVolume}/models/tiny/config.json` }));
    expect(readFileSync(join(dir, "backup", "config.json"), "utf8")).toBe('{"layers":2}');

    await s3.send(new DeleteObjectCommand({ Bucket: bigVolume, Key: "backup/config.json" }));
    expect(existsSync(join(dir, "backup", "config.json"))).toBe(false);
    const deleted = await s3.send(
      new DeleteObjectsCommand({ Bucket: bigVolume, Delete: { Objects: [{ Key: "readme with spaces+plus.txt" }, { Key: "models/tiny/config.json" }] } }),
    );
    expect(deleted.Deleted!.map((d) => d.Key).sort()).toEqual(["models/tiny/config.json", "readme with spaces+plus.txt"]);
    expect((await s3.send(new ListObjectsV2Command({ Bucket: bigVolume }))).Contents!.map((o) => o.Key)).toEqual(["models/tiny/weights.bin"]);
    expect(await s3Error(s3.send(new GetObjectCommand({ Bucket: bigVolume, Key: "readme with spaces+plus.txt" })))).toEqual({ name: "NoSuchKey", status: 404 });
  });

  it("uploads a file over 100 MB in parts (lib-storage) and reads it back intact", async () => {
    const file = join(scratch, "weights.safetensors");
    const size = 105 * 1024 * 1024 + 123;
    const block = randomBytes(1024 * 1024);
    const whole = Buffer.alloc(size);
    for (let at = 0; at < size; at += block.length) block.copy(whole, at, 0, Math.min(block.length, size - at));
    whole.writeUInt32BE(0xdeadbeef, size - 4);
    writeFileSync(file, whole);
    const digest = createHash("sha256").update(whole).digest("hex");
    try {
      const upload = new Upload({
        client: client(keyA),
        params: { Bucket: bigVolume, Key: "models/big/weights.safetensors", Body: createReadStream(file) },
        partSize: 16 * 1024 * 1024,
        queueSize: 3,
      });
      let parts = 0;
      upload.on("httpUploadProgress", (p) => (parts = Math.max(parts, p.part ?? 0)));
      await upload.done();
      expect(parts).toBeGreaterThan(1);
      const got = await client(keyA).send(new GetObjectCommand({ Bucket: bigVolume, Key: "models/big/weights.safetensors" }));
      expect(got.ContentLength).toBe(size);
      const hash = createHash("sha256");
      for await (const chunk of got.Body as Readable) hash.update(chunk as Buffer);
      expect(hash.digest("hex")).toBe(digest);
      // Nothing of the upload is left beside the object.
      const listed = await client(keyA).send(new ListObjectsV2Command({ Bucket: bigVolume, Prefix: "models/big/" }));
      expect(listed.Contents!.map((o) => o.Key)).toEqual(["models/big/weights.safetensors"]);
      expect(existsSync(join(t.dir, "data", "volumes", bigVolume, ".svc-multipart"))).toBe(true);
      await client(keyA).send(new DeleteObjectCommand({ Bucket: bigVolume, Key: "models/big/weights.safetensors" }));
    } finally {
      rmSync(file, { force: true });
    }
  }, 120_000);
});

describe("who may do what", () => {
  it("refuses another user's volume (403 AccessDenied) and another user's key on mine", async () => {
    const s3 = client(keyA);
    expect(await s3Error(s3.send(new ListObjectsV2Command({ Bucket: otherVolume })))).toEqual({ name: "AccessDenied", status: 403 });
    expect(await s3Error(s3.send(new PutObjectCommand({ Bucket: otherVolume, Key: "x.txt", Body: "x" })))).toEqual({ name: "AccessDenied", status: 403 });
    const theirs = client(await volumeKey(otherKey));
    expect(await s3Error(theirs.send(new GetObjectCommand({ Bucket: bigVolume, Key: "models/tiny/weights.bin" })))).toEqual({
      name: "AccessDenied",
      status: 403,
    });
    expect((await theirs.send(new ListBucketsCommand({}))).Buckets!.map((b) => b.Name)).toEqual([otherVolume]);
    expect(await s3Error(s3.send(new ListObjectsV2Command({ Bucket: "vol000000000000" })))).toEqual({ name: "NoSuchBucket", status: 404 });
    // Their key is not mine to see or revoke.
    const listed = await call(`${t.service.url}/v1/volume-keys`, { key: otherKey });
    expect((await call(`${t.service.url}/v1/volume-keys/${listed.body[0].id}`, { key: t.key, method: "DELETE" })).status).toBe(404);
  });

  it("a read-only key reads but never writes; a key for some volumes reaches only those", async () => {
    const readOnly = client(await volumeKey(t.key, { readOnly: true }));
    expect(await text((await readOnly.send(new GetObjectCommand({ Bucket: bigVolume, Key: "models/tiny/weights.bin" }))).Body)).toBe("0123456789abcdef");
    expect(await s3Error(readOnly.send(new PutObjectCommand({ Bucket: bigVolume, Key: "nope.txt", Body: "x" })))).toEqual({
      name: "AccessDenied",
      status: 403,
    });
    expect(await s3Error(readOnly.send(new DeleteObjectCommand({ Bucket: bigVolume, Key: "models/tiny/weights.bin" })))).toEqual({
      name: "AccessDenied",
      status: 403,
    });
    expect(existsSync(join(t.dir, "data", "volumes", bigVolume, "nope.txt"))).toBe(false);

    const scoped = client(await volumeKey(t.key, { volumeIds: [smallVolume] }));
    await scoped.send(new PutObjectCommand({ Bucket: smallVolume, Key: "ok.txt", Body: "ok" }));
    expect(await s3Error(scoped.send(new GetObjectCommand({ Bucket: bigVolume, Key: "models/tiny/weights.bin" })))).toEqual({
      name: "AccessDenied",
      status: 403,
    });
    await scoped.send(new DeleteObjectCommand({ Bucket: smallVolume, Key: "ok.txt" }));
    const refused = await call(`${t.service.url}/v1/volume-keys`, { key: t.key, body: { volumeIds: [otherVolume] } });
    expect(refused.status).toBe(422);
  });

  it("a revoked key is refused from the next request on", async () => {
    const k = await volumeKey(t.key);
    const s3 = client(k);
    await s3.send(new ListObjectsV2Command({ Bucket: bigVolume }));
    const revoked = await call(`${t.service.url}/v1/volume-keys/${k.accessKeyId}`, { key: t.key, method: "DELETE" });
    expect(revoked.body).toMatchObject({ accessKeyId: k.accessKeyId, revokedAt: expect.any(Number) });
    expect(await s3Error(s3.send(new ListObjectsV2Command({ Bucket: bigVolume })))).toEqual({ name: "InvalidAccessKeyId", status: 403 });
  });
});

describe("sizes", () => {
  it("refuses a write past the volume's size (EntityTooLarge), reports the bytes used, and a grown size takes effect", async () => {
    const s3 = client(keyA);
    const six = Buffer.alloc(6 * GB, 1);
    await s3.send(new PutObjectCommand({ Bucket: smallVolume, Key: "a.bin", Body: six }));
    // Replacing an object counts only the difference.
    await s3.send(new PutObjectCommand({ Bucket: smallVolume, Key: "a.bin", Body: six }));
    expect(await s3Error(s3.send(new PutObjectCommand({ Bucket: smallVolume, Key: "b.bin", Body: six })))).toEqual({ name: "EntityTooLarge", status: 400 });
    expect(existsSync(join(t.dir, "data", "volumes", smallVolume, "b.bin"))).toBe(false);
    expect(await s3Error(s3.send(new CopyObjectCommand({ Bucket: smallVolume, Key: "c.bin", CopySource: `${smallVolume}/a.bin` })))).toEqual({
      name: "EntityTooLarge",
      status: 400,
    });

    const shown = await call(`${t.service.url}/v2/network-volumes/${smallVolume}`, { key: t.key });
    expect(shown.body).toMatchObject({ id: smallVolume, size: 10, usedBytes: 6 * GB });

    // Grown, a write past the old size goes in.
    const grown = await call(`${t.service.url}/v2/network-volumes/${smallVolume}`, { key: t.key, method: "PATCH", body: { size: 20 } });
    expect(grown.status).toBe(200);
    await s3.send(new PutObjectCommand({ Bucket: smallVolume, Key: "b.bin", Body: six }));
    expect((await call(`${t.service.url}/v2/network-volumes/${smallVolume}`, { key: t.key })).body.usedBytes).toBe(12 * GB);
    await s3.send(new DeleteObjectsCommand({ Bucket: smallVolume, Delete: { Objects: [{ Key: "a.bin" }, { Key: "b.bin" }] } }));
  });

  it("shrinks while the files fit: a write past the new size is then EntityTooLarge; below the bytes used is 422 and changes nothing", async () => {
    const s3 = client(keyA);
    const id = await createVolume(t.key, "shrinking", 20);
    const url = `${t.service.url}/v2/network-volumes/${id}`;
    const dir = join(t.dir, "data", "volumes", id);
    await s3.send(new PutObjectCommand({ Bucket: id, Key: "six.bin", Body: Buffer.alloc(6 * GB, 1) }));

    const shrunk = await call(url, { key: t.key, method: "PATCH", body: { size: 15 } });
    expect(shrunk.status).toBe(200);
    expect(shrunk.body).toMatchObject({ id, size: 15 });
    // 6 + 10 fit in the old 20 GB, not in 15.
    expect(await s3Error(s3.send(new PutObjectCommand({ Bucket: id, Key: "ten.bin", Body: Buffer.alloc(10 * GB, 1) })))).toEqual({
      name: "EntityTooLarge",
      status: 400,
    });
    expect(existsSync(join(dir, "ten.bin"))).toBe(false);
    await s3.send(new PutObjectCommand({ Bucket: id, Key: "eight.bin", Body: Buffer.alloc(8 * GB, 1) }));

    const refused = await call(url, { key: t.key, method: "PATCH", body: { size: 10, name: "smaller" } });
    expect(refused.status).toBe(422);
    expect(refused.headers.get("content-type")).toContain("application/problem+json");
    expect(refused.body.errors).toEqual([
      `$.size: the volume holds ${14 * GB} bytes, more than 10 GB (${10 * GB} bytes); delete files first or give 14 GB or more`,
    ]);
    // Nothing changed: neither the size (the last GB still goes in) nor the name.
    expect((await call(url, { key: t.key })).body).toMatchObject({ size: 15, name: "shrinking", usedBytes: 14 * GB });
    await s3.send(new PutObjectCommand({ Bucket: id, Key: "one.bin", Body: Buffer.alloc(GB, 1) }));
    expect(readFileSync(join(dir, "six.bin")).length).toBe(6 * GB);

    await s3.send(new DeleteObjectsCommand({ Bucket: id, Delete: { Objects: [{ Key: "six.bin" }, { Key: "eight.bin" }, { Key: "one.bin" }] } }));
    expect((await call(url, { key: t.key, method: "DELETE" })).status).toBe(204);
  });

  it("counts what workers wrote into the directory too", async () => {
    writeFileSync(join(t.dir, "data", "volumes", smallVolume, "from-a-worker.bin"), Buffer.alloc(19 * GB));
    // Measured again after a few seconds at most.
    await new Promise((r) => setTimeout(r, 3100));
    expect(await s3Error(client(keyA).send(new PutObjectCommand({ Bucket: smallVolume, Key: "more.bin", Body: Buffer.alloc(2 * GB) })))).toEqual({
      name: "EntityTooLarge",
      status: 400,
    });
    rmSync(join(t.dir, "data", "volumes", smallVolume, "from-a-worker.bin"));
  });
});

/** A request signed by hand (SignatureV4, as the SDK signs), sent with node:http so nothing rewrites it. */
async function signedRequest(opts: {
  method: string;
  path: string;
  body?: Buffer;
  secret?: string;
  date?: Date;
  payloadHash?: string;
  headers?: Record<string, string>;
}) {
  const signer = s3Signer({ accessKeyId: keyA.accessKeyId, secretAccessKey: opts.secret ?? keyA.secretAccessKey });
  const body = opts.body ?? Buffer.alloc(0);
  const payloadHash = opts.payloadHash ?? createHash("sha256").update(body).digest("hex");
  const signed = await signer.sign(s3Request(t.service.url, opts.method, opts.path, { "x-amz-content-sha256": payloadHash, ...opts.headers }), {
    signingDate: opts.date ?? new Date(),
  });
  return send({
    method: opts.method,
    path: opts.path,
    headers: { ...(signed.headers as Record<string, string>), "content-length": String(body.length) },
    body,
  });
}

const send = (opts: { method: string; path: string; headers: Record<string, string>; body?: Buffer }) => sendRaw(t.service.url, opts);

describe("signatures", () => {
  it("accepts a correct signature and refuses a wrong secret, a stale date and a tampered body", async () => {
    const path = `/s3/${bigVolume}/signed.txt`;
    expect((await signedRequest({ method: "PUT", path, body: Buffer.from("signed") })).status).toBe(200);
    const wrong = await signedRequest({ method: "PUT", path, body: Buffer.from("forged"), secret: "not-the-secret-0000000000000000000000000" });
    expect(wrong).toMatchObject({ status: 403, text: expect.stringContaining("<Code>SignatureDoesNotMatch</Code>") });
    const stale = await signedRequest({ method: "GET", path, date: new Date(Date.now() - 60 * 60 * 1000) });
    expect(stale).toMatchObject({ status: 403, text: expect.stringContaining("<Code>RequestTimeTooSkewed</Code>") });
    // Signed for one body, sent with another: the payload hash the signature covers does not match.
    const tampered = await signedRequest({
      method: "PUT",
      path,
      body: Buffer.from("tampered"),
      payloadHash: createHash("sha256").update("original").digest("hex"),
    });
    expect(tampered).toMatchObject({ status: 400, text: expect.stringContaining("<Code>XAmzContentSHA256Mismatch</Code>") });
    expect(readFileSync(join(t.dir, "data", "volumes", bigVolume, "signed.txt"), "utf8")).toBe("signed");
    const anonymous = await send({ method: "GET", path, headers: {} });
    expect(anonymous).toMatchObject({ status: 403, text: expect.stringContaining("<Code>AccessDenied</Code>") });
  });

  it("serves presigned URLs until they expire", async () => {
    const signer = s3Signer(keyA);
    const presign = async (date: Date, expiresIn: number) => {
      const p = await signer.presign(
        // As @aws-sdk/s3-request-presigner does: the payload is UNSIGNED-PAYLOAD, said in the (signed) query.
        s3Request(t.service.url, "GET", `/s3/${bigVolume}/signed.txt`, { "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD" }),
        { signingDate: date, expiresIn },
      );
      const query = Object.entries(p.query!)
        .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
        .join("&");
      return fetch(`${t.service.url}${p.path}?${query}`);
    };
    const fresh = await presign(new Date(), 300);
    expect(fresh.status).toBe(200);
    expect(await fresh.text()).toBe("signed");
    const expired = await presign(new Date(Date.now() - 10 * 60 * 1000), 60);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toContain("Request has expired");
  });
});

describe("headers a signature does not cover", () => {
  it("refuses an x-amz-copy-source added to a presigned upload: the upload does not become a copy", async () => {
    const secret = `/s3/${bigVolume}/secret.txt`;
    expect((await signedRequest({ method: "PUT", path: secret, body: Buffer.from("the issuer's secret") })).status).toBe(200);
    // An upload link for drop.txt, as @aws-sdk/s3-request-presigner makes one (only host signed).
    const p = await s3Signer(keyA).presign(s3Request(t.service.url, "PUT", `/s3/${bigVolume}/drop.txt`, { "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD" }), {
      expiresIn: 300,
    });
    const query = Object.entries(p.query!)
      .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
      .join("&");
    const host = new URL(t.service.url).host;
    const hijacked = await send({
      method: "PUT",
      path: `${p.path}?${query}`,
      headers: { host, "x-amz-copy-source": `/${bigVolume}/secret.txt`, "content-length": "0" },
    });
    expect(hijacked.status).toBe(403);
    expect(hijacked.text).toContain("<Code>AccessDenied</Code>");
    expect(hijacked.text).toContain("<HeadersNotSigned>x-amz-copy-source</HeadersNotSigned>");
    expect(existsSync(join(t.dir, "data", "volumes", bigVolume, "drop.txt"))).toBe(false);
    // The link as issued still uploads.
    const upload = await send({ method: "PUT", path: `${p.path}?${query}`, headers: { host, "content-length": "4" }, body: Buffer.from("mine") });
    expect(upload.status).toBe(200);
    expect(readFileSync(join(t.dir, "data", "volumes", bigVolume, "drop.txt"), "utf8")).toBe("mine");
  });

  it("refuses an x-amz-* header added to a header-signed request", async () => {
    const signer = s3Signer(keyA);
    const path = `/s3/${bigVolume}/replayed.txt`;
    const signed = await signer.sign(s3Request(t.service.url, "PUT", path, { "x-amz-content-sha256": createHash("sha256").update("").digest("hex") }), {
      signingDate: new Date(),
    });
    const added = await send({
      method: "PUT",
      path,
      headers: { ...(signed.headers as Record<string, string>), "x-amz-copy-source": `/${bigVolume}/secret.txt`, "content-length": "0" },
    });
    expect(added).toMatchObject({ status: 403, text: expect.stringContaining("<HeadersNotSigned>x-amz-copy-source</HeadersNotSigned>") });
    expect(existsSync(join(t.dir, "data", "volumes", bigVolume, "replayed.txt"))).toBe(false);
  });
});

describe("confinement", () => {
  it("answers 400, not 500, when a worker put a link where multipart uploads are kept", async () => {
    const dir = join(t.dir, "data", "volumes", otherVolume);
    const outside = join(scratch, "multipart-target");
    mkdirSync(outside, { recursive: true });
    symlinkSync(outside, join(dir, ".svc-multipart"));
    try {
      const theirs = await volumeKey(otherKey, { name: "theirs-key" });
      const s3 = client(theirs);
      const failed = await s3Error(
        new Upload({ client: s3, params: { Bucket: otherVolume, Key: "big.bin", Body: Buffer.alloc(6 * 1024 * 1024) }, partSize: 5 * 1024 * 1024 }).done(),
      );
      expect(failed).toEqual({ name: "InvalidRequest", status: 400 });
      expect(readdirSync(outside)).toEqual([]);
    } finally {
      rmSync(join(dir, ".svc-multipart"));
    }
  });

  it("refuses keys with '..' and never follows a link out of the volume", async () => {
    const bearer = { authorization: `Bearer ${t.key}` };
    const dotdot = await send({
      method: "PUT",
      path: `/s3/${bigVolume}/a/%2E%2E/%2E%2E/escaped.txt`,
      headers: { ...bearer, "content-length": "1" },
      body: Buffer.from("x"),
    });
    expect(dotdot).toMatchObject({ status: 400, text: expect.stringContaining("<Code>InvalidArgument</Code>") });

    const outside = join(scratch, "outside");
    mkdirSync(outside);
    writeFileSync(join(outside, "secret.txt"), "host file");
    const dir = join(t.dir, "data", "volumes", bigVolume);
    symlinkSync(outside, join(dir, "escape"));
    symlinkSync(join(outside, "secret.txt"), join(dir, "secret-link.txt"));
    const s3 = client(keyA);
    expect(await s3Error(s3.send(new GetObjectCommand({ Bucket: bigVolume, Key: "escape/secret.txt" })))).toEqual({ name: "AccessDenied", status: 403 });
    expect(await s3Error(s3.send(new GetObjectCommand({ Bucket: bigVolume, Key: "secret-link.txt" })))).toEqual({ name: "AccessDenied", status: 403 });
    expect(await s3Error(s3.send(new PutObjectCommand({ Bucket: bigVolume, Key: "escape/planted.txt", Body: "x" })))).toEqual({
      name: "AccessDenied",
      status: 403,
    });
    expect(existsSync(join(outside, "planted.txt"))).toBe(false);
    // Listings do not follow links either.
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: bigVolume }));
    expect(listed.Contents!.map((o) => o.Key)).not.toContain("escape/secret.txt");
    rmSync(join(dir, "escape"));
    rmSync(join(dir, "secret-link.txt"));
  });
});
