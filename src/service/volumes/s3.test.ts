import { describe, expect, it } from "vitest";
import { S3Error } from "./s3-errors.js";
import { parseCompleteParts, parseDelete, xmlDecode } from "./s3-xml.js";
import { copySource, listedKey, objectHeaders, parseRange } from "./s3.js";
import { checkTime, parseAmzDate, parseQuery, readSignature } from "./sigv4.js";
import { inside, keySegments } from "./volume-fs.js";
import { planVolumeKey } from "./keys.js";
import { testVolumeGbBytes, VolumeUsage } from "./usage.js";

const code = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return (err as S3Error).code;
  }
  return undefined;
};

describe("keys as paths", () => {
  it("keeps keys inside the volume", () => {
    expect(keySegments("models/llama/w.bin")).toEqual({ segments: ["models", "llama", "w.bin"], folder: false });
    expect(keySegments("models/")).toEqual({ segments: ["models"], folder: true });
    for (const bad of ["../x", "a/../../x", "a//b", "/abs", "a/./b", "..", "", ".svc-multipart/x", "a/.svc-upload-1", "a\0b"])
      expect(code(() => keySegments(bad))).toBe("InvalidArgument");
    expect(inside("/data/v", "/data/v")).toBe(true);
    expect(inside("/data/v", "/data/v/a")).toBe(true);
    expect(inside("/data/v", "/data/v2/a")).toBe(false);
  });
});

describe("ranges", () => {
  it("reads S3's forms, and refuses what cannot be satisfied", () => {
    expect(parseRange("bytes=0-3", 10)).toEqual({ start: 0, end: 3 });
    expect(parseRange("bytes=5-", 10)).toEqual({ start: 5, end: 9 });
    expect(parseRange("bytes=-4", 10)).toEqual({ start: 6, end: 9 });
    expect(parseRange("bytes=2-99", 10)).toEqual({ start: 2, end: 9 });
    expect(parseRange("bytes=0-1,4-5", 10)).toBeUndefined();
    expect(parseRange(undefined, 10)).toBeUndefined();
    expect(code(() => parseRange("bytes=10-", 10))).toBe("InvalidRange");
    expect(code(() => parseRange("bytes=-0", 10))).toBe("InvalidRange");
  });
});

describe("request documents", () => {
  it("reads DeleteObjects and CompleteMultipartUpload bodies", () => {
    expect(
      parseDelete(
        '<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet><Object><Key>a &amp; b</Key></Object><Object><Key>c&#x2F;d</Key></Object></Delete>',
      ),
    ).toEqual({ keys: ["a & b", "c/d"], quiet: true });
    expect(
      parseCompleteParts(
        '<CompleteMultipartUpload><Part><ETag>"x-1"</ETag><PartNumber>1</PartNumber></Part><Part><PartNumber>2</PartNumber><ETag>&quot;y-1&quot;</ETag></Part></CompleteMultipartUpload>',
      ),
    ).toEqual([
      { partNumber: 1, etag: '"x-1"' },
      { partNumber: 2, etag: '"y-1"' },
    ]);
    expect(code(() => parseDelete("<Delete></Delete>"))).toBe("MalformedXML");
    expect(code(() => xmlDecode("&bogus;"))).toBe("MalformedXML");
  });
  it("reads x-amz-copy-source, and percent-encodes listed keys on request", () => {
    expect(copySource("/vol0123456789ab/a%20b/c.txt?versionId=1")).toEqual({ bucket: "vol0123456789ab", key: "a b/c.txt" });
    expect(code(() => copySource("vol0123456789ab"))).toBe("InvalidArgument");
    expect(listedKey("a b+c/d.txt", true)).toBe("a%20b%2Bc/d.txt");
    expect(listedKey("a b", false)).toBe("a b");
  });
});

