// The S3-compatible API on network volumes (path-style addressing). It listens on an origin of its own (the
// `svc server --s3-port` listener: paths at the root, what every S3 client can address), and, for clients made
// before that, under /s3 of the service's own port (the console's and the job API's origin):
//
//   GET    /                                ListBuckets (the caller's volumes)
//   HEAD   /{volumeId}                      HeadBucket; PUT: CreateBucket of a volume the caller has (200)
//   GET    /{volumeId}?list-type=2          ListObjectsV2 (and ListObjects without list-type)
//   GET    /{volumeId}?location             GetBucketLocation
//   POST   /{volumeId}?delete               DeleteObjects
//   POST   /{volumeId} (multipart/form-data)   POST Object: a browser upload under a signed policy (s3-post.ts)
//   GET    /{volumeId}/{key}                GetObject (Range), HEAD: HeadObject
//   PUT    /{volumeId}/{key}                PutObject; with x-amz-copy-source: CopyObject
//   DELETE /{volumeId}/{key}                DeleteObject
//   POST   /{volumeId}/{key}?uploads        CreateMultipartUpload
//   PUT    /{volumeId}/{key}?partNumber&uploadId   UploadPart
//   POST   /{volumeId}/{key}?uploadId       CompleteMultipartUpload
//   DELETE /{volumeId}/{key}?uploadId       AbortMultipartUpload
//
// A bucket is a network volume (by id); an object is a file of its directory (volume-fs.ts). Callers sign with
// AWS Signature Version 4 using a volume access key (key-routes.ts), or send their svc API key as a bearer token
// (what `svc volume cp|ls|rm` do). Writes are checked against the volume's size (usage.ts). Every failure is an
// S3 XML error.

import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { pipeline } from "node:stream/promises";
import type { Principal } from "../keys/auth.js";
import { volumeDir } from "../management/context.js";
import { presignedReadOutlivesRevocation } from "./worker-bucket.js";
import { errorXml, S3Error } from "./s3-errors.js";
import { parseDelete, xmlDocument, xmlFields } from "./s3-xml.js";
import { checkTime, parseQuery, readSignature, verifySignature } from "./sigv4.js";
import { readV2Query, verifyV2 } from "./sigv2.js";
import { requestPayload } from "./payload.js";
import { keySegments } from "./volume-fs.js";
import { abortUpload, completeUpload, createUpload, uploadPart } from "./s3-multipart.js";
import {
  bucketVolume,
  MAX_PUT_BYTES,
  openAccessKey,
  sendXml,
  sizedPayload,
  volumeFs,
  writePayload,
  xmlBody,
  type S3Call,
  type S3Caller,
  type S3Deps,
} from "./s3-call.js";
import { isPostUpload, postUpload } from "./s3-post.js";
import { asError, errorMessage, errorStack } from "../../errors.js";

export type { S3Deps } from "./s3-call.js";
export { MAX_PUT_BYTES } from "./s3-call.js";

export const S3_PREFIX = "/s3";
/** The region the API names in its answers; a signature for any region is accepted (clients need one). */
export const S3_REGION = "us-east-1";

/** Whether a request target belongs to the S3 API. Pure. */
export function isS3Target(url: string | undefined): boolean {
  if (!url) return false;
  return url === S3_PREFIX || url.startsWith(`${S3_PREFIX}/`) || url.startsWith(`${S3_PREFIX}?`);
}

const q1 = (query: Record<string, string | string[]>, name: string): string | undefined => {
  const v = query[name];
  return Array.isArray(v) ? v[0] : v;
};

/** The scopes of an svc API key that may read, and write, volumes through the S3 API. */
function apiKeyCaller(p: Principal): S3Caller {
  if (p.worker) throw new S3Error("AccessDenied", "A worker token cannot use the S3 API");
  const s = p.scopes;
  const writes = s.includes("admin") || s.includes("deploy") || s.includes("management:write");
  if (!writes && !s.includes("management:read")) throw new S3Error("AccessDenied", "This API key may not read volumes (it needs the management:read scope)");
  return { userId: p.userId, readOnly: !writes, volumeIds: null };
}

