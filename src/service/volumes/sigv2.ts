// AWS Signature Version 2 where clients still make it by default: presigned URLs (`AWSAccessKeyId`, `Expires`,
// `Signature` in the query: boto3's `generate_presigned_url` for an endpoint in us-east-1) and POST forms
// (`AWSAccessKeyId`, `policy`, `signature`: its `generate_presigned_post`). The signature is HMAC-SHA1 of S3's
// string to sign: method, Content-MD5, Content-Type, Expires, every x-amz-* header the request carries, and the
// resource (the path as sent, with the subresources S3 signs). Authorization headers must use Version 4.

import { createHmac } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { S3Error } from "./s3-errors.js";
import { sameSignature, MAX_PRESIGNED_SECONDS } from "./sigv4.js";

/** What a Version 2 presigned URL claims. */
export interface V2Claim {
  accessKeyId: string;
  signature: string;
  /** Unix seconds after which it is refused. */
  expires: number;
}

/** The query parameters S3 signs in a Version 2 resource (as botocore lists them). */
const SUBRESOURCES = new Set([
  "accelerate",
  "acl",
  "cors",
  "defaultObjectAcl",
  "location",
  "logging",
  "partNumber",
  "policy",
  "requestPayment",
  "torrent",
  "versioning",
  "versionId",
  "versions",
  "website",
  "uploads",
  "uploadId",
  "response-content-type",
  "response-content-language",
  "response-expires",
  "response-cache-control",
  "response-content-disposition",
  "response-content-encoding",
  "delete",
  "lifecycle",
  "tagging",
  "restore",
  "storageClass",
  "notification",
  "replication",
  "analytics",
  "metrics",
  "inventory",
  "select",
  "select-type",
  "object-lock",
]);

/** A Version 2 presigned URL's claim, or undefined when the query is not one. Pure. */
export function readV2Query(query: Record<string, string | string[]>, headers: IncomingHttpHeaders): V2Claim | undefined {
  const q = (name: string) => (typeof query[name] === "string" ? (query[name] as string) : undefined);
  const [accessKeyId, signature, expires] = [q("AWSAccessKeyId"), q("Signature"), q("Expires")];
  if (accessKeyId === undefined || signature === undefined || expires === undefined || headers.authorization !== undefined) return undefined;
  if (!/^\d{1,12}$/.test(expires)) throw new S3Error("AccessDenied", "Expires must be a time in seconds since the epoch");
  return { accessKeyId, signature, expires: Number(expires) };
}

/** S3's Version 2 string to sign of a presigned request. Pure. */
export function v2StringToSign(method: string, rawPath: string, rawQuery: string, headers: IncomingHttpHeaders, expires: number): string {
  const one = (name: string) => {
    const v = headers[name];
    return (Array.isArray(v) ? v.join(",") : (v ?? "")).trim();
  };
  const amz = Object.keys(headers)
    .map((n) => n.toLowerCase())
    .filter((n) => n.startsWith("x-amz-"))
    .sort()
    .map((n) => `${n}:${one(n)}\n`)
    .join("");
  const subresources = rawQuery
    .split("&")
    .filter(Boolean)
    .map((part) => {
      const at = part.indexOf("=");
      const name = decodeURIComponent(at < 0 ? part : part.slice(0, at));
      return { name, text: at < 0 ? name : `${name}=${decodeURIComponent(part.slice(at + 1))}` };
    })
    .filter((p) => SUBRESOURCES.has(p.name))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((p) => p.text);
  const resource = rawPath + (subresources.length > 0 ? `?${subresources.join("&")}` : "");
  return `${method}\n${one("content-md5")}\n${one("content-type")}\n${expires}\n${amz}${resource}`;
}

/** Base64 HMAC-SHA1 of `text` with the secret: a Version 2 signature. Pure. */
export function v2Signature(secretAccessKey: string, text: string): string {
  return createHmac("sha1", secretAccessKey).update(text, "utf8").digest("base64");
}

/** Check a Version 2 presigned request: its expiry at `now`, then its signature. */
export function verifyV2(
  req: { method: string; rawPath: string; rawQuery: string; headers: IncomingHttpHeaders },
  claim: V2Claim,
  secretAccessKey: string,
  now: number,
): void {
  if (now > claim.expires * 1000) {
    throw new S3Error("AccessDenied", "Request has expired", {
      fields: { Expires: new Date(claim.expires * 1000).toISOString(), ServerTime: new Date(now).toISOString() },
    });
  }
  if (claim.expires * 1000 - now > MAX_PRESIGNED_SECONDS * 1000)
    throw new S3Error("AccessDenied", `A presigned URL lives at most ${MAX_PRESIGNED_SECONDS} seconds`);
  const expected = v2Signature(secretAccessKey, v2StringToSign(req.method, req.rawPath, req.rawQuery, req.headers, claim.expires));
  if (!sameSignature(expected, claim.signature)) {
    throw new S3Error(
      "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
      {
        fields: { AWSAccessKeyId: claim.accessKeyId },
      },
    );
  }
}
