// Two users on one real service (real SQLite file, real process workers from dist/: compile first), each with their
// own keys: what one user's configuration may reach of the other's, and what configuration may make a worker run.
//   - `volume:` resolves among the deploying user's own volumes: Bob's volume by id is refused (422 naming it, on
//     the deploy route and the REST API), Bob's volume's name gives Alice a volume of her own (Bob's file is not
//     in it), names with `/` or `..` are refused, and Alice's own volume by name is what her workers get.
//   - Loader variables (NODE_OPTIONS, LD_PRELOAD...) and SVC_ names are refused in templates, endpoints, secrets
//     and deploys, naming the variable.
//   - A management:write key cannot create what runs code (templates, endpoints, their env); a deploy key can.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import tarStream from "tar-stream";
import { buildProject } from "../../src/build/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { Manifest } from "svc/internal";
import { startService, type Service } from "../../src/service/index.js";
import { call, manifest, resource } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const OPERATOR = "tenant-config-operator-key";
let dir: string;
let service: Service;
let url: string;
let built: { manifest: Manifest; artifactPath: string };
const keys: Record<string, string> = {};
let bobVolume: { id: string; name: string };

async function mint(by: string, body: Record<string, unknown>): Promise<string> {
  const r = await call(`${url}/v1/keys`, { key: by, body });
  if (r.status !== 201) throw new Error(`key creation: ${r.status} ${r.text}`);
  return r.body.key as string;
}

async function tarGz(files: Record<string, string>): Promise<Buffer> {
  const pack = tarStream.pack();
  for (const [name, text] of Object.entries(files)) pack.entry({ name }, text);
  pack.finalize();
  const parts: Buffer[] = [];
  for await (const chunk of pack) parts.push(chunk as Buffer);
  return gzipSync(Buffer.concat(parts));
}

/** `svc deploy` over HTTP: the environment, the build upload (made of `resources`, or a real build), then the activation's answer. */
async function deployOverHttp(key: string, app: string, resources: Manifest["resources"] | Buffer) {
  const body = Buffer.isBuffer(resources)
    ? resources
    : await tarGz({ "svc_manifest.json": JSON.stringify(manifest(resources, app)), "endpoints/echo/handler.mjs": "export {}" });
  const sha = createHash("sha256").update(body).digest("hex");
  expect((await call(`${url}/v1/apps/${app}/environments/prod`, { key, method: "PUT" })).status).toBeLessThan(300);
  const upload = await fetch(`${url}/v1/apps/${app}/builds`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "x-svc-sha256": sha, "content-type": "application/gzip" },
    body,
  });
  expect(upload.status, await upload.clone().text()).toBeLessThan(300);
  return call(`${url}/v1/apps/${app}/environments/prod/activate`, { key, body: { build: sha } });
}

/** The volume-app fixture (writer and reader endpoints on volume "shared-data") deployed by `owner`. */
async function deployVolumeApp(ownerKey: string, app: string, volume = "shared-data") {
  const resources = Object.fromEntries(Object.entries(built.manifest.resources).map(([name, r]) => [name, { ...r, volume }]));
  const deployed = await service.deploy({ app, env: "test", manifest: { ...built.manifest, app, resources }, artifactPath: built.artifactPath, ownerKey });
  return { writer: deployed.find((e) => e.name === "writer")!, reader: deployed.find((e) => e.name === "reader")! };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-tenant-config-"));
  cpSync(join(repo, "fixtures", "volume-app"), join(dir, "app"), { recursive: true });
  service = await startService({
    dataDir: join(dir, "data"),
    apiKeys: [OPERATOR],
    driver: createProcessDriver({ runtimeEntry: join(repo, "dist", "runtime", "worker.js"), cacheDir: join(dir, "cache") }),
    leaseMs: 2000,
    heartbeatMs: 300,
  });
  url = service.url;
  keys.alice = await mint(OPERATOR, { userId: "alice", scopes: ["admin"] });
  keys.bob = await mint(OPERATOR, { userId: "bob", scopes: ["admin"] });
  keys.aliceWrite = await mint(keys.alice, { scopes: ["management:write"] });
  keys.aliceDeploy = await mint(keys.alice, { scopes: ["deploy"] });
  bobVolume = (await call(`${url}/v2/network-volumes`, { key: keys.bob, body: { name: "shared-data", size: 10, dataCenter: "local" } })).body;
  built = await buildProject(join(dir, "app"));
}, 120_000);