export class VolumeS3 {
  constructor(private readonly deps: S3Deps) {}

  /**
   * Answer one request. `sharedOrigin`: it came to the service's own port under /s3 (the console's origin), where
   * nothing may be asked to become active content; else to the S3 API's own listener, paths at the root.
   */
  async serve(req: IncomingMessage, res: ServerResponse, sharedOrigin: boolean): Promise<void> {
    const requestId = randomBytes(8).toString("hex").toUpperCase();
    res.setHeader("x-amz-request-id", requestId);
    const prefix = sharedOrigin ? S3_PREFIX : "";
    const raw = req.url ?? "/";
    const at = raw.indexOf("?");
    const rawPath = at < 0 ? raw : raw.slice(0, at);
    const rawQuery = at < 0 ? "" : raw.slice(at + 1);
    const resource = rawPath.slice(prefix.length) || "/";
    try {
      const query = parseQuery(rawQuery);
      const [bucketPart = "", ...keyParts] = resource.replace(/^\//, "").split("/");
      let bucket: string;
      let key: string;
      try {
        bucket = decodeURIComponent(bucketPart);
        key = decodeURIComponent(keyParts.join("/"));
      } catch {
        throw new S3Error("InvalidArgument", "The request path is not valid percent-encoding");
      }
      const method = req.method ?? "GET";
      const base = { req, res, method, query, bucket, requestId, deps: this.deps, sharedOrigin };
      // A browser's form upload carries its signature in the form, not the request.
      if (isPostUpload(method, key, req.headers["content-type"])) return await postUpload(base, this.publicBase(req, prefix));
      const caller = await this.authenticate(req, rawPath, rawQuery, query);
      await route({ ...base, caller, key });
    } catch (err) {
      // A body the answer did not read is drained, so the client sees the error rather than a reset.
      if (!req.readableEnded) req.resume();
      if (res.headersSent) {
        res.destroy(asError(err));
        return;
      }
      const s3 = err instanceof S3Error ? err : internal(err, this.deps, req);
      const body = errorXml(s3, resource, requestId);
      res.writeHead(s3.status, { "content-type": "application/xml", "content-length": Buffer.byteLength(body), ...s3.extra.headers });
      res.end(req.method === "HEAD" ? undefined : body);
    }
  }

  /** Where this request reached the API (its Host), for the Location of an upload's answer. */
  private publicBase(req: IncomingMessage, prefix: string): string {
    return `http://${req.headers.host ?? "localhost"}${prefix}`;
  }

  private async authenticate(req: IncomingMessage, rawPath: string, rawQuery: string, query: Record<string, string | string[]>): Promise<S3Caller> {
    const authorization = req.headers.authorization;
    if (authorization?.startsWith("Bearer ")) {
      const principal = await this.deps.authenticateApiKey(authorization.slice("Bearer ".length).trim());
      if (!principal) throw new S3Error("InvalidAccessKeyId", "The API key is not valid (unknown, revoked or expired)");
      return apiKeyCaller(principal);
    }
    const parts = { method: req.method ?? "GET", rawPath, rawQuery, headers: req.headers };
    // Version 2 presigned URLs (boto3 makes them by default for us-east-1): the payload is never signed.
    const v2 = readV2Query(query, req.headers);
    if (v2) {
      const { record, secret } = await openAccessKey(this.deps, v2.accessKeyId);
      verifyV2(parts, v2, secret, this.deps.now?.() ?? Date.now());
      return { userId: record.userId, readOnly: record.readOnly, volumeIds: record.volumeIds };
    }
    const claim = readSignature(parts, query);
    if (!claim) throw new S3Error("AccessDenied", "Anonymous requests are not served: sign with a volume access key (svc volume keys create)");
    // A worker's key keeps serving the links it presigned while it ran (worker-bucket.ts); nothing else.
    let outlives = false;
    const { record, secret } = await openAccessKey(this.deps, claim.accessKeyId, (revoked) => {
      outlives = presignedReadOutlivesRevocation(revoked, claim, parts.method);
      return outlives;
    });
    checkTime(claim, this.deps.now?.() ?? Date.now());
    const signingKey = await verifySignature(parts, query, claim, secret);
    return { userId: record.userId, readOnly: record.readOnly || outlives, volumeIds: record.volumeIds, claim, signingKey };
  }
}

function internal(err: unknown, deps: S3Deps, req: IncomingMessage): S3Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOSPC" || code === "EDQUOT") return new S3Error("EntityTooLarge", "The volume's filesystem is full (its quota is reached)");
  deps.log(`internal error on S3 ${req.method} ${req.url}: ${errorStack(err)}`);
  return new S3Error("InternalError", "We encountered an internal error. Please try again.");
}

