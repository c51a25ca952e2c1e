// Browser-based uploads (S3's POST Object with a POST policy, what `generate_presigned_post` makes): a
// multipart/form-data body to `POST /{volumeId}` whose fields carry the object's key, a policy document (base64
// JSON: an expiration and conditions) and its signature (Version 4, or Version 2 as boto3 makes it by default for
// us-east-1); the file comes last. The signature
// is checked over the policy, the policy's conditions over the fields (every field but the signature, the policy
// and x-ignore-* must be named by one), and `content-length-range` over the file's bytes as they arrive. The file
// streams into the volume as a PutObject's body does, within the volume's size.

import type { IncomingMessage } from "node:http";
import { volumeDir } from "../management/context.js";
import { S3Error } from "./s3-errors.js";
import { xmlDocument, xmlFields } from "./s3-xml.js";
import { ALGORITHM, credentialParts, parseAmzDate, policySignature, sameSignature } from "./sigv4.js";
import { v2Signature } from "./sigv2.js";
import { keySegments } from "./volume-fs.js";
import { bucketVolume, MAX_PUT_BYTES, openAccessKey, sendXml, volumeFs, type S3Call, type S3Caller, type S3Deps } from "./s3-call.js";

/** Bytes of all fields before the file together (S3 allows 20 KB of policy; fields stay small). */
const MAX_FIELD_BYTES = 64 * 1024;
const MAX_PART_HEADER_BYTES = 8 * 1024;

/** Whether a request is a POST upload: a form POSTed to a bucket. Pure. */
export function isPostUpload(method: string, key: string, contentType: string | undefined): boolean {
  return method === "POST" && key === "" && /^multipart\/form-data\s*;/i.test(contentType ?? "");
}

/** The boundary of a multipart/form-data content type, or the S3 error. Pure. */
export function formBoundary(contentType: string): string {
  const m = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  const boundary = m?.[1] ?? m?.[2];
  if (!boundary || boundary.length > 200)
    throw new S3Error("MalformedPOSTRequest", "The body of your POST request is not well-formed multipart/form-data (no boundary).");
  return boundary;
}

/** A condition of a POST policy, as its document states it. */
export type PolicyCondition =
  | { op: "eq" | "starts-with"; field: string; value: string; text: string }
  | { op: "content-length-range"; min: number; max: number };

/** A POST policy's expiration and conditions, or InvalidPolicyDocument. Pure. */
export function parsePolicy(policyBase64: string): { expiration: number; conditions: PolicyCondition[] } {
  const invalid = (why: string) => new S3Error("InvalidPolicyDocument", `Invalid Policy: ${why}`);
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(policyBase64, "base64").toString("utf8"));
  } catch {
    throw invalid("the policy is not base64 of a JSON document");
  }
  const { expiration, conditions } = (doc ?? {}) as { expiration?: unknown; conditions?: unknown };
  const expires = typeof expiration === "string" ? Date.parse(expiration) : Number.NaN;
  if (Number.isNaN(expires)) throw invalid("Policy missing expiration (an ISO 8601 time).");
  if (!Array.isArray(conditions)) throw invalid("Policy missing conditions.");
  const parsed = conditions.map((c): PolicyCondition => {
    if (Array.isArray(c)) {
      const op = String(c[0]).toLowerCase();
      if (op === "content-length-range") {
        const [min, max] = [Number(c[1]), Number(c[2])];
        if (c.length !== 3 || !Number.isInteger(min) || !Number.isInteger(max) || min < 0 || max < min)
          throw invalid("content-length-range needs two whole numbers, min <= max.");
        return { op, min, max };
      }
      if ((op !== "eq" && op !== "starts-with") || c.length !== 3 || typeof c[1] !== "string" || !c[1].startsWith("$") || typeof c[2] !== "string")
        throw invalid(`Invalid condition ${JSON.stringify(c)}.`);
      return { op, field: c[1].slice(1).toLowerCase(), value: c[2], text: JSON.stringify(c) };
    }
    if (c && typeof c === "object" && Object.keys(c).length === 1) {
      const [name, value] = Object.entries(c)[0]!;
      if (typeof value !== "string") throw invalid(`Invalid condition ${JSON.stringify(c)}.`);
      return { op: "eq", field: name.toLowerCase(), value, text: JSON.stringify(["eq", `$${name}`, value]) };
    }
    throw invalid(`Invalid condition ${JSON.stringify(c)}.`);
  });
  return { expiration: expires, conditions: parsed };
}