afterAll(async () => {
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("volumes belong to users", () => {
  it("gives Bob's workers Bob's volume, and Alice naming it by name a volume of her own without Bob's file", async () => {
    const bob = await deployVolumeApp(keys.bob!, "bob-files");
    const wrote = await call(`${bob.writer.url}/runsync`, { key: keys.bob, body: { input: { file: "card.txt", text: "bob's card" } } });
    expect(wrote.body).toMatchObject({ status: "COMPLETED", output: { volume: join(dir, "data", "volumes", bobVolume.id) } });

    const alice = await deployVolumeApp(keys.alice!, "alice-files");
    const aliceVolumes = (await call(`${url}/v2/network-volumes`, { key: keys.alice })).body as Array<{ id: string; name: string }>;
    expect(aliceVolumes).toEqual([expect.objectContaining({ name: "shared-data", dataCenter: "local" })]);
    expect(aliceVolumes[0]!.id).not.toBe(bobVolume.id);
    const read = await call(`${alice.reader.url}/runsync`, { key: keys.alice, body: { input: { file: "card.txt" } } });
    expect(read.body.status).toBe("FAILED");
    expect(JSON.stringify(read.body)).not.toContain("bob's card");
    // Alice's own volume, by its name, is what her workers get.
    const mine = await call(`${alice.writer.url}/runsync`, { key: keys.alice, body: { input: { file: "note.txt", text: "alice's note" } } });
    expect(mine.body).toMatchObject({ status: "COMPLETED", output: { volume: join(dir, "data", "volumes", aliceVolumes[0]!.id) } });
    expect((await call(`${alice.reader.url}/runsync`, { key: keys.alice, body: { input: { file: "note.txt" } } })).body).toMatchObject({
      output: { text: "alice's note" },
    });
    // Bob's volume holds Bob's file only.
    expect(readdirSync(join(dir, "data", "volumes", bobVolume.id))).toEqual(["card.txt"]);
  }, 120_000);

  it("refuses Bob's volume by id: at deploy (422 naming it, over HTTP; an error naming it in process) and on the REST API", async () => {
    const refused = await deployOverHttp(keys.alice!, "borrow", { echo: resource({ volume: bobVolume.id }) });
    expect(refused.status).toBe(422);
    expect(refused.body.errors).toEqual([`endpoint "echo": volume "${bobVolume.id}" is not one of your network volumes (name one of yours by id or name)`]);
    // The same words for an id nobody has: nothing is learnt of Bob's volumes.
    const unknown = await deployOverHttp(keys.alice!, "borrow", { echo: resource({ volume: "vol000000000000" }) });
    expect(unknown.body.errors).toEqual(['endpoint "echo": volume "vol000000000000" is not one of your network volumes (name one of yours by id or name)']);
    await expect(deployVolumeApp(keys.alice!, "borrow-too", bobVolume.id)).rejects.toMatchObject({
      problems: expect.arrayContaining([expect.stringContaining(`volume "${bobVolume.id}" is not one of your network volumes`)]),
    });

    const template = (await call(`${url}/v1/templates`, { key: keys.alice, body: { name: "t", imageName: "svc://none" } })).body;
    const rest = await call(`${url}/v1/endpoints`, { key: keys.alice, body: { name: "e", templateId: template.id, networkVolumeId: bobVolume.id } });
    expect(rest.status).toBe(422);
    expect(rest.body.errors).toEqual([`$.networkVolumeId: no network volume "${bobVolume.id}"`]);
  });

  it("refuses volume names with / or .. when a volume is created or renamed and in a deploy's setting", async () => {
    for (const name of ["..", "../bob", "a/b", "/etc", "x..y", ".hidden", "a".repeat(65)]) {
      const created = await call(`${url}/v2/network-volumes`, { key: keys.alice, body: { name, size: 10, dataCenter: "local" } });
      expect([name, created.status]).toEqual([name, 422]);
      expect(created.body.errors).toEqual([expect.stringMatching(/^\$\.name: ".*" is not a volume name/)]);
    }
    const renamed = await call(`${url}/v2/network-volumes/${bobVolume.id}`, { key: keys.bob, method: "PATCH", body: { name: "../up" } });
    expect(renamed.status).toBe(422);
    const refused = await deployOverHttp(keys.alice!, "dots", { echo: resource({ volume: `../volumes/${bobVolume.id}` }) });
    expect(refused.status).toBe(422);
    expect(refused.body.errors).toEqual([
      `endpoint "echo": volume "../volumes/${bobVolume.id}" is not a volume name (1 to 64 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit, without '..')`,
    ]);
    expect(readdirSync(join(dir, "data", "volumes")).filter((n) => !n.startsWith("vol"))).toEqual([]);
  });
});

describe("configuration cannot smuggle code", () => {
  it("refuses loader variables and SVC_ names in templates, endpoints and secrets, naming the variable", async () => {
    const template = await call(`${url}/v1/templates`, {
      key: keys.alice,
      body: { name: "t", imageName: "svc://x", env: { NODE_OPTIONS: "--import=data:text/javascript,1", OK: "1" } },
    });
    expect(template.status).toBe(422);
    expect(template.body.errors).toEqual([
      "$.env.NODE_OPTIONS: may not be set: it is a loader variable, which makes a program load code other than the deployed build",
    ]);
    const good = (await call(`${url}/v1/templates`, { key: keys.alice, body: { name: "t", imageName: "svc://x", env: { OK: "1" } } })).body;
    for (const name of ["LD_PRELOAD", "LD_LIBRARY_PATH", "ld_audit", "NODE_PATH", "DYLD_INSERT_LIBRARIES", "PYTHONPATH", "BASH_ENV", "SVC_WORKER_TOKEN"]) {
      const created = await call(`${url}/v1/endpoints`, { key: keys.alice, body: { name: "e", templateId: good.id, env: { [name]: "/tmp/x" } } });
      expect([name, created.status]).toEqual([name, 422]);
      expect(created.body.errors).toEqual([expect.stringMatching(new RegExp(`^\\$\\.env\\.${name}: may not be set`))]);
    }
    const endpoint = (await call(`${url}/v1/endpoints`, { key: keys.alice, body: { name: "e", templateId: good.id, env: { HF_HOME: "/data" } } })).body;
    const patched = await call(`${url}/v1/endpoints/${endpoint.id}`, { key: keys.alice, method: "PATCH", body: { env: { LD_PRELOAD: "/tmp/x.so" } } });
    expect(patched.status).toBe(422);
    expect(patched.body.errors).toEqual([
      "$.env.LD_PRELOAD: may not be set: it is a loader variable, which makes a program load code other than the deployed build",
    ]);
    for (const name of ["NODE_OPTIONS", "LD_PRELOAD"]) {
      const secret = await call(`${url}/v1/secrets/${name}`, { key: keys.alice, method: "PUT", body: { value: "--require /tmp/x.js" } });
      expect([name, secret.status]).toEqual([name, 422]);
      expect(secret.body.errors).toEqual([`${name}: may not be set: it is a loader variable, which makes a program load code other than the deployed build`]);
    }
    expect((await call(`${url}/v1/secrets`, { key: keys.alice })).body).toEqual([]);
  });

  it("refuses a deploy whose endpoints set one in env or name one as a secret, before anything is activated", async () => {
    const refused = await deployOverHttp(keys.alice!, "smuggle", { echo: resource({ env: { NODE_OPTIONS: "--require /tmp/x.js" }, secrets: ["LD_PRELOAD"] }) });
    expect(refused.status).toBe(422);
    expect(refused.body.errors).toEqual([
      'endpoint "echo": env NODE_OPTIONS: may not be set: it is a loader variable, which makes a program load code other than the deployed build',
      'endpoint "echo": secret LD_PRELOAD: may not be set: it is a loader variable, which makes a program load code other than the deployed build',
    ]);
    expect((await call(`${url}/v1/apps/smuggle/environments/prod`, { key: keys.alice })).body.endpoints ?? []).toEqual([]);
    const config = await call(`${url}/v1/apps/smuggle/environments/prod/config`, {
      key: keys.alice,
      body: { resources: { echo: resource({ env: { LD_PRELOAD: "/x.so" } }) } },
    });
    expect(config.status).toBe(422);
    expect(config.body.errors).toEqual([
      'endpoint "echo": env LD_PRELOAD: may not be set: it is a loader variable, which makes a program load code other than the deployed build',
    ]);
    await expect(
      service.deploy({
        app: "smuggle",
        env: "dev",
        manifest: manifest({ echo: resource({ env: { NODE_OPTIONS: "-r x" } }) }, "smuggle"),
        artifactPath: built.artifactPath,
        ownerKey: keys.alice,
      }),
    ).rejects.toMatchObject({ problems: [expect.stringContaining('endpoint "echo": env NODE_OPTIONS: may not be set')] });
  });
});

describe("running code needs the deploy scope", () => {
  it("refuses a management:write key what decides the code workers run, and lets a deploy key do it", async () => {
    const write = keys.aliceWrite!;
    const template = await call(`${url}/v1/templates`, { key: write, body: { name: "t", imageName: "svc://x", env: { GREETING: "hi" } } });
    expect(template.status).toBe(403);
    expect(template.body.detail).toBe("Creating a template decides what code workers run: it needs a key with the deploy (or admin) scope");
    const byDeploy = await call(`${url}/v1/templates`, { key: keys.aliceDeploy, body: { name: "t", imageName: "svc://x", env: { GREETING: "hi" } } });
    expect(byDeploy.status).toBe(201);
    const created = await call(`${url}/v1/endpoints`, { key: write, body: { name: "e", templateId: byDeploy.body.id } });
    expect(created.status).toBe(403);
    const endpoint = await call(`${url}/v1/endpoints`, { key: keys.aliceDeploy, body: { name: "e", templateId: byDeploy.body.id, workersMax: 1 } });
    expect(endpoint.status).toBe(201);
    // Scaling and attaching a volume stay with management:write; the template and env do not.
    expect((await call(`${url}/v1/endpoints/${endpoint.body.id}`, { key: write, method: "PATCH", body: { workersMax: 2, idleTimeout: 9 } })).status).toBe(200);
    const env = await call(`${url}/v1/endpoints/${endpoint.body.id}`, { key: write, method: "PATCH", body: { env: { GREETING: "changed" } } });
    expect(env.status).toBe(403);
    expect(env.body.detail).toBe("Changing an endpoint's env decides what code workers run: it needs a key with the deploy (or admin) scope");
    expect((await call(`${url}/v1/endpoints/${endpoint.body.id}`, { key: write, method: "PATCH", body: { templateId: byDeploy.body.id } })).status).toBe(403);
    expect(
      (await call(`${url}/v1/endpoints/${endpoint.body.id}`, { key: keys.aliceDeploy, method: "PATCH", body: { env: { GREETING: "changed" } } })).status,
    ).toBe(200);
    // Apps: a build and its activation need the deploy scope too.
    const put = await call(`${url}/v1/apps/${built.manifest.app}/environments/prod`, { key: write, method: "PUT" });
    expect(put.status).toBe(403);
    // (Carol: Alice's service.deploy above recorded this very build under another app of hers.)
    const carol = await mint(OPERATOR, { userId: "carol", scopes: ["deploy"] });
    const deployed = await deployOverHttp(carol, built.manifest.app, readFileSync(built.artifactPath));
    expect(deployed.status).toBe(200);
    expect(deployed.body.endpoints).toEqual([
      expect.objectContaining({ name: "reader", action: "create" }),
      expect.objectContaining({ name: "writer", action: "create" }),
    ]);
  });
});