async function route(call: S3Call): Promise<void> {
  const { method, query, bucket, key } = call;
  if (bucket === "") {
    if (method !== "GET") throw new S3Error("MethodNotAllowed", "Only GET (ListBuckets) is allowed here");
    return listBuckets(call);
  }
  const has = (name: string) => query[name] !== undefined;
  if (key === "") {
    if (method === "HEAD") return headBucket(call);
    if (method === "GET" && has("location")) return getLocation(call);
    if (method === "GET" && (has("uploads") || has("versions") || has("policy") || has("acl")))
      throw new S3Error("NotImplemented", "This bucket operation is not supported");
    if (method === "GET") return listObjects(call);
    if (method === "POST" && has("delete")) return deleteObjects(call);
    if (method === "PUT") return createBucket(call);
    if (method === "DELETE") throw new S3Error("NotImplemented", "Buckets are network volumes: delete them with the management API (svc volume delete)");
    throw new S3Error("MethodNotAllowed", `${method} is not allowed on a bucket`);
  }
  if (has("uploadId")) {
    const uploadId = q1(query, "uploadId")!;
    if (method === "PUT" && has("partNumber")) {
      if (call.req.headers["x-amz-copy-source"] !== undefined) throw new S3Error("NotImplemented", "UploadPartCopy is not supported: upload the part's bytes");
      return uploadPart(call, uploadId, q1(query, "partNumber")!);
    }
    if (method === "POST") return completeUpload(call, uploadId);
    if (method === "DELETE") return abortUpload(call, uploadId);
    if (method === "GET") throw new S3Error("NotImplemented", "ListParts is not supported");
    throw new S3Error("MethodNotAllowed", `${method} is not allowed on a multipart upload`);
  }
  if (method === "POST" && has("uploads")) return createUpload(call);
  if (method === "GET" || method === "HEAD") {
    if (has("tagging") || has("acl") || has("attributes")) throw new S3Error("NotImplemented", "This object operation is not supported");
    return getObject(call, method === "HEAD");
  }
  if (method === "PUT") {
    if (has("tagging") || has("acl")) throw new S3Error("NotImplemented", "This object operation is not supported");
    return call.req.headers["x-amz-copy-source"] !== undefined ? copyObject(call) : putObject(call);
  }
  if (method === "DELETE") return deleteObject(call);
  throw new S3Error("MethodNotAllowed", `${method} is not allowed on an object`);
}

const iso = (ms: number) => new Date(ms).toISOString();

async function listBuckets(call: S3Call): Promise<void> {
  call.req.resume();
  const mine = call.deps.volumes.volumes(call.caller.userId).filter((v) => call.caller.volumeIds === null || call.caller.volumeIds.includes(v.id));
  const buckets = mine
    .map(
      (v) =>
        `<Bucket>${xmlFields([
          ["Name", v.id],
          ["CreationDate", iso(v.createdAt)],
        ])}</Bucket>`,
    )
    .join("");
  sendXml(
    call.res,
    200,
    xmlDocument(
      "ListAllMyBucketsResult",
      `<Owner>${xmlFields([
        ["ID", call.caller.userId],
        ["DisplayName", call.caller.userId],
      ])}</Owner><Buckets>${buckets}</Buckets>`,
    ),
  );
}

