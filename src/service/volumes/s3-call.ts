// What every operation of the S3 API shares: the request being served (its caller and target), the caller's
// volume for a bucket, and reading and writing bodies as S3 does.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../keys/auth.js";
import type { SecretBox } from "../secrets/box.js";
import type { ManagementStore, VolumeRecord } from "../management/store.js";
import { volumeDir } from "../management/context.js";
import type { VolumeKeyRecord } from "./key-store.js";
import { keyBinding } from "./keys.js";
import type { VolumeKeyStore } from "./key-store.js";
import { S3Error } from "./s3-errors.js";
import type { SignatureClaim } from "./sigv4.js";
import { requestPayload, type Payload } from "./payload.js";
import { VolumeFs, type PendingFile } from "./volume-fs.js";
import type { VolumeUsage } from "./usage.js";

const MAX_XML_BODY = 2 * 1024 * 1024;
/** S3's own bound on one PutObject (larger objects go up in parts). */
export const MAX_PUT_BYTES = 5 * 1024 ** 3;

export interface S3Deps {
  dataDir: string;
  volumes: Pick<ManagementStore, "volume" | "volumes">;
  keys: VolumeKeyStore;
  box: SecretBox;
  /** An svc API key's principal (bearer tokens), or undefined. */
  authenticateApiKey(key: string): Promise<Principal | undefined>;
  usage: VolumeUsage;
  log(message: string): void;
  now?(): number;
  /** The S3 API's own origin (`http://host:port`), when it listens on one: named in refusals on the shared origin. */
  ownOrigin?: string;
}

/** Who a request acts as, and what it may do. */
export interface S3Caller {
  userId: string;
  readOnly: boolean;
  /** Only these volumes; null: all of the user's. */
  volumeIds: string[] | null;
  claim?: SignatureClaim;
  signingKey?: Uint8Array;
}

/** One request being served: its parsed target, caller and answer. */
export interface S3Call {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  query: Record<string, string | string[]>;
  caller: S3Caller;
  bucket: string;
  key: string;
  requestId: string;
  deps: S3Deps;
  /** Served on the console's and job API's origin (under /s3) rather than the S3 API's own. */
  sharedOrigin: boolean;
}

/** The caller's volume named by a bucket: NoSuchBucket when none is, AccessDenied when another user's. */
export function bucketVolume(call: Pick<S3Call, "deps" | "caller">, bucket: string, write: boolean): VolumeRecord {
  const volume = /^vol[0-9a-f]{12}$/.test(bucket) ? call.deps.volumes.volume(bucket) : undefined;
  if (!volume) throw new S3Error("NoSuchBucket", "The specified bucket does not exist (buckets are network volume ids)", { fields: { BucketName: bucket } });
  if (volume.userId !== call.caller.userId || (call.caller.volumeIds !== null && !call.caller.volumeIds.includes(volume.id))) {
    throw new S3Error("AccessDenied", "Access Denied: this key may not use this volume", { fields: { BucketName: bucket } });
  }
  if (write && call.caller.readOnly) throw new S3Error("AccessDenied", "Access Denied: this access key is read-only", { fields: { BucketName: bucket } });
  return volume;
}

export async function volumeFs(call: Pick<S3Call, "deps">, volume: VolumeRecord): Promise<VolumeFs> {
  return VolumeFs.open(volumeDir(call.deps.dataDir, volume.id));
}

export function sendXml(res: ServerResponse, status: number, xml: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/xml", "content-length": Buffer.byteLength(xml), ...headers });
  res.end(xml);
}

/** Write a payload into a pending file; its committed stat. Discarded on any failure. */
export async function writePayload(pending: PendingFile, payload: Payload, length: number): Promise<{ size: number; mtimeMs: number; etag: string }> {
  let written = 0;
  try {
    for await (const chunk of payload.chunks) {
      written += chunk.length;
      if (written > length) throw new S3Error("InvalidRequest", "The body is longer than its declared length");
      await pending.handle.write(chunk);
    }
    if (written !== length) throw new S3Error("IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header");
    payload.verify();
    return await pending.commit();
  } catch (err) {
    await pending.discard();
    throw err;
  }
}

/** The payload of a write and its length, or the S3 error: a length is required, and at most `max`. */
export function sizedPayload(call: S3Call, max: number): { payload: Payload; length: number } {
  const payload = requestPayload(call.req, call.caller.claim, call.caller.signingKey);
  if (payload.length === undefined) throw new S3Error("MissingContentLength", "You must provide the Content-Length HTTP header.");
  if (payload.length > max) {
    throw new S3Error("EntityTooLarge", `Your proposed upload exceeds the maximum allowed size (${max} bytes)`, {
      fields: { ProposedSize: String(payload.length), MaxSizeAllowed: String(max) },
    });
  }
  return { payload, length: payload.length };
}

/** A small XML body, read whole and checked. */
export async function xmlBody(call: S3Call): Promise<string> {
  const payload = requestPayload(call.req, call.caller.claim, call.caller.signingKey);
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of payload.chunks) {
    size += chunk.length;
    if (size > MAX_XML_BODY) throw new S3Error("MalformedXML", `The XML body is larger than ${MAX_XML_BODY} bytes`);
    parts.push(chunk);
  }
  payload.verify();
  return Buffer.concat(parts).toString("utf8");
}

/**
 * An access key that may sign requests, and its secret: InvalidAccessKeyId when unknown, revoked (unless
 * `revokedServes` says this request may still use it) or unopenable.
 */
export async function openAccessKey(
  deps: S3Deps,
  accessKeyId: string,
  revokedServes: (record: VolumeKeyRecord) => boolean = () => false,
): Promise<{ record: VolumeKeyRecord; secret: string }> {
  const record = await deps.keys.key(accessKeyId);
  if (!record || (record.revokedAt !== null && !revokedServes(record)))
    throw new S3Error("InvalidAccessKeyId", "The access key ID you provided does not exist in our records.", { fields: { AWSAccessKeyId: accessKeyId } });
  const secret = deps.box.open(record.sealed, record.keyId, keyBinding(record));
  if (secret === undefined) {
    deps.log(
      `volume access key ${record.id} of user ${record.userId} cannot be opened: the secrets key it was sealed with (id ${record.keyId}) is not configured`,
    );
    throw new S3Error("InvalidAccessKeyId", "This access key cannot be used on this service any more: create another");
  }
  return { record, secret };
}