/**
 * Whether a POST's fields meet its policy at `now`: the bytes its file may have, or the AccessDenied S3 answers.
 * `fields` are the form's fields by lower-cased name (the file's excluded); `bucket` is the volume posted to.
 * Every field but the signature's own (policy, x-amz-signature or signature, AWSAccessKeyId) and x-ignore-*
 * must be named by a condition. Pure.
 */
export function checkPolicy(
  policy: { expiration: number; conditions: PolicyCondition[] },
  fields: Map<string, string>,
  bucket: string,
  now: number,
): { min: number; max: number } {
  const denied = (why: string) => new S3Error("AccessDenied", `Invalid according to Policy: ${why}`);
  if (now > policy.expiration) throw denied("Policy expired.");
  const values = new Map(fields);
  values.set("bucket", bucket);
  const covered = new Set<string>();
  let range = { min: 0, max: MAX_PUT_BYTES };
  for (const c of policy.conditions) {
    if (c.op === "content-length-range") {
      range = { min: Math.max(range.min, c.min), max: Math.min(range.max, c.max) };
      continue;
    }
    covered.add(c.field);
    const value = values.get(c.field);
    const ok = value !== undefined && (c.op === "eq" ? value === c.value : value.startsWith(c.value));
    if (!ok) throw denied(`Policy Condition failed: ${c.text}`);
  }
  const exempt = (name: string) => ["policy", "x-amz-signature", "signature", "awsaccesskeyid", "file"].includes(name) || name.startsWith("x-ignore-");
  const extra = [...fields.keys()].filter((name) => !exempt(name) && !covered.has(name));
  if (extra.length > 0) throw denied(`Extra input fields: ${extra.join(", ")}`);
  return range;
}

/** A multipart/form-data body read as it arrives: fields whole, the file as a stream of its bytes. */
class FormReader {
  private buffer: Buffer = Buffer.alloc(0);
  private ended = false;
  private readonly source: AsyncIterator<Buffer>;
  private readonly delimiter: Buffer;

  constructor(req: AsyncIterable<Buffer>, boundary: string) {
    this.source = req[Symbol.asyncIterator]();
    this.delimiter = Buffer.from(`\r\n--${boundary}`);
  }

  private async more(): Promise<void> {
    if (this.ended) throw new S3Error("MalformedPOSTRequest", "The body of your POST request is not well-formed multipart/form-data (it ends early).");
    const next = await this.source.next();
    if (next.done) this.ended = true;
    else this.buffer = this.buffer.length === 0 ? next.value : Buffer.concat([this.buffer, next.value]);
  }

  private async until(delimiter: Buffer, max: number): Promise<Buffer> {
    for (;;) {
      const at = this.buffer.indexOf(delimiter);
      if (at >= 0) {
        const found = this.buffer.subarray(0, at);
        this.buffer = this.buffer.subarray(at + delimiter.length);
        return found;
      }
      if (this.buffer.length > max + delimiter.length)
        throw new S3Error("MalformedPOSTRequest", `A form field of your POST request is larger than ${max} bytes.`);
      await this.more();
    }
  }

  private async take(n: number): Promise<Buffer> {
    while (this.buffer.length < n) await this.more();
    const taken = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return taken;
  }

