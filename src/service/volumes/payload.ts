// A request body of the S3 API as the bytes it carries, checked as its headers say: the SHA-256 the signature
// covers (x-amz-content-sha256), Content-MD5, an x-amz-checksum-* header or trailer, and the aws-chunked framing
// of streaming uploads (unsigned with a trailer, or each chunk signed in a chain from the request's signature).
// Nothing is trusted until `verify()` passes, after the last byte: callers write to a file they can discard.

import { createHash, type Hash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import * as zlib from "node:zlib";
import { S3Error } from "./s3-errors.js";
import { chunkSignature, EMPTY_SHA256, UNSIGNED_PAYLOAD, sameSignature, type SignatureClaim } from "./sigv4.js";

const STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
const STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
/** The longest chunk header line and the largest signed chunk held in memory to check its signature. */
const MAX_LINE = 4096;
const MAX_SIGNED_CHUNK = 16 * 1024 * 1024;

export interface Payload {
  /** Bytes of the content (aws-chunked framing removed). */
  chunks: AsyncIterable<Buffer>;
  /** The content's length as the request declares it, when it does. */
  length: number | undefined;
  /** After the last chunk: the S3 error when the content is not what the headers said. */
  verify(): void;
}

type Checksum = { name: string; expected?: string; update(b: Buffer): void; digest(): string };

function crc32Checksum(name: string, expected: string | undefined): Checksum | undefined {
  const crc32 = (zlib as unknown as { crc32?: (data: Buffer, value?: number) => number }).crc32;
  if (!crc32) return undefined;
  let value = 0;
  return {
    name,
    expected,
    update: (b) => void (value = crc32(b, value)),
    digest: () => {
      const out = Buffer.alloc(4);
      out.writeUInt32BE(value >>> 0);
      return out.toString("base64");
    },
  };
}

function hashChecksum(name: string, algorithm: string, encoding: "base64" | "hex", expected: string | undefined): Checksum {
  const hash: Hash = createHash(algorithm);
  return { name, expected, update: (b) => void hash.update(b), digest: () => hash.digest(encoding) };
}

/** The flexible checksum a request names (header or trailer), when this service can compute it. */
function flexibleChecksum(name: string, expected: string | undefined): Checksum | undefined {
  if (name === "x-amz-checksum-crc32") return crc32Checksum(name, expected);
  if (name === "x-amz-checksum-sha256") return hashChecksum(name, "sha256", "base64", expected);
  if (name === "x-amz-checksum-sha1") return hashChecksum(name, "sha1", "base64", expected);
  return undefined;
}

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/**
 * The payload of `req`. `claim`: the signature the request carried (undefined: authenticated otherwise, the
 * body unsigned); `signingKey` checks streaming chunks' signatures.
 */
export function requestPayload(req: IncomingMessage, claim: SignatureClaim | undefined, signingKey: Uint8Array | undefined): Payload {
  const mode = claim?.payloadHash ?? UNSIGNED_PAYLOAD;
  const checks: Checksum[] = [];
  const md5 = one(req.headers["content-md5"]);
  if (md5 !== undefined) checks.push(hashChecksum("Content-MD5", "md5", "base64", md5));
  for (const [name, value] of Object.entries(req.headers)) {
    if (!name.startsWith("x-amz-checksum-") || name === "x-amz-checksum-mode" || name === "x-amz-checksum-type") continue;
    const c = flexibleChecksum(name, one(value));
    if (c) checks.push(c);
  }
  const declared = one(req.headers["content-length"]);
  let verifyFraming = () => undefined as void;
  let chunks: AsyncIterable<Buffer>;
  let length: number | undefined;
  if (mode === STREAMING_SIGNED || mode === STREAMING_UNSIGNED_TRAILER) {
    const decoded = one(req.headers["x-amz-decoded-content-length"]);
    if (decoded === undefined || !/^\d+$/.test(decoded)) throw new S3Error("MissingContentLength", "A streaming upload needs x-amz-decoded-content-length");
    length = Number(decoded);
    const trailerName = one(req.headers["x-amz-trailer"])?.toLowerCase();
    const trailerCheck = trailerName ? flexibleChecksum(trailerName, undefined) : undefined;
    if (trailerCheck) checks.push(trailerCheck);
    const state = { done: false, trailers: {} as Record<string, string> };
    chunks = decodeAwsChunked(req, state, mode === STREAMING_SIGNED && claim && signingKey ? { claim, signingKey } : undefined);
    verifyFraming = () => {
      if (!state.done) throw new S3Error("IncompleteBody", "The streaming upload ended before its last chunk");
      if (trailerCheck && trailerName) trailerCheck.expected = state.trailers[trailerName];
    };
  } else if (mode.startsWith("STREAMING-")) {
    throw new S3Error("NotImplemented", `x-amz-content-sha256 ${mode} is not supported: use a signed or unsigned payload, or ${STREAMING_UNSIGNED_TRAILER}`);
  } else {
    length = declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : undefined;
    if (mode !== UNSIGNED_PAYLOAD) {
      if (!/^[0-9a-f]{64}$/.test(mode))
        throw new S3Error("InvalidArgument", "x-amz-content-sha256 must be a hex SHA-256, UNSIGNED-PAYLOAD or a STREAMING-* value");
      checks.push(hashChecksum("x-amz-content-sha256", "sha256", "hex", mode));
    }
    chunks = req;
  }
  return {
    length,
    chunks: (async function* () {
      for await (const chunk of chunks) {
        const b = chunk as Buffer;
        for (const c of checks) c.update(b);
        yield b;
      }
    })(),
    verify() {
      verifyFraming();
      for (const c of checks) {
        if (c.expected === undefined) continue;
        const actual = c.digest();
        if (actual === c.expected) continue;
        if (c.name === "x-amz-content-sha256") {
          throw new S3Error("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.", {
            fields: { ClientComputedContentSHA256: c.expected, S3ComputedContentSHA256: actual },
          });
        }
        throw new S3Error("BadDigest", `The ${c.name} you specified did not match what we received.`);
      }
    },
  };
}

/** Bytes of a body sent without content (GET, DELETE...) are read and dropped; a signed hash must be the empty one. */
export function emptyPayloadHash(claim: SignatureClaim | undefined): boolean {
  return !claim || claim.payloadHash === UNSIGNED_PAYLOAD || claim.payloadHash === EMPTY_SHA256;
}

/**
 * The content of an aws-chunked body: `<hex size>[;chunk-signature=<sig>]\r\n<bytes>\r\n`... up to a chunk of size
 * 0, then trailer lines and an empty line. Signed chunks are held until their signature is checked.
 */
async function* decodeAwsChunked(
  source: AsyncIterable<Buffer>,
  state: { done: boolean; trailers: Record<string, string> },
  signed: { claim: SignatureClaim; signingKey: Uint8Array } | undefined,
): AsyncGenerator<Buffer> {
  let buffer: Buffer = Buffer.alloc(0);
  let previous = signed?.claim.signature ?? "";
  const iterator = source[Symbol.asyncIterator]();
  const more = async (): Promise<boolean> => {
    const next = await iterator.next();
    if (next.done) return false;
    buffer = buffer.length === 0 ? (next.value as Buffer) : Buffer.concat([buffer, next.value as Buffer]);
    return true;
  };
  const line = async (): Promise<string> => {
    for (;;) {
      const at = buffer.indexOf("\r\n");
      if (at >= 0) {
        const text = buffer.subarray(0, at).toString("latin1");
        buffer = buffer.subarray(at + 2);
        return text;
      }
      if (buffer.length > MAX_LINE) throw new S3Error("InvalidRequest", "An aws-chunked chunk header is too long");
      if (!(await more())) throw new S3Error("IncompleteBody", "The streaming upload ended inside a chunk header");
    }
  };
  for (;;) {
    const header = await line();
    const [sizeText, ...extensions] = header.split(";");
    if (!/^[0-9a-fA-F]{1,16}$/.test(sizeText ?? "")) throw new S3Error("InvalidRequest", "An aws-chunked chunk header is not valid");
    const size = parseInt(sizeText!, 16);
    const claimed = extensions.find((e) => e.startsWith("chunk-signature="))?.slice("chunk-signature=".length);
    if (signed && claimed === undefined) throw new S3Error("InvalidRequest", "A signed streaming chunk carries no chunk-signature");
    if (signed && size > MAX_SIGNED_CHUNK) throw new S3Error("InvalidRequest", `Signed streaming chunks are at most ${MAX_SIGNED_CHUNK} bytes`);
    const held: Buffer[] = [];
    let left = size;
    while (left > 0) {
      if (buffer.length === 0 && !(await more())) throw new S3Error("IncompleteBody", "The streaming upload ended inside a chunk");
      const take = buffer.subarray(0, Math.min(left, buffer.length));
      buffer = buffer.subarray(take.length);
      left -= take.length;
      if (signed) held.push(Buffer.from(take));
      else yield take;
    }
    if (signed) {
      const data = Buffer.concat(held);
      const expected = chunkSignature(signed.signingKey, signed.claim, previous, data);
      if (!sameSignature(expected, claimed!))
        throw new S3Error("SignatureDoesNotMatch", "A chunk's signature does not match: the body was changed or signed with another key");
      previous = expected;
      if (data.length > 0) yield data;
    }
    if (size === 0) break;
    if ((await line()) !== "") throw new S3Error("InvalidRequest", "An aws-chunked chunk does not end with CRLF");
  }
  for (;;) {
    let trailer: string;
    try {
      trailer = await line();
    } catch (err) {
      // Some clients end the body right after the last chunk, without the empty line.
      if (err instanceof S3Error && err.code === "IncompleteBody" && buffer.length === 0) break;
      throw err;
    }
    if (trailer === "") break;
    const at = trailer.indexOf(":");
    if (at > 0) state.trailers[trailer.slice(0, at).trim().toLowerCase()] = trailer.slice(at + 1).trim();
  }
  state.done = true;
  // Whatever follows is not content; read it so the connection can serve the next request.
  while (await more()) buffer = Buffer.alloc(0);
}
