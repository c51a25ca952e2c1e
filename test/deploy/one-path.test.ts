// svc dev's in-process deploy (Service.deploy) and the HTTP activation go the same way (deploy/deployments.ts):
// each tells the management layer the app changed, so REST endpoints running its code follow, and each answers
// only once the workers of the endpoints it removed have exited. The workers come from a fake driver that
// registers them over the worker protocol, as the runtime does once a handler loaded.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import tarStream from "tar-stream";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch } from "../../src/drivers/types.js";
import type { ManifestResource } from "svc/internal";
import { startService, type Service } from "../../src/service/index.js";
import { Management } from "../../src/service/management/index.js";
import { call, manifest, resource } from "../service/helpers.js";

const KEY = "one-path-admin-key";

class RegisteringDriver implements WorkerDriver {
  readonly name = "process" as const;
  readonly started: WorkerLaunch[] = [];
  readonly exited: string[] = [];
  private readonly ends: Array<() => void> = [];

  async start(launch: WorkerLaunch): Promise<WorkerHandle> {
    this.started.push(launch);
    let exit!: (e: WorkerExit) => void;
    const exited = new Promise<WorkerExit>((resolve) => (exit = resolve));
    const end = (e: WorkerExit) => {
      if (!this.exited.includes(launch.workerId)) this.exited.push(launch.workerId);
      exit(e);
    };
    this.ends.push(() => end({ code: null, signal: "SIGKILL" }));
    setImmediate(() => {
      void fetch(`${launch.apiUrl}/_worker/v1/register`, {
        method: "POST",
        headers: { authorization: `Bearer ${launch.workerToken}`, "content-type": "application/json" },
        body: JSON.stringify({ workerId: launch.workerId, pid: process.pid, concurrency: 1 }),
      }).then((r) => r.text());
    });
    return {
      workerId: launch.workerId,
      exited,
      // A worker takes a moment to finish once asked: an answer given before it exited would show here.
      stop: async () => {
        setTimeout(() => end({ code: 0, signal: null }), 300);
        return exited;
      },
      kill: () => end({ code: null, signal: "SIGKILL" }),
    };
  }

  async close(): Promise<void> {
    for (const end of this.ends) end();
  }
}

async function tarGz(files: Record<string, string>): Promise<Buffer> {
  const pack = tarStream.pack();
  for (const [name, text] of Object.entries(files)) pack.entry({ name }, text);
  pack.finalize();
  const parts: Buffer[] = [];
  for await (const chunk of pack) parts.push(chunk as Buffer);
  return gzipSync(Buffer.concat(parts));
}

let dir: string;
let driver: RegisteringDriver;
let service: Service;
/** How often the management layer heard that an app changed (counted on the class: the service makes its own). */
let appChanged = 0;
const told = Management.prototype.appChanged;
Management.prototype.appChanged = function (this: Management) {
  appChanged++;
  return told.call(this);
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-one-path-"));
  driver = new RegisteringDriver();
  service = await startService({ dataDir: join(dir, "data"), driver, apiKeys: [KEY] });
});

afterAll(async () => {
  await driver.close();
  await service?.close();
  Management.prototype.appChanged = told;
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => (appChanged = 0));

const endpoints = (old: boolean): Record<string, ManifestResource> => ({ api: resource(), ...(old ? { old: resource({ workersMin: 1 }) } : {}) });

function workerOf(app: string, env: string, name: string): string {
  return driver.started.find((l) => l.app === app && l.env === env && l.endpointName === name)!.workerId;
}

/** Upload a build of these endpoints over HTTP; its sha256. */
async function upload(app: string, fingerprint: string, resources: Record<string, ManifestResource>): Promise<string> {
  const bytes = await tarGz({ "svc_manifest.json": JSON.stringify({ ...manifest(resources, app), fingerprint }), "endpoints/echo/handler.mjs": "export {}" });
  const sha = createHash("sha256").update(bytes).digest("hex");
  const res = await fetch(`${service.url}/v1/apps/${app}/builds`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "x-svc-sha256": sha, "content-type": "application/gzip" },
    body: bytes,
  });
  expect(res.status).toBe(201);
  return sha;
}

describe("one deploy path for svc dev and the HTTP routes", () => {
  it("svc dev's deploy tells management and returns once the removed endpoint's workers exited", async () => {
    const artifact = join(dir, "dev.tar.gz");
    writeFileSync(artifact, "first build");
    await service.deploy({ app: "devapp", env: "dev", manifest: manifest(endpoints(true), "devapp"), artifactPath: artifact });
    expect(appChanged).toBe(1);
    const old = workerOf("devapp", "dev", "old");

    writeFileSync(artifact, "second build");
    const deployed = await service.deploy({ app: "devapp", env: "dev", manifest: manifest(endpoints(false), "devapp"), artifactPath: artifact });
    expect(deployed.map((e) => e.name)).toEqual(["api"]);
    expect(driver.exited).toContain(old);
    expect(appChanged).toBe(2);
  });

  it("an HTTP activation does the same", async () => {
    expect((await call(`${service.url}/v1/apps/webapp/environments/prod`, { method: "PUT", key: KEY })).status).toBe(201);
    const first = await upload("webapp", "fp-1", endpoints(true));
    const activated = await call(`${service.url}/v1/apps/webapp/environments/prod/activate`, { key: KEY, body: { build: first, confirmRemove: [] } });
    expect(activated.status).toBe(200);
    expect(appChanged).toBe(1);
    const old = workerOf("webapp", "prod", "old");

    const second = await upload("webapp", "fp-2", endpoints(false));
    const next = await call(`${service.url}/v1/apps/webapp/environments/prod/activate`, { key: KEY, body: { build: second, confirmRemove: ["old"] } });
    expect(next.status).toBe(200);
    expect(next.body.remove.map((r: { name: string }) => r.name)).toEqual(["old"]);
    expect(driver.exited).toContain(old);
    expect(appChanged).toBe(2);
  });
});
