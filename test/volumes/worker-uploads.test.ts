// Large outputs too: an endpoint with largeOutputBytes has an output over it written to its volume, the job's
// output a presigned link to it.
//
// Uploads from workers to svc's own S3 API: a worker of an endpoint with a network volume gets BUCKET_* for a key
// of its own on that volume, and boto3 used as the provider worker SDK's upload helper uses it
// (fixtures/provider-worker/upload.py) lands the file on the volume and answers a presigned URL that downloads it
// from outside. A real build of fixtures/upload-app, real process workers (the runtime from dist/: compile first),
// python3 with boto3, a service whose public address (localhost) is not the one workers are given (127.0.0.1).

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ListObjectsV2Command, PutObjectCommand, S3Client, S3ServiceException } from "@aws-sdk/client-s3";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call, until } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const UPLOAD_PY = join(repo, "fixtures", "provider-worker", "upload.py");
const KEY = "worker-uploads-admin-key";

const hasBoto3 = (() => {
  try {
    execFileSync("python3", ["-c", "import boto3"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

let dir: string;
let service: Service;
let publicUrl: string;
/** The S3 API's own origin, as clients reach it (on the public host). */
let s3Url: string;
let uploader: DeployedEndpoint;
let big: DeployedEndpoint;
let jobBucket: DeployedEndpoint;
let build: Awaited<ReturnType<typeof buildProject>>;
let volume: string;
let elsewhere: string;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

beforeAll(async () => {
  if (!hasBoto3) return;
  dir = mkdtempSync(join(tmpdir(), "svc-worker-uploads-"));
  cpSync(join(repo, "fixtures", "upload-app"), join(dir, "app"), { recursive: true });
  const port = await freePort();
  // Clients reach the service as localhost; workers are given its listening address, 127.0.0.1 (so a link signed for
  // the one is refused on the other).
  publicUrl = `http://localhost:${port}`;
  service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [KEY],
    port,
    publicUrl,
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    // A 30 MB result takes its worker a while to send on a busy machine: a lease of several seconds.
    leaseMs: 15_000,
    heartbeatMs: 1000,
  });
  s3Url = service.s3!.url;
  const create = async (name: string) =>
    (await call(`${service.url}/v2/network-volumes`, { key: KEY, body: { name, size: 10, dataCenter: "local" } })).body.id as string;
  volume = await create("uploads");
  elsewhere = await create("elsewhere");
  build = await buildProject(join(dir, "app"));
  const deployed = await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath });
  uploader = deployed.find((e) => e.name === "uploader")!;
  big = deployed.find((e) => e.name === "big")!;
  jobBucket = deployed.find((e) => e.name === "jobbucket")!;
}, 120_000);
afterAll(async () => {
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

interface Uploaded {
  id: string;
  /** What upload.py answered: the presigned URL, the bucket and key it used. */
  url: string;
  bucket: string;
  key: string;
  /** The digest of the bytes the handler wrote. */
  sha256: string;
  /** The BUCKET_* variables the worker was given. */
  given: { endpointUrl: string; accessKeyId: string; secretAccessKey: string };
}

/** One job of the uploader: a file of `bytes` bytes, handed over with boto3 as `how` says. */
async function uploadJob(how: "image" | "file", bytes: number): Promise<Uploaded> {
  const r = await call(`${uploader.url}/runsync`, { key: KEY, body: { input: { script: UPLOAD_PY, how, bytes } } });
  expect(r.body).toMatchObject({ status: "COMPLETED" });
  return { id: r.body.id as string, ...(r.body.output as Omit<Uploaded, "id">) };
}

function s3As(creds: { accessKeyId: string; secretAccessKey: string }): S3Client {
  return new S3Client({ endpoint: `${service.url}/s3`, region: "us-east-1", forcePathStyle: true, credentials: creds, maxAttempts: 1 });
}

/** The S3 error a call ends with (status and code), or 200 when it succeeds. */
async function s3Outcome(p: Promise<unknown>): Promise<{ status: number | undefined; code: string }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof S3ServiceException) return { status: err.$metadata.httpStatusCode, code: err.name };
    throw err;
  }
  return { status: 200, code: "OK" };
}

/** The outcome of a write with `s3` once it is refused (its worker ended and its key was revoked). */
function refusedOnceRevoked(s3: S3Client): Promise<{ status: number | undefined; code: string }> {
  return until(
    async () => {
      const outcome = await s3Outcome(s3.send(new PutObjectCommand({ Bucket: volume, Key: "after.txt", Body: "late" })));
      return outcome.status === 403 ? outcome : undefined;
    },
    30_000,
    250,
  );
}

/** A GET URL for `key` presigned now with `creds`, by boto3 as the helper presigns. */
function presign(creds: Uploaded["given"], bucket: string, key: string): string {
  const script = [
    "import sys, boto3",
    "from botocore.config import Config",
    "c = boto3.session.Session().client('s3', endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], config=Config(signature_version='s3v4'))",
    "print(c.generate_presigned_url('get_object', Params={'Bucket': sys.argv[4], 'Key': sys.argv[5]}, ExpiresIn=3600))",
  ].join("\n");
  return execFileSync("python3", ["-c", script, creds.endpointUrl, creds.accessKeyId, creds.secretAccessKey, bucket, key], { encoding: "utf8" }).trim();
}