describe("signatures", () => {
  const headers = {
    authorization:
      "AWS4-HMAC-SHA256 Credential=SVCAAAAAAAAAAAAAAAAA/20250102/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=abc",
    "x-amz-date": "20250102T030405Z",
    "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
    host: "h",
  };
  it("reads the header form and the presigned form", () => {
    const claim = readSignature({ method: "GET", rawPath: "/s3/x", rawQuery: "", headers }, {})!;
    expect(claim).toMatchObject({
      form: "header",
      accessKeyId: "SVCAAAAAAAAAAAAAAAAA",
      region: "us-east-1",
      service: "s3",
      signedHeaders: ["host", "x-amz-content-sha256", "x-amz-date"],
      signature: "abc",
      payloadHash: "UNSIGNED-PAYLOAD",
    });
    expect(claim.date.toISOString()).toBe("2025-01-02T03:04:05.000Z");
    const query = parseQuery(
      "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=K%2F20250102%2Feu%2Fs3%2Faws4_request&X-Amz-Date=20250102T030405Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=def",
    );
    expect(readSignature({ method: "GET", rawPath: "/s3/x", rawQuery: "", headers: {} }, query)).toMatchObject({
      form: "query",
      accessKeyId: "K",
      region: "eu",
      expiresSeconds: 60,
      payloadHash: "UNSIGNED-PAYLOAD",
    });
    expect(readSignature({ method: "GET", rawPath: "/s3/x", rawQuery: "", headers: {} }, {})).toBeUndefined();
  });
  it("refuses malformed claims, other times and Signature Version 2", () => {
    expect(code(() => readSignature({ method: "GET", rawPath: "/", rawQuery: "", headers: { ...headers, "x-amz-date": "20250103T000000Z" } }, {}))).toBe(
      "AuthorizationHeaderMalformed",
    );
    expect(code(() => readSignature({ method: "GET", rawPath: "/", rawQuery: "", headers: { ...headers, "x-amz-content-sha256": undefined } }, {}))).toBe(
      "InvalidRequest",
    );
    expect(code(() => readSignature({ method: "GET", rawPath: "/", rawQuery: "", headers: { authorization: "AWS K:sig" } }, {}))).toBe("InvalidRequest");
    expect(code(() => readSignature({ method: "GET", rawPath: "/", rawQuery: "", headers: {} }, parseQuery("AWSAccessKeyId=K&Signature=s&Expires=1")))).toBe(
      "InvalidRequest",
    );
    const claim = readSignature({ method: "GET", rawPath: "/s3/x", rawQuery: "", headers }, {})!;
    expect(code(() => checkTime(claim, claim.date.getTime() + 16 * 60 * 1000))).toBe("RequestTimeTooSkewed");
    expect(code(() => checkTime(claim, claim.date.getTime() + 14 * 60 * 1000))).toBeUndefined();
    expect(parseAmzDate("2025-01-02")).toBeUndefined();
    expect(parseQuery("a=1&a=2&b&c=%2B+")).toEqual({ a: ["1", "2"], b: "", c: "++" });
  });
});

describe("access keys and sizes", () => {
  it("plans a key: read-only or not, for the user's own volumes only", () => {
    expect(planVolumeKey({}, ["v1"]).key).toEqual({ name: null, readOnly: false, volumeIds: null });
    expect(planVolumeKey({ readOnly: true, volumeIds: ["v1", "v1"], name: "ci" }, ["v1"]).key).toEqual({ name: "ci", readOnly: true, volumeIds: ["v1"] });
    expect(planVolumeKey({ volumeIds: ["v2"], readOnly: "yes", extra: 1 }, ["v1"]).errors).toEqual([
      "$.extra: is not a volume key setting (name, readOnly, volumeIds)",
      "$.readOnly: must be true or false",
      '$.volumeIds[0]: "v2" is not one of your network volumes',
    ]);
  });
  it("reserves bytes within the size, parallel writes included", async () => {
    const usage = new VolumeUsage(100);
    const volume = { id: "v", size: 1 };
    const release = await usage.reserve(volume, "/nonexistent", 60);
    await expect(usage.reserve(volume, "/nonexistent", 50)).rejects.toMatchObject({ code: "EntityTooLarge" });
    release(60);
    await expect(usage.reserve(volume, "/nonexistent", 50, 20)).resolves.toBeTypeOf("function");
    expect(testVolumeGbBytes({ SVC_TEST_VOLUME_GB_BYTES: "1048576" })).toBe(1048576);
    expect(testVolumeGbBytes({})).toBeUndefined();
    expect(() => testVolumeGbBytes({ SVC_TEST_VOLUME_GB_BYTES: "1GB" })).toThrow(/positive whole number/);
  });
});

describe("an object's answer in a browser", () => {
  const stat = { size: 5, mtimeMs: 0, etag: '"e"' };
  it("never serves active content inline, whatever the query asks", () => {
    for (const type of ["text/html", "image/svg+xml", "application/xhtml+xml", "text/javascript", "application/pdf", "text/html; charset=utf-8"]) {
      const h = objectHeaders(stat, { "response-content-type": type, "response-content-disposition": 'inline; filename="x.html"' });
      expect(h["content-type"]).toBe(type);
      expect(h["content-disposition"]).toBe('attachment; filename="x.html"');
    }
    expect(objectHeaders(stat, { "response-content-type": "text/html" })["content-disposition"]).toBe("attachment");
  });

  it("shows images and plain text inline when asked, and keeps everything inert and unsniffed", () => {
    const png = objectHeaders(stat, { "response-content-type": "image/png" });
    expect(png["content-disposition"]).toBeUndefined();
    expect(objectHeaders(stat, { "response-content-type": "text/plain", "response-content-disposition": "inline" })["content-disposition"]).toBe("inline");
    for (const h of [png, objectHeaders(stat, {})]) {
      expect(h["x-content-type-options"]).toBe("nosniff");
      expect(h["content-security-policy"]).toMatch(/^sandbox; default-src 'none'/);
    }
  });
});
