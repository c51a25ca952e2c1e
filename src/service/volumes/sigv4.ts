// AWS Signature Version 4 on requests to the S3 API: the Authorization header form and the presigned-URL form
// (X-Amz-* query parameters). The expected signature is computed by @smithy/signature-v4 (the AWS SDK's own
// signer) over the request as the client saw it: its method, raw path, query, the headers it signed and its
// payload hash; then compared with the one sent in constant time. Streaming uploads' chunk signatures
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) chain from the request's signature with the same signing key.

import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { createScope, getSigningKey, SignatureV4 } from "@smithy/signature-v4";
import { S3Error } from "./s3-errors.js";

export const ALGORITHM = "AWS4-HMAC-SHA256";
export const UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD";
export const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/** How far a request's date may be from the service's clock (S3's own bound). */
export const MAX_SKEW_MS = 15 * 60 * 1000;
/** The longest a presigned URL may live (S3's own bound). */
export const MAX_PRESIGNED_SECONDS = 7 * 24 * 3600;

/** SHA-256 (keyed: HMAC) as the signer's hash constructor, from node's crypto. */
class Sha256 {
  private readonly hash;
  constructor(secret?: string | Uint8Array | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", toBytes(secret));
  }
  update(data: string | Uint8Array | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(toBytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
}

function toBytes(data: string | Uint8Array | ArrayBuffer | ArrayBufferView): Buffer {
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/** What a request says about its signature. */
export interface SignatureClaim {
  form: "header" | "query";
  accessKeyId: string;
  /** The request's time (X-Amz-Date). */
  date: Date;
  longDate: string;
  region: string;
  service: string;
  signedHeaders: string[];
  signature: string;
  /** X-Amz-Content-Sha256: a hex digest, UNSIGNED-PAYLOAD or a STREAMING-* form. */
  payloadHash: string;
  /** Presigned: seconds the URL lives from `date`. */
  expiresSeconds?: number;
}

export interface RequestParts {
  method: string;
  /** The path as sent (percent-encoded), without the query. */
  rawPath: string;
  /** The query string as sent, without "?". */
  rawQuery: string;
  headers: IncomingHttpHeaders;
}

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const v = headers[name];
  return Array.isArray(v) ? v.join(",") : v;
};

/** `20240102T030405Z` as a time, or undefined. Pure. */
export function parseAmzDate(text: string | undefined): Date | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(text ?? "");
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m.map(Number) as number[];
  return new Date(Date.UTC(y!, mo! - 1, d!, h!, mi!, s!));
}

/**
 * The query as the signer wants it: each name and value percent-decoded ("+" stays "+", as AWS clients encode a
 * space %20), a name given several times as a list of its values. Pure.
 */
export function parseQuery(rawQuery: string): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  for (const part of rawQuery.split("&")) {
    if (part === "") continue;
    const at = part.indexOf("=");
    let name: string;
    let value: string;
    try {
      name = decodeURIComponent(at < 0 ? part : part.slice(0, at));
      value = at < 0 ? "" : decodeURIComponent(part.slice(at + 1));
    } catch {
      throw new S3Error("InvalidArgument", "The query string is not valid percent-encoding");
    }
    const had = query[name];
    query[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
  }
  return query;
}

export function credentialParts(credential: string, form: string): { accessKeyId: string; shortDate: string; region: string; service: string } {
  const parts = credential.split("/");
  if (parts.length !== 5 || parts[4] !== "aws4_request" || !parts[0]) {
    throw new S3Error("AuthorizationHeaderMalformed", `The ${form} credential is not <access key id>/<date>/<region>/s3/aws4_request`);
  }
  return { accessKeyId: parts[0], shortDate: parts[1]!, region: parts[2]!, service: parts[3]! };
}

/**
 * The signature a request claims, or undefined when it carries none (anonymous). Malformed claims are the S3
 * error they are. Pure.
 */
export function readSignature(req: RequestParts, query: Record<string, string | string[]>): SignatureClaim | undefined {
  const auth = header(req.headers, "authorization");
  const q = (name: string) => (typeof query[name] === "string" ? (query[name] as string) : undefined);
  if (auth !== undefined && auth.startsWith(`${ALGORITHM} `)) {
    const fields = Object.fromEntries(
      auth
        .slice(ALGORITHM.length + 1)
        .split(",")
        .map((f) => f.trim())
        .filter(Boolean)
        .map((f) => [f.slice(0, f.indexOf("=")), f.slice(f.indexOf("=") + 1)]),
    );
    if (!fields.Credential || !fields.SignedHeaders || !fields.Signature) {
      throw new S3Error("AuthorizationHeaderMalformed", "The Authorization header needs Credential, SignedHeaders and Signature");
    }
    const credential = credentialParts(fields.Credential, "Authorization header's");
    const longDate = header(req.headers, "x-amz-date");
    const date = parseAmzDate(longDate);
    if (!date || !longDate) throw new S3Error("AccessDenied", "AWS authentication requires a valid X-Amz-Date header");
    if (longDate.slice(0, 8) !== credential.shortDate) {
      throw new S3Error("AuthorizationHeaderMalformed", `The credential's date ${credential.shortDate} is not the date of X-Amz-Date (${longDate})`);
    }
    const payloadHash = header(req.headers, "x-amz-content-sha256");
    if (!payloadHash) throw new S3Error("InvalidRequest", "Missing required header for this request: x-amz-content-sha256");
    return {
      form: "header",
      accessKeyId: credential.accessKeyId,
      date,
      longDate,
      region: credential.region,
      service: credential.service,
      signedHeaders: fields.SignedHeaders.split(";"),
      signature: fields.Signature,
      payloadHash,
    };
  }
  if (auth !== undefined && /^AWS /.test(auth))
    throw new S3Error("InvalidRequest", "Signature Version 2 is not supported: sign requests with AWS Signature Version 4");
  if (q("X-Amz-Algorithm") === undefined) {
    if (q("AWSAccessKeyId") !== undefined && q("Signature") !== undefined) {
      throw new S3Error("InvalidRequest", "Signature Version 2 is not supported: presign with AWS Signature Version 4 (AWS CLI v1: signature_version = s3v4)");
    }
    return undefined;
  }
  if (q("X-Amz-Algorithm") !== ALGORITHM) throw new S3Error("AuthorizationHeaderMalformed", `X-Amz-Algorithm must be ${ALGORITHM}`);
  const credentialText = q("X-Amz-Credential");
  const longDate = q("X-Amz-Date");
  const expires = q("X-Amz-Expires");
  const signedHeaders = q("X-Amz-SignedHeaders");
  const signature = q("X-Amz-Signature");
  if (!credentialText || !longDate || !expires || !signedHeaders || !signature) {
    throw new S3Error(
      "AuthorizationHeaderMalformed",
      "A presigned URL needs X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders and X-Amz-Signature",
    );
  }
  const credential = credentialParts(credentialText, "X-Amz-Credential");
  const date = parseAmzDate(longDate);
  if (!date) throw new S3Error("AuthorizationHeaderMalformed", "X-Amz-Date is not a date of the form 20240102T030405Z");
  if (longDate.slice(0, 8) !== credential.shortDate) throw new S3Error("AuthorizationHeaderMalformed", "X-Amz-Credential's date is not the date of X-Amz-Date");
  const expiresSeconds = Number(expires);
  if (!/^(0|[1-9]\d*)$/.test(expires) || expiresSeconds > MAX_PRESIGNED_SECONDS) {
    throw new S3Error("AuthorizationHeaderMalformed", `X-Amz-Expires must be a whole number of seconds from 0 to ${MAX_PRESIGNED_SECONDS}`);
  }
  return {
    form: "query",
    accessKeyId: credential.accessKeyId,
    date,
    longDate,
    region: credential.region,
    service: credential.service,
    signedHeaders: signedHeaders.split(";"),
    signature,
    payloadHash: q("X-Amz-Content-Sha256") ?? UNSIGNED_PAYLOAD,
    expiresSeconds,
  };
}

/** Whether the claimed time is acceptable now: the S3 error it is when not. Pure. */
export function checkTime(claim: SignatureClaim, now: number): void {
  if (claim.form === "query") {
    if (claim.date.getTime() - now > MAX_SKEW_MS) throw new S3Error("AccessDenied", "Request is not valid yet");
    if (now > claim.date.getTime() + claim.expiresSeconds! * 1000) {
      throw new S3Error("AccessDenied", "Request has expired", {
        fields: { Expires: new Date(claim.date.getTime() + claim.expiresSeconds! * 1000).toISOString(), ServerTime: new Date(now).toISOString() },
      });
    }
    return;
  }
  if (Math.abs(claim.date.getTime() - now) > MAX_SKEW_MS) {
    throw new S3Error("RequestTimeTooSkewed", "The difference between the request time and the server's time is too large", {
      fields: { RequestTime: claim.longDate, ServerTime: new Date(now).toISOString() },
    });
  }
}

/** Equal hex signatures, compared in constant time. */
export function sameSignature(a: string, b: string): boolean {
  const x = Buffer.from(a, "utf8");
  const y = Buffer.from(b, "utf8");
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The headers the client signed, with the values this request carries. */
function signedHeaderValues(req: RequestParts, names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = header(req.headers, name);
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/**
 * Check the claimed signature against the one the secret gives for this request: the S3 error when it differs.
 * The signing key is returned (streaming uploads verify their chunks with it).
 */
export async function verifySignature(
  req: RequestParts,
  query: Record<string, string | string[]>,
  claim: SignatureClaim,
  secretAccessKey: string,
): Promise<Uint8Array> {
  if (claim.service !== "s3") throw new S3Error("AuthorizationHeaderMalformed", `The credential's service must be s3, not "${claim.service}"`);
  const unsigned = unsignedAmzHeaders(req.headers, claim);
  if (unsigned.length > 0) {
    throw new S3Error("AccessDenied", "There were headers present in the request which were not signed", { fields: { HeadersNotSigned: unsigned.join(", ") } });
  }
  const credentials = { accessKeyId: claim.accessKeyId, secretAccessKey };
  // S3 paths are signed as sent: encoded once, never normalised.
  const signer = new SignatureV4({ service: "s3", region: claim.region, credentials, sha256: Sha256, uriEscapePath: false });
  const signable = new Set(claim.signedHeaders);
  const headers = signedHeaderValues(req, claim.signedHeaders);
  let expected: string | undefined;
  if (claim.form === "header") {
    const signed = await signer.sign(
      { method: req.method, protocol: "http:", hostname: "", path: req.rawPath, query, headers },
      { signingDate: claim.date, signableHeaders: signable },
    );
    expected = /Signature=([0-9a-f]+)/.exec(String(signed.headers.authorization))?.[1];
  } else {
    const authParams = new Set(["X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"]);
    const rest = Object.fromEntries(Object.entries(query).filter(([name]) => !authParams.has(name)));
    // The payload of a presigned request is never signed: UNSIGNED-PAYLOAD in its canonical request.
    const withPayload = { ...headers, "x-amz-content-sha256": UNSIGNED_PAYLOAD };
    const presigned = await signer.presign(
      {
        method: req.method,
        protocol: "http:",
        hostname: "",
        path: req.rawPath,
        query: rest,
        headers: signable.has("x-amz-content-sha256") ? headers : withPayload,
      },
      {
        signingDate: claim.date,
        expiresIn: claim.expiresSeconds,
        signableHeaders: signable,
        unsignableHeaders: signable.has("x-amz-content-sha256") ? undefined : new Set(["x-amz-content-sha256"]),
        // Signed headers stay headers: hoisting them into the query would change the canonical request.
        unhoistableHeaders: new Set(Object.keys(withPayload)),
      },
    );
    expected = presigned.query?.["X-Amz-Signature"] as string | undefined;
  }
  if (expected === undefined || !sameSignature(expected, claim.signature)) {
    throw new S3Error(
      "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
      {
        fields: { AWSAccessKeyId: claim.accessKeyId },
      },
    );
  }
  return getSigningKey(Sha256, credentials, claim.longDate.slice(0, 8), claim.region, "s3");
}

/**
 * The `x-amz-*` headers of a request that its signature does not cover, as S3 refuses them: whoever holds a
 * presigned URL (or replays a signed request) cannot add one that changes what the request does (an
 * `x-amz-copy-source` turning an upload into a copy of another object). A presigned request's payload hash is the
 * one exception: it is never part of its signature (UNSIGNED-PAYLOAD). Pure.
 */
export function unsignedAmzHeaders(headers: IncomingHttpHeaders, claim: Pick<SignatureClaim, "form" | "signedHeaders">): string[] {
  const signed = new Set(claim.signedHeaders.map((h) => h.toLowerCase()));
  return Object.keys(headers)
    .map((name) => name.toLowerCase())
    .filter((name) => name.startsWith("x-amz-") && !signed.has(name) && !(claim.form === "query" && name === "x-amz-content-sha256"))
    .sort();
}

/** The signature of one chunk of a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body. Pure. */
export function chunkSignature(signingKey: Uint8Array, claim: Pick<SignatureClaim, "longDate" | "region">, previous: string, chunk: Buffer): string {
  const scope = createScope(claim.longDate.slice(0, 8), claim.region, "s3");
  const stringToSign = ["AWS4-HMAC-SHA256-PAYLOAD", claim.longDate, scope, previous, EMPTY_SHA256, createHash("sha256").update(chunk).digest("hex")].join("\n");
  return createHmac("sha256", signingKey).update(stringToSign).digest("hex");
}

/**
 * A GET URL for `url` presigned with this key (Signature Version 4, the host header only, as clients presign),
 * valid `expiresSeconds` from `now`: what the service hands out for files it writes to a volume itself.
 */
export async function presignGet(url: string, key: { accessKeyId: string; secretAccessKey: string }, expiresSeconds: number, now: Date): Promise<string> {
  const target = new URL(url);
  const signer = new SignatureV4({ service: "s3", region: "us-east-1", credentials: key, sha256: Sha256, uriEscapePath: false });
  const presigned = await signer.presign(
    {
      method: "GET",
      protocol: target.protocol,
      hostname: target.hostname,
      port: target.port ? Number(target.port) : undefined,
      path: target.pathname,
      query: {},
      headers: { host: target.host, "x-amz-content-sha256": UNSIGNED_PAYLOAD },
    },
    {
      signingDate: now,
      expiresIn: expiresSeconds,
      unsignableHeaders: new Set(["x-amz-content-sha256"]),
      unhoistableHeaders: new Set(["x-amz-content-sha256"]),
    },
  );
  const query = Object.entries(presigned.query ?? {})
    .map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(String(value))}`)
    .join("&");
  return `${target.origin}${target.pathname}?${query}`;
}

/**
 * The signature of a browser-based POST upload's policy: the policy document's base64 text, signed with the
 * signing key of the credential's date and region (S3's "POST policy", Signature Version 4). Pure.
 */
export async function policySignature(secretAccessKey: string, accessKeyId: string, shortDate: string, region: string, policy: string): Promise<string> {
  const signingKey = await getSigningKey(Sha256, { accessKeyId, secretAccessKey }, shortDate, region, "s3");
  return createHmac("sha256", signingKey).update(policy, "utf8").digest("hex");
}