/**
 * CreateBucket of a volume the caller already has: 200, as S3 answers it in us-east-1 for a bucket you own
 * (clients such as rclone create the bucket before their first upload). A new bucket is a new volume, made
 * with the management API.
 */
async function createBucket(call: S3Call): Promise<void> {
  call.req.resume();
  const volume = /^vol[0-9a-f]{12}$/.test(call.bucket) ? call.deps.volumes.volume(call.bucket) : undefined;
  if (!volume)
    throw new S3Error("NotImplemented", "Buckets are network volumes: create them with the management API (svc volume create), then use the volume's id");
  bucketVolume(call, call.bucket, false);
  call.res.writeHead(200, { location: `/${volume.id}` });
  call.res.end();
}

async function headBucket(call: S3Call): Promise<void> {
  call.req.resume();
  bucketVolume(call, call.bucket, false);
  call.res.writeHead(200, { "x-amz-bucket-region": S3_REGION });
  call.res.end();
}

async function getLocation(call: S3Call): Promise<void> {
  call.req.resume();
  bucketVolume(call, call.bucket, false);
  // us-east-1 is the empty constraint in S3's answer.
  sendXml(call.res, 200, `<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></LocationConstraint>`);
}

/** A key as a listing shows it: percent-encoded when the client asked for encoding-type=url. Pure. */
export function listedKey(key: string, urlEncoded: boolean): string {
  return urlEncoded ? encodeURIComponent(key).replace(/%2F/g, "/") : key;
}

async function listObjects(call: S3Call): Promise<void> {
  call.req.resume();
  const volume = bucketVolume(call, call.bucket, false);
  const { query } = call;
  const v2 = q1(query, "list-type") === "2";
  const prefix = q1(query, "prefix") ?? "";
  const delimiter = q1(query, "delimiter") || undefined;
  const encoded = q1(query, "encoding-type") === "url";
  const maxText = q1(query, "max-keys");
  if (maxText !== undefined && !/^\d+$/.test(maxText)) throw new S3Error("InvalidArgument", "max-keys must be a whole number");
  const maxKeys = Math.min(1000, maxText === undefined ? 1000 : Number(maxText));
  // Where to resume: after a key, or after everything under a common prefix the last page ended with.
  let after = "";
  let skipPrefix: string | undefined;
  const token = q1(query, "continuation-token");
  if (v2 && token !== undefined) {
    try {
      const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as { a: string; p?: string };
      after = parsed.a;
      skipPrefix = parsed.p;
    } catch {
      throw new S3Error("InvalidArgument", "The continuation token provided is incorrect");
    }
  } else {
    after = (v2 ? q1(query, "start-after") : q1(query, "marker")) ?? "";
    if (delimiter && after.endsWith(delimiter) && after.startsWith(prefix)) skipPrefix = after;
  }
  const fs = await volumeFs(call, volume);
  const contents: string[] = [];
  const prefixes: string[] = [];
  let last: { a: string; p?: string } | undefined;
  let truncated = false;
  let count = 0;
  const rolled = { current: skipPrefix };
  if (maxKeys > 0) {
    for await (const o of fs.objects(prefix, after, () => rolled.current)) {
      if (count >= maxKeys) {
        truncated = true;
        break;
      }
      const rest = o.key.slice(prefix.length);
      const cut = delimiter ? rest.indexOf(delimiter) : -1;
      if (delimiter && cut >= 0) {
        const common = prefix + rest.slice(0, cut + delimiter.length);
        prefixes.push(`<CommonPrefixes>${xmlFields([["Prefix", listedKey(common, encoded)]])}</CommonPrefixes>`);
        rolled.current = common;
        last = { a: common, p: common };
      } else {
        contents.push(
          `<Contents>${xmlFields([
            ["Key", listedKey(o.key, encoded)],
            ["LastModified", iso(o.mtimeMs)],
            ["ETag", o.etag],
            ["Size", o.size],
            ["StorageClass", "STANDARD"],
          ])}</Contents>`,
        );
        last = { a: o.key };
      }
      count++;
    }
  }
  const common: Array<[string, string | number | boolean | undefined]> = [
    ["Name", volume.id],
    ["Prefix", listedKey(prefix, encoded)],
    ...(v2 ? [] : ([["Marker", listedKey(q1(query, "marker") ?? "", encoded)]] as Array<[string, string]>)),
    ["MaxKeys", maxKeys],
    ["Delimiter", delimiter === undefined ? undefined : listedKey(delimiter, encoded)],
    ["IsTruncated", truncated],
    ["EncodingType", encoded ? "url" : undefined],
  ];
  const paging: Array<[string, string | number | boolean | undefined]> = v2
    ? [
        ["KeyCount", count],
        ["ContinuationToken", token],
        ["NextContinuationToken", truncated && last ? Buffer.from(JSON.stringify(last)).toString("base64url") : undefined],
        ["StartAfter", q1(query, "start-after") === undefined ? undefined : listedKey(q1(query, "start-after")!, encoded)],
      ]
    : [["NextMarker", truncated && delimiter && last ? listedKey(last.a, encoded) : undefined]];
  sendXml(call.res, 200, xmlDocument("ListBucketResult", xmlFields([...common, ...paging]) + contents.join("") + prefixes.join("")));
}

