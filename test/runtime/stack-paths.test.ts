// A failed job's errorStack names the user's real files: a project that links svc (node_modules/svc is a
// symlink to this checkout's SDK, packages/svc), built by the real `svc build` code and run by real process
// workers. Its own frames are project-relative paths that exist in the project; svc's own frames are left out.

import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { JobsClient } from "svc/internal";
import { startService, type Service } from "../../src/service/index.js";
import { REPO } from "../lb/harness.js";

let work: string;
let project: string;
let service: Service;
let driver: WorkerDriver;
let url: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-stack-paths-"));
  project = join(work, "stack-app");
  cpSync(join(REPO, "fixtures", "stack-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(REPO, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  const built = await buildProject(project);
  driver = createProcessDriver({ cacheDir: join(work, "cache") });
  service = await startService({ dataDir: join(work, "data"), apiKeys: ["k"], driver });
  const [endpoint] = await service.deploy({ app: "stack-app", env: "test", manifest: built.manifest, artifactPath: built.artifactPath });
  url = endpoint!.url;
}, 120_000);

afterAll(async () => {
  await service?.close();
  await driver?.close();
  rmSync(work, { recursive: true, force: true });
});

it("names the project's file and line, relative to the project, and leaves svc's own frames out", async () => {
  const record = await new JobsClient(url, "k").runsync<unknown>({ n: 5 }, { wait: 30_000 });
  expect(record).toMatchObject({ status: "FAILED", error: "too big: 5", errorType: "RangeError" });
  const frames = String(record.errorStack)
    .split("\n")
    .slice(1)
    .map((l) => /\((.+):(\d+):(\d+)\)$/.exec(l.trim())?.[1])
    .filter((f): f is string => f !== undefined);
  expect(String(record.errorStack)).toContain("at deeper (src/boom.ts:5:20)");
  expect(String(record.errorStack)).toContain("at boom (src/boom.ts:10:15)");
  // Only the user's frames by default (SVC_FULL_STACKS=1 in the endpoint's env keeps svc's own).
  expect(String(record.errorStack)).not.toMatch(/runtime\/loop\.js|packages\/svc\/|node:internal/);
  for (const file of frames) {
    if (file.startsWith("node:")) continue;
    const path = file.startsWith("file://") ? new URL(file).pathname : file.startsWith("/") ? file : join(project, file);
    expect({ file, exists: existsSync(path) }).toEqual({ file, exists: true });
  }
}, 60_000);