  /** The fields before the file, and the file's name and bytes (undefined when the form has none). */
  async read(): Promise<{ fields: Map<string, string>; file?: { filename: string; bytes: AsyncGenerator<Buffer> } }> {
    const fields = new Map<string, string>();
    // The preamble: up to the first boundary (the delimiter without its CRLF, at the very start).
    this.buffer = Buffer.concat([Buffer.from("\r\n"), this.buffer]);
    await this.until(this.delimiter, MAX_FIELD_BYTES);
    let size = 0;
    for (;;) {
      const after = (await this.take(2)).toString("latin1");
      if (after === "--") return { fields };
      if (after !== "\r\n") throw new S3Error("MalformedPOSTRequest", "The body of your POST request is not well-formed multipart/form-data.");
      const head = (await this.until(Buffer.from("\r\n\r\n"), MAX_PART_HEADER_BYTES)).toString("utf8");
      const disposition = /^content-disposition:\s*form-data(.*)$/im.exec(head)?.[1] ?? "";
      const name = /;\s*name="([^"]*)"/i.exec(disposition)?.[1];
      if (name === undefined) throw new S3Error("MalformedPOSTRequest", "A part of your POST request has no form-data name.");
      if (name.toLowerCase() === "file") {
        const filename = /;\s*filename="([^"]*)"/i.exec(disposition)?.[1] ?? "";
        return { fields, file: { filename, bytes: this.stream() } };
      }
      const value = await this.until(this.delimiter, MAX_FIELD_BYTES);
      size += value.length;
      if (size > MAX_FIELD_BYTES) throw new S3Error("MalformedPOSTRequest", `The fields of your POST request are larger than ${MAX_FIELD_BYTES} bytes.`);
      fields.set(name.toLowerCase(), value.toString("utf8"));
    }
  }

  /** The file's bytes, up to the delimiter that ends it (what follows is not read). */
  private async *stream(): AsyncGenerator<Buffer> {
    const keep = this.delimiter.length - 1;
    for (;;) {
      const at = this.buffer.indexOf(this.delimiter);
      if (at >= 0) {
        if (at > 0) yield this.buffer.subarray(0, at);
        this.buffer = this.buffer.subarray(at + this.delimiter.length);
        return;
      }
      if (this.buffer.length > keep) {
        const out = this.buffer.subarray(0, this.buffer.length - keep);
        this.buffer = this.buffer.subarray(this.buffer.length - keep);
        yield out;
      }
      await this.more();
    }
  }
}

/** The caller a POST's signed policy stands for: the access key's, once the signature over the policy holds. */
async function postCaller(deps: S3Deps, fields: Map<string, string>): Promise<S3Caller> {
  const field = (name: string) => {
    const value = fields.get(name);
    if (value === undefined) throw new S3Error("InvalidArgument", `Bucket POST must contain a field named '${name}'.`, { fields: { ArgumentName: name } });
    return value;
  };
  const policy = field("policy");
  const mismatch = (accessKeyId: string) =>
    new S3Error("SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method.", {
      fields: { AWSAccessKeyId: accessKeyId },
    });
  // Version 2 (boto3's generate_presigned_post for us-east-1): base64 HMAC-SHA1 of the policy.
  if (fields.has("awsaccesskeyid") && !fields.has("x-amz-algorithm")) {
    const accessKeyId = field("awsaccesskeyid");
    const { record, secret } = await openAccessKey(deps, accessKeyId);
    if (!sameSignature(v2Signature(secret, policy), field("signature"))) throw mismatch(accessKeyId);
    return { userId: record.userId, readOnly: record.readOnly, volumeIds: record.volumeIds };
  }
  if (field("x-amz-algorithm") !== ALGORITHM) throw new S3Error("InvalidArgument", `x-amz-algorithm must be ${ALGORITHM}`);
  const credential = credentialParts(field("x-amz-credential"), "x-amz-credential field's");
  const date = parseAmzDate(field("x-amz-date"));
  if (!date || field("x-amz-date").slice(0, 8) !== credential.shortDate)
    throw new S3Error("InvalidArgument", "x-amz-date must be a date of the form 20240102T030405Z, on the credential's date");
  if (credential.service !== "s3") throw new S3Error("InvalidArgument", `The credential's service must be s3, not "${credential.service}"`);
  const { record, secret } = await openAccessKey(deps, credential.accessKeyId);
  const expected = await policySignature(secret, credential.accessKeyId, credential.shortDate, credential.region, policy);
  if (!sameSignature(expected, field("x-amz-signature"))) throw mismatch(credential.accessKeyId);
  return { userId: record.userId, readOnly: record.readOnly, volumeIds: record.volumeIds };
}

