// A worker that cannot see the service's disk (a container on a cluster, another machine) downloads its
// endpoint's artifact over HTTP with its worker token: a real runtime process given only the URL runs jobs; the
// route serves a worker nothing but its own endpoint's artifact.

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { artifactUrl } from "../../src/service/artifacts/route.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { JobsClient } from "svc/internal";
import { call } from "../service/helpers.js";
import { buildTestArtifact, FIXTURE_ENDPOINTS, RUNTIME_ENTRY } from "./artifact.js";

const KEY = "svc_test_artifact_url_key_0123";
let work: string;
let service: Service;
let single: DeployedEndpoint;
let other: DeployedEndpoint;
let worker: ChildProcess | undefined;
let url: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-artifact-url-"));
  const artifact = await buildTestArtifact(
    join(work, "artifact.tar.gz"),
    {},
    undefined,
    FIXTURE_ENDPOINTS.filter((e) => e.name === "single" || e.name === "counter"),
  );
  service = await startService({ dataDir: join(work, "data"), apiKeys: [KEY] });
  const deployed = await service.deploy({ app: "remote", env: "test", manifest: artifact.manifest, artifactPath: artifact.path });
  single = deployed.find((e) => e.name === "single")!;
  other = deployed.find((e) => e.name === "counter")!;
  const rows = (await call(`${service.url}/v1/apps/remote/environments/test`, { key: KEY })).body;
  expect(rows.build).toMatch(/^[a-f0-9]{64}$/);
  url = `${service.url}/_worker/v1/artifacts/${rows.build}`;
}, 60_000);

afterAll(async () => {
  worker?.kill("SIGKILL");
  await service?.close();
  await rm(work, { recursive: true, force: true });
});

it("runs jobs on a worker that got only the artifact's URL", async () => {
  const { id, key } = await service.mintKey({ scopes: [`worker:${single.id}`] });
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH };
  Object.assign(env, {
    SVC_API_URL: service.url,
    SVC_WORKER_ID: id,
    SVC_WORKER_TOKEN: key,
    SVC_ENDPOINT_ID: single.id,
    SVC_ENDPOINT_NAME: "single",
    SVC_ARTIFACT: url,
    SVC_ARTIFACT_CACHE: join(work, "remote-cache"),
  });
  worker = spawn(process.execPath, [RUNTIME_ENTRY], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  worker.stderr!.on("data", (d) => (stderr += d));
  const record = await new JobsClient(single.url, KEY).runsync({ hello: "from afar" }, { wait: 30_000 });
  expect(record, stderr).toMatchObject({ status: "COMPLETED", output: { echo: { hello: "from afar" } } });
}, 60_000);

it("serves a worker only its own endpoint's artifact, to worker tokens only, with GET", async () => {
  const own = await service.mintKey({ scopes: [`worker:${single.id}`] });
  const ok = await fetch(url, { headers: { authorization: `Bearer ${own.key}` } });
  expect(ok.status).toBe(200);
  expect(ok.headers.get("content-type")).toBe("application/gzip");
  expect((await ok.arrayBuffer()).byteLength).toBe(Number(ok.headers.get("content-length")));
  // The same build serves the other endpoint of the app: its worker gets it too; another sha does not exist.
  const sibling = await service.mintKey({ scopes: [`worker:${other.id}`] });
  expect((await fetch(url, { headers: { authorization: `Bearer ${sibling.key}` } })).status).toBe(200);
  expect((await call(url.replace(/[a-f0-9]{64}$/, "0".repeat(64)), { key: own.key })).status).toBe(404);
  // Another app's worker (another build) gets nothing of this one.
  const otherBuild = await buildTestArtifact(
    join(work, "other.tar.gz"),
    { single: { workersMax: 2 } },
    undefined,
    FIXTURE_ENDPOINTS.filter((e) => e.name === "single"),
  );
  const [stranger] = await service.deploy({ app: "stranger", env: "test", manifest: otherBuild.manifest, artifactPath: otherBuild.path });
  const strangerKey = await service.mintKey({ scopes: [`worker:${stranger!.id}`] });
  expect((await call(url, { key: strangerKey.key })).status).toBe(404);
  expect((await call(url, { key: KEY })).status).toBe(403);
  const post = await call(url, { key: own.key, method: "POST" });
  expect(post.status).toBe(405);
  expect(post.headers.get("allow")).toBe("GET, HEAD");
  expect(artifactUrl("http://h:1/", "/data/artifacts/" + "a".repeat(64) + ".tar.gz")).toBe(`http://h:1/_worker/v1/artifacts/${"a".repeat(64)}`);
});
