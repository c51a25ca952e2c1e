// What goes up through the S3 API is what workers read, and what workers write comes down through it: a real
// build of fixtures/volume-app (a writer and a reader endpoint on one volume), real process workers (the runtime
// from dist/: compile first), the AWS SDK for the S3 side.

import { afterAll, beforeAll, expect, it } from "vitest";
import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import type { DeployedEndpoint } from "../../src/service/index.js";
import { call } from "../service/helpers.js";
import { startVolumeAppService, type VolumeApp } from "./volume-app.js";

const KEY = "volume-s3-admin-key";
let app: VolumeApp;
let endpoints: Record<string, DeployedEndpoint>;
let volume: string;
let s3: S3Client;

beforeAll(async () => {
  app = await startVolumeAppService(KEY);
  endpoints = app.endpoints;
  volume = app.volume.id;
  const k = (await call(`${app.service.url}/v1/volume-keys`, { key: KEY, body: {} })).body;
  s3 = new S3Client({
    endpoint: k.endpoint,
    region: k.region,
    forcePathStyle: true,
    credentials: { accessKeyId: k.accessKeyId, secretAccessKey: k.secretAccessKey },
    maxAttempts: 1,
  });
}, 60_000);
afterAll(async () => {
  await app?.close();
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
