// One network volume, one set of files, whichever driver runs its workers: a real service with process workers
// writes a file on a volume and takes a file uploaded through the S3 API; the same data directory served with
// Docker workers reads both, its container writes one, and the S3 API hands that one back. A real build of
// fixtures/volume-app; the worker runtime from dist/ (compile first) inside the locally built image.

import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { buildProject, type BuildResult } from "../../src/build/index.js";
import { createDockerDriver, type DockerDriver } from "../../src/drivers/docker.js";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";
import { describeDocker, docker, engineUp, leftovers } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "docker-volume-admin-key";
let dir: string;
let dataDir: string;
let build: BuildResult;
let service: Service | undefined;
let driver: DockerDriver | undefined;
let volume: string;
let key: { accessKeyId: string; secretAccessKey: string; endpoint: string; region: string };

async function start(workers: "process" | "docker"): Promise<Record<string, DeployedEndpoint>> {
  if (workers === "docker") {
    driver = createDockerDriver({ networkScope: "session", volumeLifetime: "session" });
    await driver.prepare(["cpu"]);
  }
  service = await startService({
    dataDir,
    apiKeys: [KEY],
    driver: driver ?? createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 3000,
    heartbeatMs: 500,
  });
  const deployed = await service.deploy({ app: build.manifest.app, env: "test", manifest: build.manifest, artifactPath: build.artifactPath });
  return Object.fromEntries(deployed.map((e) => [e.name, e]));
}

const s3 = () => new S3Client({ endpoint: `${service!.url}/s3`, region: key.region, forcePathStyle: true, credentials: key, maxAttempts: 1 });
const runsync = (e: DeployedEndpoint, input: unknown) => call(`${e.url}/runsync?wait=90000`, { key: KEY, body: { input } });

beforeAll(async () => {
  if (!engineUp) return;
  dir = mkdtempSync(join(tmpdir(), "svc-docker-volume-"));
  dataDir = join(dir, "data");
  cpSync(join(repo, "fixtures", "volume-app"), join(dir, "app"), { recursive: true });
  build = await buildProject(join(dir, "app"));
}, 60_000);

afterAll(async () => {
  await service?.close();
  if (driver) await cleanupStale({ [LABELS.session]: driver.session }, { docker }).catch(() => undefined);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describeDocker("a network volume under process and Docker workers", () => {
  it("what a process worker wrote and what S3 uploaded, a Docker worker reads; what it writes, S3 downloads", async () => {
    let endpoints = await start("process");
    volume = (await call(`${service!.url}/v2/network-volumes`, { key: KEY })).body[0].id;
    key = (await call(`${service!.url}/v1/volume-keys`, { key: KEY, body: {} })).body;
    await s3().send(new PutObjectCommand({ Bucket: volume, Key: "models/weights.txt", Body: "uploaded through S3" }));
    const wrote = await runsync(endpoints.writer!, { file: "from-process.txt", text: "written by a process worker" });
    expect(wrote.body).toMatchObject({ status: "COMPLETED", output: { volume: join(dataDir, "volumes", volume) } });
    await service!.close();
    service = undefined;

    endpoints = await start("docker");
    const viaS3 = await runsync(endpoints.reader!, { file: "models/weights.txt" });
    expect(viaS3.body).toMatchObject({ status: "COMPLETED", output: { text: "uploaded through S3", volume: "/svc-volume" } });
    const fromProcess = await runsync(endpoints.reader!, { file: "from-process.txt" });
    expect(fromProcess.body).toMatchObject({ status: "COMPLETED", output: { text: "written by a process worker" } });

    // Into a folder the S3 API made, as the container's own (non-root) user.
    const fromDocker = await runsync(endpoints.writer!, { file: "models/from-docker.txt", text: "written by a Docker worker" });
    expect(fromDocker.body).toMatchObject({ status: "COMPLETED" });
    const got = await s3().send(new GetObjectCommand({ Bucket: volume, Key: "models/from-docker.txt" }));
    expect(await got.Body!.transformToString()).toBe("written by a Docker worker");
    expect(readFileSync(join(dataDir, "volumes", volume, "models", "from-docker.txt"), "utf8")).toBe("written by a Docker worker");
    // No Docker volume holds a second copy.
    expect((await leftovers(driver!.session)).volumes).toEqual([]);
  }, 300_000);
});