/** A Range header's first range within `size`: undefined for the whole object, InvalidRange when unsatisfiable. Pure. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  // Several ranges, or another unit: S3 answers with the whole object.
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  const unsatisfiable = () =>
    new S3Error("InvalidRange", "The requested range is not satisfiable", {
      fields: { ActualObjectSize: String(size), RangeRequested: header },
      headers: { "content-range": `bytes */${size}` },
    });
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) throw unsatisfiable();
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (m[2] !== "" && Number(m[2]) < start) return undefined;
  if (start >= size) throw unsatisfiable();
  return { start, end };
}

/**
 * Types a browser shows without running anything of the object's: served inline when asked. Everything else (HTML,
 * SVG, XML, scripts, PDF) goes out as an attachment whatever `response-content-type` or
 * `response-content-disposition` asks, so a tenant's object never becomes a page on the service's origin.
 */
const INLINE_SAFE =
  /^(image\/(png|jpeg|gif|webp|avif|bmp)|text\/plain|text\/csv|application\/json|application\/octet-stream|audio\/[\w.+-]+|video\/[\w.+-]+)(\s*;.*)?$/i;

/**
 * Types a browser may run or render as a document of the origin that serves them (HTML, XHTML, SVG, XML, XSL,
 * scripts, PDF, multipart streams, Flash, WebAssembly), and anything that is not a plain `type/subtype`, which a
 * browser may sniff. Pure.
 */
export function activeContentType(type: string): boolean {
  const essence = type.split(";")[0]!.trim().toLowerCase();
  if (!/^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/.test(essence)) return true;
  return /html|xml|xsl|script|svg|pdf|multipart\/|flash|wasm|manifest/.test(essence);
}

/**
 * The headers of an object's answer: what the query asks, within what keeps the object inert in a browser. On
 * the shared origin (the console's), a `response-content-type` of an active type is refused outright. Pure.
 */
export function objectHeaders(
  stat: { size: number; mtimeMs: number; etag: string },
  query: Record<string, string | string[]>,
  sharedOrigin = false,
  ownOrigin?: string,
): Record<string, string> {
  const type = q1(query, "response-content-type") ?? "application/octet-stream";
  if (sharedOrigin && activeContentType(type)) {
    throw new S3Error(
      "InvalidArgument",
      `response-content-type ${JSON.stringify(type)} is not served under /s3 of the console's origin, where it could run as a page: ${ownOrigin ? `use the S3 API's own address, ${ownOrigin}` : "ask for another type"}`,
      { fields: { ArgumentName: "response-content-type", ArgumentValue: type } },
    );
  }
  const disposition = q1(query, "response-content-disposition");
  const inline = INLINE_SAFE.test(type.trim());
  return {
    "content-type": type,
    ...(inline ? (disposition ? { "content-disposition": disposition } : {}) : { "content-disposition": asAttachment(disposition) }),
    ...(q1(query, "response-cache-control") ? { "cache-control": q1(query, "response-cache-control")! } : {}),
    // Whatever it is served as: never sniffed into something active, never scripted, framed or loading anything.
    "x-content-type-options": "nosniff",
    "content-security-policy": "sandbox; default-src 'none'; frame-ancestors 'none'",
    etag: stat.etag,
    "last-modified": new Date(stat.mtimeMs).toUTCString(),
    "accept-ranges": "bytes",
  };
}