let image: Uploaded | undefined;

it.skipIf(!hasBoto3)(
  "boto3 in a worker puts a file on its endpoint's volume with BUCKET_*, and the presigned URL it answers downloads it from outside",
  async () => {
    image = await uploadJob("image", 200_000);
    // The worker's endpoint is its volume under the public address; the helper's bucket (the month) is a folder in it.
    expect(image.given.endpointUrl).toBe(`${s3Url}/${volume}`);
    expect(image.given.accessKeyId).toMatch(/^SVCW[A-Z2-7]{16}$/);
    expect(image.bucket).toMatch(/^\d\d-\d\d$/);
    expect(image.key).toMatch(new RegExp(`^${image.id}/[0-9a-f]{8}\\.png$`));
    const onVolume = readFileSync(join(dir, "data", "volumes", volume, image.bucket, image.key));
    expect(sha256(onVolume)).toBe(image.sha256);
    // Signed for the public host, which is where a client fetches it: plain HTTP, no credentials.
    expect(image.url.startsWith(`${s3Url}/${volume}/${image.bucket}/${image.key}?X-Amz-Algorithm=AWS4-HMAC-SHA256&`)).toBe(true);
    expect(image.url).toContain("X-Amz-Expires=604800");
    const got = await fetch(image.url);
    expect(got.status).toBe(200);
    expect(sha256(new Uint8Array(await got.arrayBuffer()))).toBe(image.sha256);
    // The same URL asked of the workers' address is another host than it was signed for.
    const internal = await fetch(image.url.replace(s3Url, s3Url.replace("localhost", "127.0.0.1")));
    expect(internal.status).toBe(403);
  },
  60_000,
);

it.skipIf(!hasBoto3)(
  "boto3's upload_file (multipart in 5 MiB parts) lands whole, and its URL downloads it",
  async () => {
    const file = await uploadJob("file", 7 * 1024 * 1024 + 123);
    expect(file.key).toBe(`${file.id}/result.png`);
    const got = await fetch(file.url);
    expect(got.status).toBe(200);
    expect(sha256(new Uint8Array(await got.arrayBuffer()))).toBe(file.sha256);
  },
  60_000,
);

it.skipIf(!hasBoto3)(
  "the worker's key reaches its endpoint's volume only: another volume is 403",
  async () => {
    // A job's worker lives on for its idle timeout (3 s): its key is tried at once.
    const { given } = await uploadJob("image", 1000);
    expect((await s3Outcome(s3As(given).send(new PutObjectCommand({ Bucket: volume, Key: "own.txt", Body: "yes" })))).status).toBe(200);
    const s3 = s3As(given);
    expect(await s3Outcome(s3.send(new PutObjectCommand({ Bucket: elsewhere, Key: "x.txt", Body: "no" })))).toEqual({ status: 403, code: "AccessDenied" });
    expect(await s3Outcome(s3.send(new ListObjectsV2Command({ Bucket: elsewhere })))).toEqual({ status: 403, code: "AccessDenied" });
    // A URL presigned for the other volume's object is refused too.
    expect((await fetch(presign({ ...given, endpointUrl: s3Url }, elsewhere, "x.txt"))).status).toBe(403);
  },
  30_000,
);

it.skipIf(!hasBoto3)(
  "the worker's key is revoked when the worker ends; the links it presigned while it ran still download",
  async () => {
    const given = image!.given;
    const s3 = s3As(given);
    // The uploader idles out after 3 s (workers [0, 1]): from then on its key is refused.
    const refused = await refusedOnceRevoked(s3);
    expect(refused).toEqual({ status: 403, code: "InvalidAccessKeyId" });
    expect(await s3Outcome(s3.send(new ListObjectsV2Command({ Bucket: volume })))).toEqual({ status: 403, code: "InvalidAccessKeyId" });
    // A link signed after the end is refused; the one the job answered still downloads. A URL's date has whole
    // seconds, so one signed in the second the key was revoked may still be served: sign in the next one.
    await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000) + 20));
    expect((await fetch(presign(given, image!.bucket, image!.key))).status).toBe(403);
    const got = await fetch(image!.url);
    expect(got.status).toBe(200);
    expect(sha256(new Uint8Array(await got.arrayBuffer()))).toBe(image!.sha256);
  },
  60_000,
);

/** What the big endpoint answers for `seed` and `bytes`, as JSON text. */
function bigOutput(seed: string, bytes: number): string {
  const unit = `${seed}-0123456789abcdefghijklmnopqrstuvwxyz|`;
  return JSON.stringify({ seed, data: unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes) });
}

