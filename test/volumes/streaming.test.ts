// Streaming uploads of the S3 API (aws-chunked bodies) against a real service. The chunk signatures are built
// here by hand from AWS's description of STREAMING-AWS4-HMAC-SHA256-PAYLOAD ("Signature calculations for the
// Authorization header: transferring payload in multiple chunks"), not with the service's own signer, so the
// service is checked against the protocol rather than against itself. The request's seed signature comes from
// @smithy/signature-v4, as the SDK makes it. And the official client's own streaming form, which
// @aws-sdk/client-s3 sends for a stream body (STREAMING-UNSIGNED-PAYLOAD-TRAILER: an unsigned payload with a
// CRC32 trailer), is sent by it, with a tampered trailer refused.

import { createHash, createHmac, randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { call, startTestService, type TestService } from "../service/helpers.js";
import { s3Request, s3Signer, sendRaw } from "./s3-signing.js";

const REGION = "us-east-1";
const STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
const sha256hex = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");
const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data).digest();

let t: TestService;
let volume: string;
let key: { accessKeyId: string; secretAccessKey: string; endpoint: string; region: string };
const volumeDir = () => join(t.dir, "data", "volumes", volume);

beforeAll(async () => {
  t = await startTestService();
  const made = await call(`${t.service.url}/v2/network-volumes`, { key: t.key, body: { name: "streams", size: 10, dataCenter: "local" } });
  expect(made.status).toBe(201);
  volume = made.body.id;
  const k = await call(`${t.service.url}/v1/volume-keys`, { key: t.key, body: {} });
  expect(k.status).toBe(201);
  key = k.body;
});
afterAll(async () => {
  await t?.close();
});

interface ChunkedUpload {
  headers: Record<string, string>;
  /** Each chunk's data and the signature its header carries (the last one: the empty chunk). */
  chunks: Array<{ data: Buffer; signature: string }>;
}

/**
 * A PutObject whose body is sent as signed chunks: the seed signature signs the headers with
 * x-amz-content-sha256 STREAMING-AWS4-HMAC-SHA256-PAYLOAD, and chunk n's signature is
 * HMAC(signing key, "AWS4-HMAC-SHA256-PAYLOAD\n<date>\n<scope>\n<signature n-1>\n<sha256 of "">\n<sha256 of chunk n>"),
 * with the seed as signature 0, ending with an empty chunk.
 */
async function chunkedUpload(path: string, parts: Buffer[], date = new Date()): Promise<ChunkedUpload> {
  const chunkData = [...parts, Buffer.alloc(0)];
  const framed = (size: number) => size.toString(16).length + ";chunk-signature=".length + 64 + 2 + size + 2;
  const encodedLength = chunkData.reduce((n, c) => n + framed(c.length), 0);
  const decodedLength = parts.reduce((n, c) => n + c.length, 0);
  const signed = await s3Signer(key, REGION).sign(
    s3Request(t.service.url, "PUT", path, {
      "x-amz-content-sha256": STREAMING,
      "content-encoding": "aws-chunked",
      "x-amz-decoded-content-length": String(decodedLength),
      "content-length": String(encodedLength),
    }),
    { signingDate: date },
  );
  const headers = signed.headers as Record<string, string>;
  const seed = /Signature=([0-9a-f]{64})/.exec(headers.authorization!)![1]!;
  const amzDate = headers["x-amz-date"]!;
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${REGION}/s3/aws4_request`;
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${key.secretAccessKey}`, day), REGION), "s3"), "aws4_request");
  let previous = seed;
  const chunks = chunkData.map((data) => {
    const toSign = ["AWS4-HMAC-SHA256-PAYLOAD", amzDate, scope, previous, sha256hex(""), sha256hex(data)].join("\n");
    previous = createHmac("sha256", signingKey).update(toSign).digest("hex");
    return { data, signature: previous };
  });
  return { headers, chunks };
}

function body(upload: ChunkedUpload): Buffer {
  return Buffer.concat(
    upload.chunks.flatMap((c) => [Buffer.from(`${c.data.length.toString(16)};chunk-signature=${c.signature}\r\n`), c.data, Buffer.from("\r\n")]),
  );
}

const send = (path: string, headers: Record<string, string>, payload: Buffer) => sendRaw(t.service.url, { method: "PUT", path, headers, body: payload });

/** The volume's entries, the service's hidden upload files included (a refused upload must leave none). */
const entries = () => readdirSync(volumeDir()).sort();

