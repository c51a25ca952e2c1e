// Requests to the service's S3 API signed by hand as the AWS SDK signs them (@smithy/signature-v4, hashing with
// node's crypto) and sent with node:http, so that nothing on the way rewrites them: for the tests that check
// signatures, streaming bodies and presigned URLs against the protocol rather than through the SDK.

import { createHash, createHmac } from "node:crypto";
import { request } from "node:http";
import { SignatureV4 } from "@smithy/signature-v4";

/** SHA-256 and HMAC-SHA-256 for the signer, from node's crypto. */
class Sha256 {
  private readonly h;
  constructor(secret?: string | Uint8Array) {
    this.h = secret === undefined ? createHash("sha256") : createHmac("sha256", secret);
  }
  update(data: string | Uint8Array) {
    this.h.update(data);
  }
  async digest() {
    return new Uint8Array(this.h.digest());
  }
}

/** A SigV4 signer for the S3 service, as the SDK configures it for path-style requests. */
export function s3Signer(credentials: { accessKeyId: string; secretAccessKey: string }, region = "us-east-1"): SignatureV4 {
  return new SignatureV4({
    service: "s3",
    region,
    credentials: { accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretAccessKey },
    sha256: Sha256,
    uriEscapePath: false,
  });
}

/** The request to sign: `method` of `path` at the service at `serviceUrl`, with its host header and `headers`. */
export function s3Request(serviceUrl: string, method: string, path: string, headers: Record<string, string>) {
  const url = new URL(serviceUrl);
  return { method, protocol: "http:", hostname: url.hostname, port: Number(url.port), path, query: {}, headers: { host: url.host, ...headers } };
}

/** Sends the request exactly as given (headers and body untouched); its status and body. */
export function sendRaw(
  serviceUrl: string,
  opts: { method: string; path: string; headers: Record<string, string>; body?: Buffer },
): Promise<{ status: number; text: string }> {
  const url = new URL(serviceUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method: opts.method, path: opts.path, headers: opts.headers }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode!, text }));
    });
    req.on("error", reject);
    req.end(opts.body);
  });
}
