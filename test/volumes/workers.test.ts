// What goes up through the S3 API is what workers read, and what workers write comes down through it: a real
// build of fixtures/volume-app (a writer and a reader endpoint on one volume), real process workers (the runtime
// from dist/: compile first), the AWS SDK for the S3 side.

import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "volume-s3-admin-key";
let dir: string;
let service: Service;
let endpoints: Record<string, DeployedEndpoint>;
let volume: string;
let s3: S3Client;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-volume-s3-workers-"));
  cpSync(join(repo, "fixtures", "volume-app"), join(dir, "app"), { recursive: true });
  service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [KEY],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
  });
  volume = (await call(`${service.url}/v2/network-volumes`, { key: KEY, body: { name: "shared-data", size: 10, dataCenter: "local" } })).body.id;
  const build = await buildProject(join(dir, "app"));
  endpoints = Object.fromEntries((await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath })).map((e) => [e.name, e]));
  const k = (await call(`${service.url}/v1/volume-keys`, { key: KEY, body: {} })).body;
  s3 = new S3Client({ endpoint: k.endpoint, region: k.region, forcePathStyle: true, credentials: { accessKeyId: k.accessKeyId, secretAccessKey: k.secretAccessKey }, maxAttempts: 1 });
}, 60_000);
afterAll(async () => {
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it("a process worker reads a file uploaded through S3, and a file a worker wrote downloads through S3", async () => {
  await s3.send(new PutObjectCommand({ Bucket: volume, Key: "models/weights.txt", Body: "weights uploaded with the AWS SDK" }));
  const read = await call(`${endpoints.reader!.url}/runsync`, { key: KEY, body: { input: { file: "models/weights.txt" } } });
  expect(read.body).toMatchObject({ status: "COMPLETED", output: { text: "weights uploaded with the AWS SDK" } });

  const wrote = await call(`${endpoints.writer!.url}/runsync`, { key: KEY, body: { input: { file: "models/result.txt", text: "written by a worker" } } });
  expect(wrote.body).toMatchObject({ status: "COMPLETED" });
  const got = await s3.send(new GetObjectCommand({ Bucket: volume, Key: "models/result.txt" }));
  expect(await got.Body!.transformToString()).toBe("written by a worker");
}, 60_000);