describe("STREAMING-AWS4-HMAC-SHA256-PAYLOAD", () => {
  const parts = [randomBytes(64 * 1024), randomBytes(64 * 1024), randomBytes(1000)];
  const whole = Buffer.concat(parts);

  it("stores a chunk-signed PutObject byte for byte", async () => {
    const path = `/s3/${volume}/weights.bin`;
    const upload = await chunkedUpload(path, parts);
    const r = await send(path, upload.headers, body(upload));
    expect(r, r.text).toMatchObject({ status: 200 });
    expect(readFileSync(join(volumeDir(), "weights.bin")).equals(whole)).toBe(true);
    expect(entries()).toEqual(["weights.bin"]);
  });

  it("refuses a tampered chunk signature with SignatureDoesNotMatch, and keeps the object as it was", async () => {
    const path = `/s3/${volume}/weights.bin`;
    const upload = await chunkedUpload(path, [randomBytes(64 * 1024), randomBytes(64 * 1024), randomBytes(1000)]);
    // The second chunk's signature, one hex digit changed.
    const sig = upload.chunks[1]!.signature;
    upload.chunks[1]!.signature = (sig[0] === "0" ? "1" : "0") + sig.slice(1);
    const r = await send(path, upload.headers, body(upload));
    expect(r.status).toBe(403);
    expect(r.text).toContain("<Code>SignatureDoesNotMatch</Code>");
    expect(readFileSync(join(volumeDir(), "weights.bin")).equals(whole)).toBe(true);
    expect(entries()).toEqual(["weights.bin"]);
  });

  it("refuses a tampered chunk body (signatures kept) and a new key stays absent", async () => {
    const path = `/s3/${volume}/other.bin`;
    const upload = await chunkedUpload(path, [randomBytes(64 * 1024), randomBytes(64 * 1024), randomBytes(1000)]);
    upload.chunks[2]!.data[500] = upload.chunks[2]!.data[500]! ^ 0xff;
    const r = await send(path, upload.headers, body(upload));
    expect(r.status).toBe(403);
    expect(r.text).toContain("<Code>SignatureDoesNotMatch</Code>");
    expect(entries()).not.toContain("other.bin");
    expect(entries().filter((e) => e.startsWith(".svc-"))).toEqual([]);
  });

  it("refuses chunks signed with another secret", async () => {
    const path = `/s3/${volume}/forged.bin`;
    const real = key.secretAccessKey;
    // The seed and the chunks from the wrong secret: the seed already fails.
    key = { ...key, secretAccessKey: "not-the-secret-00000000000000000000000000" };
    const upload = await chunkedUpload(path, parts).finally(() => (key = { ...key, secretAccessKey: real }));
    const r = await send(path, upload.headers, body(upload));
    expect(r.status).toBe(403);
    expect(r.text).toContain("<Code>SignatureDoesNotMatch</Code>");
    expect(entries()).not.toContain("forged.bin");
  });
});

describe("@aws-sdk/client-s3 with a stream body", () => {
  it("sends an aws-chunked body with a checksum trailer, stored byte for byte", async () => {
    const sent: Array<Record<string, string>> = [];
    const s3 = new S3Client({
      endpoint: key.endpoint,
      region: key.region,
      forcePathStyle: true,
      credentials: { accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey },
      maxAttempts: 1,
    });
    s3.middlewareStack.add(
      (next) => async (args) => {
        sent.push({ ...((args.request as { headers: Record<string, string> }).headers ?? {}) });
        return next(args);
      },
      { step: "finalizeRequest", priority: "low", name: "recordHeaders" },
    );
    const data = randomBytes(300 * 1024 + 7);
    // A stream with its length given: the client frames it as aws-chunked with a CRC32 trailer. (Without a
    // length this client refuses a PutObject itself, before sending: lib-storage's Upload is its way for those.)
    const stream = Readable.from(
      (function* () {
        for (let at = 0; at < data.length; at += 64 * 1024) yield data.subarray(at, at + 64 * 1024);
      })(),
    );
    await s3.send(new PutObjectCommand({ Bucket: volume, Key: "streamed.bin", Body: stream, ContentLength: data.length }));
    expect(sent[0]).toMatchObject({
      "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
      "content-encoding": expect.stringContaining("aws-chunked"),
      "x-amz-trailer": "x-amz-checksum-crc32",
    });
    expect(readFileSync(join(volumeDir(), "streamed.bin")).equals(data)).toBe(true);
    const got = await s3.send(new GetObjectCommand({ Bucket: volume, Key: "streamed.bin" }));
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(data)).toBe(true);
  });

  it("refuses an unsigned-trailer body whose trailer checksum does not match (BadDigest), storing nothing", async () => {
    const path = `/s3/${volume}/trailer.bin`;
    const data = randomBytes(10_000);
    const upload = async (checksum: string) => {
      const framed = Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from(`\r\n0\r\nx-amz-checksum-sha256:${checksum}\r\n\r\n`)]);
      const signed = await s3Signer(key, REGION).sign(
        s3Request(t.service.url, "PUT", path, {
          "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
          "content-encoding": "aws-chunked",
          "x-amz-decoded-content-length": String(data.length),
          "x-amz-trailer": "x-amz-checksum-sha256",
          "content-length": String(framed.length),
        }),
      );
      return send(path, signed.headers as Record<string, string>, framed);
    };
    const wrong = await upload(createHash("sha256").update("something else").digest("base64"));
    expect(wrong.status).toBe(400);
    expect(wrong.text).toContain("<Code>BadDigest</Code>");
    expect(entries()).not.toContain("trailer.bin");
    expect(entries().filter((e) => e.startsWith(".svc-"))).toEqual([]);
    expect((await upload(createHash("sha256").update(data).digest("base64"))).status).toBe(200);
    expect(readFileSync(join(volumeDir(), "trailer.bin")).equals(data)).toBe(true);
  });
});
