// Worker images pulled from a private registry with the user's credentials, with a REAL Docker engine, a real
// registry (Debian's docker-registry with htpasswd auth, auth-registry.ts) and the real service: the provider
// worker's test image is pushed there and removed from the engine; a template naming it and a registry auth makes
// an endpoint whose first job pulls the image with those credentials and completes through the provider protocol.
// With a wrong password, or an image the registry lacks, the endpoint waits saying which pull failed and why, and
// its job stays queued.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { createDockerDriver, type DockerDriver } from "../../src/drivers/docker.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { startService, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";
import { until } from "../lb/harness.js";
import { authRegistryUnavailable, startAuthRegistry, type AuthRegistry } from "./auth-registry.js";
import { describeDocker, docker } from "./engine.js";
import { buildProviderWorkerImage } from "./python-image.js";

const KEY = "registry-auth-admin-key";
const unavailable = authRegistryUnavailable();
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? "");
if (unavailable) {
  if (inCi) throw new Error(`${unavailable} and CI is set: .ci/run installs what the private registry needs`);
  process.stderr.write(`[svc tests] skipping the registry auth tests: ${unavailable}\n`);
}

let dir: string;
let driver: DockerDriver;
let service: Service;
let registry: AuthRegistry;
let localTag: string;
/** The same image under two names of the registry (one pulled per case: a pulled one is in the engine after). */
const pushed: Record<"good" | "wrong", string> = { good: "", wrong: "" };

async function removeImage(name: string) {
  await docker
    .getImage(name)
    .remove({ force: true, noprune: false })
    .catch(() => undefined /* not there: what removing it is for */);
}

async function endpointOf(image: string, auth: { name: string; username: string; password: string }) {
  const made = await call(`${service.url}/v1/containerregistryauth`, { key: KEY, body: auth });
  expect(made.status).toBe(201);
  const template = await call(`${service.url}/v1/templates`, { key: KEY, body: { name: auth.name, imageName: image, containerRegistryAuthId: made.body.id } });
  expect(template.status).toBe(201);
  const created = await call(`${service.url}/v1/endpoints`, {
    key: KEY,
    body: { name: auth.name, templateId: template.body.id, workersMax: 1, idleTimeout: 60 },
  });
  expect(created.status).toBe(201);
  return created.body as { id: string; url: string; status: string; statusReason: string | null };
}

describeDocker("worker images pulled from a private registry with registry auth", () => {
  beforeAll(async () => {
    if (unavailable) return;
    dir = mkdtempSync(join(tmpdir(), "svc-registry-auth-"));
    registry = await startAuthRegistry();
    driver = createDockerDriver({ networkScope: "session", volumeLifetime: "session" });
    const tag = driver.session.slice(0, 12);
    localTag = `svc-test-provider-worker:${tag}`;
    await buildProviderWorkerImage(docker, localTag, driver.session);
    pushed.good = await registry.push(docker, localTag, "private/provider-worker", tag);
    pushed.wrong = await registry.push(docker, localTag, "private/provider-worker-b", tag);
    // The engine forgets every name of it: the driver must pull.
    for (const name of [pushed.good, pushed.wrong, localTag]) await removeImage(name);
    await expect(docker.getImage(pushed.good).inspect()).rejects.toThrow();
    service = await startService({ dataDir: join(dir, "data"), driver, apiKeys: [KEY], leaseMs: 3000, heartbeatMs: 1000 });
  }, 240_000);

  afterAll(async () => {
    await service?.close();
    await driver?.close();
    if (driver) await cleanupStale({ [LABELS.session]: driver.session }, { docker }).catch(() => undefined);
    for (const name of [pushed.good, pushed.wrong, localTag]) if (name) await removeImage(name);
    await registry?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it.skipIf(unavailable !== undefined)(
    "an endpoint whose template names the image and a registry auth pulls it with those credentials and answers /runsync",
    async () => {
      const e = await endpointOf(pushed.good, { name: "private", username: registry.username, password: registry.password });
      expect([e.status, e.statusReason]).toEqual(["READY", null]);
      const sync = await call(`${e.url}/runsync`, { key: KEY, body: { input: { mode: "echo", value: "pulled" } } });
      expect(sync.body).toMatchObject({ status: "COMPLETED", output: { value: "pulled" } });
      // The image is in the engine now, by the registry's name, and the container runs it.
      await docker.getImage(pushed.good).inspect();
      const [container] = await docker.listContainers({ filters: { label: [`${LABELS.session}=${driver.session}`, `${LABELS.endpoint}=${e.id}`] } });
      expect(container!.Image).toBe(pushed.good);
      // No credential reaches the container.
      const inspected = await docker.getContainer(container!.Id).inspect();
      expect(inspected.Config.Env.join("\n")).not.toContain(registry.password);
      const record = await call(`${service.url}/v1/endpoints/${e.id}`, { key: KEY });
      expect([record.body.status, record.body.statusReason]).toEqual(["READY", null]);
    },
    180_000,
  );

  it.skipIf(unavailable !== undefined)(
    "a wrong password or an image the registry lacks: the endpoint waits saying which pull failed and why, and its job stays queued",
    async () => {
      const wrong = await endpointOf(pushed.wrong, { name: "wrong", username: registry.username, password: "not-the-password" });
      const job = await call(`${wrong.url}/run`, { key: KEY, body: { input: { mode: "echo", value: 1 } } });
      expect(job.status).toBe(200);
      const waiting = await until(
        "the endpoint to say its pull failed",
        async () => {
          const r = (await call(`${service.url}/v1/endpoints/${wrong.id}`, { key: KEY })).body;
          return r.statusReason ? r : undefined;
        },
        60_000,
      );
      expect(waiting.status).toBe("WAITING");
      expect(waiting.statusReason).toBe(`pulling "${pushed.wrong}" failed: unauthorized (registry auth "wrong")`);
      expect((await call(`${wrong.url}/status/${job.body.id}`, { key: KEY })).body.status).toBe("IN_QUEUE");
      const logs = (await call(`${service.url}/v1/endpoints/${wrong.id}/logs`, { key: KEY })).body.lines as Array<{ text: string }>;
      expect(logs.some((l) => l.text.includes(`pulling "${pushed.wrong}" failed: unauthorized`))).toBe(true);
      expect(logs.some((l) => l.text.includes("not-the-password"))).toBe(false);

      const missing = `${registry.address}/private/never-pushed:1`;
      const absent = await endpointOf(missing, { name: "absent", username: registry.username, password: registry.password });
      await call(`${absent.url}/run`, { key: KEY, body: { input: 1 } });
      const reason = await until(
        "the endpoint to say the image is not there",
        async () => ((await call(`${service.url}/v1/endpoints/${absent.id}`, { key: KEY })).body.statusReason as string | null) ?? undefined,
        60_000,
      );
      expect(reason).toMatch(new RegExp(`^pulling "${missing.replace(/[.]/g, "\\.")}" failed: not found \\(.+\\) \\(registry auth "absent"\\)$`));
    },
    180_000,
  );
});
