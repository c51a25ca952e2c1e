import { describe, expect, it } from "vitest";
import { parseServerConfig } from "../config.js";
import { S3Error } from "./s3-errors.js";
import { activeContentType, objectHeaders } from "./s3.js";
import { defaultS3Port, s3OriginUrl } from "./s3-origin.js";
import { checkPolicy, formBoundary, parsePolicy } from "./s3-post.js";
import { v2Signature, v2StringToSign, verifyV2 } from "./sigv2.js";

const code = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return (err as S3Error).code;
  }
  return undefined;
};
const policy = (doc: unknown) => Buffer.from(JSON.stringify(doc)).toString("base64");

describe("the S3 API's own origin", () => {
  it("listens on the next port by default, on any free one with port 0, and on none when off", () => {
    expect(defaultS3Port(8600)).toBe(8601);
    expect(defaultS3Port(0)).toBe(0);
    expect(parseServerConfig({}, {}).config.s3Port).toBeUndefined();
    expect(parseServerConfig({ s3Port: "off" }, {}).config.s3Port).toBeNull();
    expect(parseServerConfig({}, { SVC_S3_PORT: "9100" }).config.s3Port).toBe(9100);
    expect(() => parseServerConfig({ s3Port: "s3" }, {})).toThrow(/--s3-port must be 0..65535 or "off", not "s3"/);
  });

  it("gives clients the operator's address, else the public URL's host at the S3 port, else the listening one", () => {
    expect(s3OriginUrl({ listening: "http://127.0.0.1:8601", port: 8601, s3PublicUrl: "https://s3.example.com/" })).toBe("https://s3.example.com");
    expect(s3OriginUrl({ listening: "http://127.0.0.1:8601", port: 8601, publicUrl: "http://svc.example.com:8600/" })).toBe("http://svc.example.com:8601");
    expect(s3OriginUrl({ listening: "http://127.0.0.1:8601", port: 8601 })).toBe("http://127.0.0.1:8601");
  });

  it("refuses active response types on the shared origin only", () => {
    const stat = { size: 1, mtimeMs: 0, etag: '"x-1"' };
    for (const type of [
      "text/html",
      "TEXT/HTML; charset=utf-8",
      "image/svg+xml",
      "application/xml",
      "text/xsl",
      "application/javascript",
      "application/pdf",
      "multipart/x-mixed-replace",
      "html",
    ])
      expect(activeContentType(type)).toBe(true);
    for (const type of ["text/plain", "image/png", "application/json", "application/octet-stream", "application/zip", "video/mp4"])
      expect(activeContentType(type)).toBe(false);
    expect(code(() => objectHeaders(stat, { "response-content-type": "text/html" }, true))).toBe("InvalidArgument");
    expect(objectHeaders(stat, { "response-content-type": "text/html" }, false)["content-disposition"]).toBe("attachment");
    expect(objectHeaders(stat, { "response-content-type": "application/zip" }, true)["content-disposition"]).toBe("attachment");
  });
});

describe("POST policies", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  const fields = (extra: Record<string, string> = {}) => new Map(Object.entries({ key: "uploads/a.txt", "x-amz-date": "20260101T000000Z", ...extra }));
  const doc = (conditions: unknown[]) => parsePolicy(policy({ expiration: "2026-01-01T01:00:00Z", conditions }));

  it("reads the form's boundary", () => {
    expect(formBoundary("multipart/form-data; boundary=abc")).toBe("abc");
    expect(formBoundary('multipart/form-data; boundary="a b"')).toBe("a b");
    expect(code(() => formBoundary("multipart/form-data"))).toBe("MalformedPOSTRequest");
  });

  it("checks every condition, the bucket, the expiration and the size range", () => {
    const base = [{ bucket: "vol0123456789ab" }, ["starts-with", "$key", "uploads/"], { "x-amz-date": "20260101T000000Z" }];
    expect(checkPolicy(doc([...base, ["content-length-range", 1, 10]]), fields(), "vol0123456789ab", now)).toEqual({ min: 1, max: 10 });
    expect(code(() => checkPolicy(doc(base), fields(), "vol999999999999", now))).toBe("AccessDenied");
    expect(code(() => checkPolicy(doc(base), fields({ key: "elsewhere/a.txt" }), "vol0123456789ab", now))).toBe("AccessDenied");
    expect(code(() => checkPolicy(doc(base), fields(), "vol0123456789ab", Date.parse("2026-01-01T02:00:00Z")))).toBe("AccessDenied");
  });

  it("refuses fields no condition names, except the signature, the policy and x-ignore-*", () => {
    const base = [
      ["starts-with", "$key", ""],
      ["starts-with", "$x-amz-date", ""],
    ];
    expect(() => checkPolicy(doc(base), fields({ policy: "p", "x-amz-signature": "s", "x-ignore-me": "1" }), "b", now)).not.toThrow();
    try {
      checkPolicy(doc(base), fields({ "x-amz-meta-owner": "mallory" }), "b", now);
      expect.unreachable();
    } catch (err) {
      expect((err as S3Error).message).toBe("Invalid according to Policy: Extra input fields: x-amz-meta-owner");
    }
  });

  it("refuses a policy that is not a policy", () => {
    expect(code(() => parsePolicy("not base64 json"))).toBe("InvalidPolicyDocument");
    expect(code(() => parsePolicy(policy({ conditions: [] })))).toBe("InvalidPolicyDocument");
    expect(code(() => parsePolicy(policy({ expiration: "2026-01-01T00:00:00Z", conditions: [["lt", "$key", "a"]] })))).toBe("InvalidPolicyDocument");
    expect(code(() => parsePolicy(policy({ expiration: "2026-01-01T00:00:00Z", conditions: [["content-length-range", 10, 1]] })))).toBe(
      "InvalidPolicyDocument",
    );
  });
});

describe("Version 2 presigned URLs", () => {
  const secret = "s3cr3t";
  const now = 1_700_000_000_000;
  const expires = now / 1000 + 300;
  const signed = (method: string, path: string, rawQuery: string, headers: Record<string, string> = {}) =>
    v2Signature(secret, v2StringToSign(method, path, rawQuery, headers, expires));

  it("signs the subresources S3 signs, sorted, and every x-amz-* header the request carries", () => {
    expect(v2StringToSign("GET", "/vol0123456789ab/a.txt", "response-content-type=text%2Fplain&AWSAccessKeyId=K&uploads", { "x-amz-meta-a": " 1 " }, 9)).toBe(
      "GET\n\n\n9\nx-amz-meta-a:1\n/vol0123456789ab/a.txt?response-content-type=text/plain&uploads",
    );
  });

  it("refuses an added header, another path and an expired link", () => {
    const claim = { accessKeyId: "K", expires, signature: signed("PUT", "/vol0123456789ab/drop.txt", "") };
    const req = (headers: Record<string, string>, rawPath = "/vol0123456789ab/drop.txt") => ({ method: "PUT", rawPath, rawQuery: "", headers });
    expect(() => verifyV2(req({}), claim, secret, now)).not.toThrow();
    expect(code(() => verifyV2(req({ "x-amz-copy-source": "/vol0123456789ab/secret.txt" }), claim, secret, now))).toBe("SignatureDoesNotMatch");
    expect(code(() => verifyV2(req({}, "/vol0123456789ab/other.txt"), claim, secret, now))).toBe("SignatureDoesNotMatch");
    expect(code(() => verifyV2(req({}), claim, secret, now + 301_000))).toBe("AccessDenied");
  });
});