/** A Content-Disposition that downloads: the asked one's parameters (its filename) kept, `inline` replaced. Pure. */
function asAttachment(disposition: string | undefined): string {
  if (!disposition) return "attachment";
  const params = disposition
    .split(";")
    .slice(1)
    .map((p) => p.trim())
    .filter(Boolean);
  return ["attachment", ...params].join("; ");
}

async function getObject(call: S3Call, head: boolean): Promise<void> {
  call.req.resume();
  const volume = bucketVolume(call, call.bucket, false);
  const fs = await volumeFs(call, volume);
  const opened = await fs.openFile(call.key);
  if (!opened) throw new S3Error("NoSuchKey", "The specified key does not exist.", { fields: { Key: call.key } });
  const { handle, stat } = opened;
  try {
    const range = parseRange(call.req.headers.range, stat.size);
    const headers = objectHeaders(stat, call.query, call.sharedOrigin, call.deps.ownOrigin);
    if (head && !range) {
      call.res.writeHead(200, { ...headers, "content-length": String(stat.size) });
      call.res.end();
      return;
    }
    if (range) {
      call.res.writeHead(206, {
        ...headers,
        "content-length": String(range.end - range.start + 1),
        "content-range": `bytes ${range.start}-${range.end}/${stat.size}`,
      });
    } else call.res.writeHead(200, { ...headers, "content-length": String(stat.size) });
    if (head || stat.size === 0) {
      call.res.end();
      return;
    }
    await pipeline(handle.createReadStream({ start: range?.start ?? 0, end: range?.end ?? stat.size - 1, autoClose: false }), call.res);
  } finally {
    await handle.close();
  }
}

async function putObject(call: S3Call): Promise<void> {
  const volume = bucketVolume(call, call.bucket, true);
  const { folder } = keySegments(call.key);
  const { payload, length } = sizedPayload(call, MAX_PUT_BYTES);
  const fs = await volumeFs(call, volume);
  if (folder) {
    if (length !== 0) throw new S3Error("InvalidArgument", "A key ending with / is a folder: its body must be empty");
    for await (const _ of payload.chunks) void _;
    payload.verify();
    await fs.makeFolder(call.key);
    call.res.writeHead(200, { etag: '"d41d8cd98f00b204e9800998ecf8427e"' });
    call.res.end();
    return;
  }
  const dir = volumeDir(call.deps.dataDir, volume.id);
  const replacing = (await fs.stat(call.key))?.size ?? 0;
  const release = await call.deps.usage.reserve(volume, dir, length, replacing);
  let stat;
  try {
    stat = await writePayload(await fs.create(call.key), payload, length);
  } catch (err) {
    release(0);
    throw err;
  }
  release(stat.size - replacing);
  call.res.writeHead(200, { etag: stat.etag });
  call.res.end();
}

