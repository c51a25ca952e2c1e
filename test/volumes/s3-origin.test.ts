// The S3 API on an origin of its own: a real service listening on two ports of 127.0.0.1. S3 clients are given
// the S3 port, where buckets are at the root (path-style) and nothing else is served; the /s3 prefix of the
// service's port keeps working for clients configured with it, but there no object can be asked to come back as
// a type a browser runs (response-content-type=text/html is refused), while the S3 origin serves it as an inert
// download.

import { afterAll, beforeAll, expect, it } from "vitest";
import { GetObjectCommand, ListBucketsCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { call, startTestService, type TestService } from "../service/helpers.js";
import { s3Request, s3Signer } from "./s3-signing.js";

let t: TestService;
let volume: string;
let key: { accessKeyId: string; secretAccessKey: string; endpoint: string; region: string };

const client = (endpoint: string) =>
  new S3Client({
    endpoint,
    region: key.region,
    forcePathStyle: true,
    credentials: { accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey },
    maxAttempts: 1,
  });

/** A presigned GET of `path` at `origin` (as @aws-sdk/s3-request-presigner makes one), with `query` signed in. */
async function presigned(origin: string, path: string, query: Record<string, string> = {}): Promise<string> {
  const request = { ...s3Request(origin, "GET", path, { "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD" }), query };
  const p = await s3Signer(key).presign(request, { expiresIn: 300 });
  const q = Object.entries(p.query!)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join("&");
  return `${origin}${p.path}?${q}`;
}

beforeAll(async () => {
  t = await startTestService();
  volume = (await call(`${t.service.url}/v2/network-volumes`, { key: t.key, body: { name: "site", size: 10, dataCenter: "local" } })).body.id;
  key = (await call(`${t.service.url}/v1/volume-keys`, { key: t.key, body: {} })).body;
});
afterAll(async () => {
  await t?.close();
});

it("gives S3 clients an origin of its own, with buckets at the root", async () => {
  expect(t.service.s3).toBeDefined();
  const s3Url = t.service.s3!.url;
  expect(key.endpoint).toBe(s3Url);
  expect(new URL(s3Url).origin).not.toBe(new URL(t.service.url).origin);
  const s3 = client(s3Url);
  expect((await s3.send(new ListBucketsCommand({}))).Buckets!.map((b) => b.Name)).toEqual([volume]);
  await s3.send(new PutObjectCommand({ Bucket: volume, Key: "index.html", Body: "<script>document.title='ran'</script>" }));
  const got = await s3.send(new GetObjectCommand({ Bucket: volume, Key: "index.html" }));
  expect(await got.Body!.transformToString()).toContain("<script>");
  // Path-style at the root: the request line is /<volume>/<key>.
  const url = await presigned(s3Url, `/${volume}/index.html`);
  expect(new URL(url).pathname).toBe(`/${volume}/index.html`);
  expect((await fetch(url)).status).toBe(200);
});

it("serves nothing of the console or the job API on the S3 origin", async () => {
  const s3Url = t.service.s3!.url;
  for (const path of ["/console/", "/v2/network-volumes", "/health"]) {
    const r = await fetch(`${s3Url}${path}`, { headers: { authorization: `Bearer ${t.key}` } });
    expect(r.headers.get("content-type")).toBe("application/xml");
    expect(await r.text()).toContain("<Code>NoSuchBucket</Code>");
  }
  expect((await fetch(`${t.service.url}/console/`)).headers.get("content-type")).toContain("text/html");
});

it("keeps the /s3 prefix of the service's port working for clients configured with it", async () => {
  const legacy = client(`${t.service.url}/s3`);
  const got = await legacy.send(new GetObjectCommand({ Bucket: volume, Key: "index.html" }));
  expect(await got.Body!.transformToString()).toContain("<script>");
  const plain = await fetch(await presigned(t.service.url, `/s3/${volume}/index.html`, { "response-content-type": "text/plain" }));
  expect(plain.status).toBe(200);
  expect(plain.headers.get("content-type")).toBe("text/plain");
});

it("refuses an active response-content-type on the console's origin, and serves it inert on the S3 origin", async () => {
  for (const type of ["text/html", "image/svg+xml", "application/xhtml+xml", "text/javascript", "application/pdf", "text/html; charset=utf-8", "nonsense"]) {
    const shared = await fetch(await presigned(t.service.url, `/s3/${volume}/index.html`, { "response-content-type": type }));
    expect(shared.status).toBe(400);
    const text = await shared.text();
    expect(text).toContain("<Code>InvalidArgument</Code>");
    expect(text).toContain("<ArgumentName>response-content-type</ArgumentName>");
    // The refusal names where to ask instead.
    expect(text).toContain(t.service.s3!.url);
  }
  const own = await fetch(await presigned(t.service.s3!.url, `/${volume}/index.html`, { "response-content-type": "text/html" }));
  expect(own.status).toBe(200);
  expect(own.headers.get("content-type")).toBe("text/html");
  expect(own.headers.get("content-disposition")).toBe("attachment");
  expect(own.headers.get("content-security-policy")).toContain("sandbox");
  expect(own.headers.get("x-content-type-options")).toBe("nosniff");
});

it("answers CreateBucket of a volume the caller has with 200, and of another user's with AccessDenied", async () => {
  const signer = s3Signer(key);
  const put = async (bucket: string) => {
    const signed = await signer.sign(s3Request(t.service.s3!.url, "PUT", `/${bucket}`, { "x-amz-content-sha256": "UNSIGNED-PAYLOAD" }));
    return fetch(`${t.service.s3!.url}/${bucket}`, { method: "PUT", headers: signed.headers as Record<string, string> });
  };
  expect((await put(volume)).status).toBe(200);
  const bob = (await call(`${t.service.url}/v1/keys`, { key: t.key, body: { name: "bob", userId: "bob", scopes: ["admin"] } })).body.key;
  const bobs = (await call(`${t.service.url}/v2/network-volumes`, { key: bob, body: { name: "bobs", size: 10, dataCenter: "local" } })).body.id;
  const other = await put(bobs);
  expect(other.status).toBe(403);
  expect(await other.text()).toContain("<Code>AccessDenied</Code>");
  // A bucket that is no volume is made with the management API, not here.
  const missing = await put("vol000000000000");
  expect(missing.status).toBe(501);
});

it("the S3 API's default port taken: it listens on a free one and says so; a port the operator chose taken is an error", async () => {
  const { createServer } = await import("node:net");
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  const taken = (holder.address() as { port: number }).port;
  const said: string[] = [];
  try {
    const moved = await startTestService({ s3Port: taken, s3PortIsDefault: true, log: (line: string) => said.push(line) });
    try {
      expect(moved.service.s3!.port).not.toBe(taken);
      expect((await fetch(`${moved.service.s3!.url}/`)).status).toBe(403);
      expect(said.join("\n")).toContain(`the S3 API's default port ${taken} is taken: it listens on a free port instead`);
    } finally {
      await moved.close();
    }
    await expect(startTestService({ s3Port: taken })).rejects.toThrow(`The S3 API cannot listen on port ${taken}`);
  } finally {
    await new Promise((resolve) => holder.close(resolve));
  }
});