it.skipIf(!hasBoto3)(
  "a 30 MB output goes to the volume: the job's output is a presigned link, and it downloads whole",
  async () => {
    const bytes = 30 * 1024 * 1024;
    const run = await call(`${big.url}/run`, { key: KEY, body: { input: { seed: "s30", bytes } } });
    expect(run.status).toBe(200);
    const record = await until(
      async () => {
        const r = (await call(`${big.url}/status/${run.body.id}`, { key: KEY })).body;
        return ["COMPLETED", "FAILED"].includes(r.status) ? r : undefined;
      },
      90_000,
      250,
    );
    expect(record.status).toBe("COMPLETED");
    const expected = Buffer.from(bigOutput("s30", bytes));
    const link = record.output.largeOutput;
    expect(link).toMatchObject({
      bytes: expected.length,
      sha256: sha256(expected),
      contentType: "application/json",
      volumeId: volume,
      key: `outputs/${run.body.id}.json`,
    });
    expect(Object.keys(record.output)).toEqual(["largeOutput"]);
    expect(link.url.startsWith(`${s3Url}/${volume}/outputs/${run.body.id}.json?X-Amz-Algorithm=AWS4-HMAC-SHA256&`)).toBe(true);
    expect(Date.parse(link.expiresAt) - Date.now()).toBeGreaterThan(6.9 * 24 * 3600 * 1000);
    const got = await fetch(link.url);
    expect(got.status).toBe(200);
    expect(sha256(new Uint8Array(await got.arrayBuffer()))).toBe(sha256(expected));
    // The link is for that file only.
    expect((await fetch(link.url.replace(`/outputs/${run.body.id}.json`, "/outputs/other.json"))).status).toBe(403);
  },
  120_000,
);

it.skipIf(!hasBoto3)(
  "an output at most largeOutputBytes stays the job's output",
  async () => {
    const r = await call(`${big.url}/runsync`, { key: KEY, body: { input: { seed: "small", bytes: 1000 } } });
    expect(r.body.status).toBe("COMPLETED");
    expect(JSON.stringify(r.body.output)).toBe(bigOutput("small", 1000));
  },
  60_000,
);

it.skipIf(!hasBoto3)("largeOutputBytes without a network volume is refused at deploy", async () => {
  const resources = { ...build.manifest.resources, big: { ...build.manifest.resources.big!, volume: null } };
  await expect(
    service.deploy({ app: build.manifest.app, env: "novolume", manifest: { ...build.manifest, resources }, artifactPath: build.artifactPath }),
  ).rejects.toThrow(/large outputs/);
});

it.skipIf(!hasBoto3)(
  "a job whose s3Config names one of the owner's volumes: its worker gets a key of its own on it (never the caller's), uploads as the helper does, and the key ends with the worker",
  async () => {
    const callers = { accessId: "CALLERSKEY", accessSecret: "callers-secret", bucketName: volume, endpointUrl: "https://s3.elsewhere.example" };
    const r = await call(`${jobBucket.url}/runsync`, { key: KEY, body: { input: { script: UPLOAD_PY, bytes: 4096 }, s3Config: callers } });
    expect(r.body).toMatchObject({ status: "COMPLETED" });
    const out = r.body.output as { url: string; bucket: string; key: string; sha256: string; s3Config: Record<string, string> };
    // svc's S3 API, the volume as the bucket, a key minted for this worker: none of the caller's values but the bucket.
    expect(out.s3Config).toMatchObject({ bucketName: volume, endpointUrl: s3Url });
    expect(out.s3Config.accessId).not.toBe(callers.accessId);
    expect(out.s3Config.accessSecret).not.toBe(callers.accessSecret);
    expect(out.bucket).toBe(volume);
    // On the volume: the owner's admin key lists it; the link the handler presigned downloads it from outside.
    const admin = await call(`${service.url}/v1/volume-keys`, { key: KEY, body: { name: "lister", volumeIds: [volume] } });
    const lister = s3As({ accessKeyId: admin.body.accessKeyId, secretAccessKey: admin.body.secretAccessKey });
    const listed = await lister.send(new ListObjectsV2Command({ Bucket: volume, Prefix: `${r.body.id}/` }));
    expect(listed.Contents?.map((o) => o.Key)).toEqual([out.key]);
    const got = await fetch(out.url);
    expect(got.status).toBe(200);
    expect(sha256(new Uint8Array(await got.arrayBuffer()))).toBe(out.sha256);
    // A job without s3Config gets none.
    expect((await call(`${jobBucket.url}/runsync`, { key: KEY, body: { input: {} } })).body.output).toEqual({ s3Config: null });
    // The key reaches that volume only, and is revoked when the worker idles out (3 s).
    const s3 = s3As({ accessKeyId: out.s3Config.accessId!, secretAccessKey: out.s3Config.accessSecret! });
    expect(await s3Outcome(s3.send(new PutObjectCommand({ Bucket: elsewhere, Key: "x.txt", Body: "no" })))).toEqual({ status: 403, code: "AccessDenied" });
    const refused = await refusedOnceRevoked(s3);
    expect(refused).toEqual({ status: 403, code: "InvalidAccessKeyId" });
  },
  90_000,
);