/** `x-amz-copy-source` as a bucket and key: "/bucket/key" or "bucket/key", percent-encoded. Pure. */
export function copySource(header: string): { bucket: string; key: string } {
  const withoutVersion = header.split("?")[0]!;
  let decoded: string;
  try {
    decoded = decodeURIComponent(withoutVersion).replace(/^\//, "");
  } catch {
    throw new S3Error("InvalidArgument", "x-amz-copy-source is not valid percent-encoding");
  }
  const at = decoded.indexOf("/");
  if (at <= 0 || at === decoded.length - 1) throw new S3Error("InvalidArgument", "x-amz-copy-source must be /<bucket>/<key>");
  return { bucket: decoded.slice(0, at), key: decoded.slice(at + 1) };
}

async function copyObject(call: S3Call): Promise<void> {
  const volume = bucketVolume(call, call.bucket, true);
  const source = copySource(String(call.req.headers["x-amz-copy-source"]));
  const sourceVolume = bucketVolume(call, source.bucket, false);
  const payload = requestPayload(call.req, call.caller.claim, call.caller.signingKey);
  for await (const _ of payload.chunks) void _;
  payload.verify();
  keySegments(call.key);
  const sourceFs = await volumeFs(call, sourceVolume);
  const opened = await sourceFs.openFile(source.key);
  if (!opened) throw new S3Error("NoSuchKey", "The specified key does not exist.", { fields: { Key: source.key } });
  const fs = sourceVolume.id === volume.id ? sourceFs : await volumeFs(call, volume);
  let release: ((written: number) => void) | undefined;
  let stat;
  try {
    const replacing = (await fs.stat(call.key))?.size ?? 0;
    release = await call.deps.usage.reserve(volume, volumeDir(call.deps.dataDir, volume.id), opened.stat.size, replacing);
    const pending = await fs.create(call.key);
    try {
      const buffer = Buffer.allocUnsafe(1024 * 1024);
      for (let position = 0; position < opened.stat.size; ) {
        const { bytesRead } = await opened.handle.read(buffer, 0, buffer.length, position);
        if (bytesRead === 0) break;
        await pending.handle.write(buffer.subarray(0, bytesRead));
        position += bytesRead;
      }
      stat = await pending.commit();
    } catch (err) {
      await pending.discard();
      throw err;
    }
    release(stat.size - replacing);
  } catch (err) {
    release?.(0);
    throw err;
  } finally {
    await opened.handle.close();
  }
  sendXml(
    call.res,
    200,
    xmlDocument(
      "CopyObjectResult",
      xmlFields([
        ["LastModified", iso(stat.mtimeMs)],
        ["ETag", stat.etag],
      ]),
    ),
  );
}

async function deleteObject(call: S3Call): Promise<void> {
  call.req.resume();
  const volume = bucketVolume(call, call.bucket, true);
  const fs = await volumeFs(call, volume);
  const { bytes } = await fs.remove(call.key);
  call.deps.usage.adjust(volume.id, -bytes);
  call.res.writeHead(204);
  call.res.end();
}

async function deleteObjects(call: S3Call): Promise<void> {
  const volume = bucketVolume(call, call.bucket, true);
  const { keys, quiet } = parseDelete(await xmlBody(call));
  const fs = await volumeFs(call, volume);
  const results: string[] = [];
  for (const key of keys) {
    try {
      const { bytes } = await fs.remove(key);
      call.deps.usage.adjust(volume.id, -bytes);
      if (!quiet) results.push(`<Deleted>${xmlFields([["Key", key]])}</Deleted>`);
    } catch (err) {
      const s3 = err instanceof S3Error ? err : new S3Error("InternalError", errorMessage(err));
      results.push(
        `<Error>${xmlFields([
          ["Key", key],
          ["Code", s3.code],
          ["Message", s3.message],
        ])}</Error>`,
      );
    }
  }
  sendXml(call.res, 200, xmlDocument("DeleteResult", results.join("")));
}