/** POST Object: a form upload into the volume `bucket`. The caller is whoever signed the form's policy. */
export async function postUpload(call: Omit<S3Call, "caller" | "key">, publicBase: string): Promise<void> {
  const { req, res, deps, bucket } = call;
  const now = deps.now?.() ?? Date.now();
  const declared = Number(req.headers["content-length"]);
  if (req.headers["content-length"] === undefined || !Number.isInteger(declared))
    throw new S3Error("MissingContentLength", "You must provide the Content-Length HTTP header.");
  const form = new FormReader(req as IncomingMessage & AsyncIterable<Buffer>, formBoundary(String(req.headers["content-type"])));
  const { fields, file } = await form.read();
  const caller = await postCaller(deps, fields);
  const range = checkPolicy(parsePolicy(fields.get("policy")!), fields, bucket, now);
  if (!file) throw new S3Error("InvalidArgument", "POST requires exactly one file upload per request.", { fields: { ArgumentName: "file" } });
  if (fields.has("success_action_redirect") || fields.has("redirect"))
    throw new S3Error("NotImplemented", "success_action_redirect is not supported: use success_action_status");
  const key = (fields.get("key") ?? "").replace(/\$\{filename\}/g, file.filename);
  if (!fields.has("key")) throw new S3Error("InvalidArgument", "Bucket POST must contain a field named 'key'.", { fields: { ArgumentName: "key" } });
  const status = fields.get("success_action_status") ?? "204";
  const scoped: S3Call = { ...call, caller, key };
  const volume = bucketVolume(scoped, bucket, true);
  keySegments(key);
  const fs = await volumeFs(scoped, volume);
  const replacing = (await fs.stat(key))?.size ?? 0;
  // The file is at most the body's length: that much is held against the volume's size until it is written.
  const release = await deps.usage.reserve(volume, volumeDir(deps.dataDir, volume.id), Math.min(declared, range.max), replacing);
  let stat;
  try {
    const pending = await fs.create(key);
    try {
      let written = 0;
      for await (const chunk of file.bytes) {
        written += chunk.length;
        if (written > range.max)
          throw new S3Error("EntityTooLarge", "Your proposed upload exceeds the maximum allowed size", { fields: { MaxSizeAllowed: String(range.max) } });
        await pending.handle.write(chunk);
      }
      if (written < range.min)
        throw new S3Error("EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size", { fields: { MinSizeAllowed: String(range.min) } });
      stat = await pending.commit();
    } catch (err) {
      await pending.discard();
      throw err;
    }
  } catch (err) {
    release(0);
    throw err;
  }
  release(stat.size - replacing);
  req.resume();
  const location = `${publicBase}/${volume.id}/${key.split("/").map(encodeURIComponent).join("/")}`;
  if (status === "201") {
    sendXml(
      res,
      201,
      xmlDocument(
        "PostResponse",
        xmlFields([
          ["Location", location],
          ["Bucket", volume.id],
          ["Key", key],
          ["ETag", stat.etag],
        ]),
      ),
      { etag: stat.etag, location },
    );
    return;
  }
  res.writeHead(status === "200" ? 200 : 204, { etag: stat.etag, location });
  res.end();
}
