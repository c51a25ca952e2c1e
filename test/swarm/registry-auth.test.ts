// A queue endpoint of a worker image built for the provider, on a real single-node swarm (swarm-mode.ts), its image
// in a private registry (Debian's docker-registry with htpasswd auth, test/docker/auth-registry.ts) and nowhere in
// the engine: the service creates the worker's Swarm service with the template's registry auth (X-Registry-Auth),
// the node pulls the image with it, and the endpoint answers /runsync through the provider's protocol.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { createSwarmDriver } from "../../src/drivers/swarm.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { startService, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";
import { until } from "../lb/harness.js";
import { authRegistryUnavailable, startAuthRegistry, type AuthRegistry } from "../docker/auth-registry.js";
import { describeDocker, docker, engineUp } from "../docker/engine.js";
import { buildProviderWorkerImage } from "../docker/python-image.js";
import { joinSwarm, leaveSwarm } from "./swarm-mode.js";

const KEY = "swarm-registry-auth-key";
const unavailable = authRegistryUnavailable();
const session = `svc-swarm-auth-${Date.now().toString(36)}`;
let dir: string | undefined;
let registry: AuthRegistry | undefined;
let driver: WorkerDriver | undefined;
let service: Service | undefined;
let localTag: string | undefined;
let pushed: string | undefined;
/** The same image under another name, which no node has pulled: the wrong password's test pulls it. */
let pushedForWrong: string | undefined;
let joined = false;

const removeImage = (name: string) =>
  docker
    .getImage(name)
    .remove({ force: true })
    .catch(() => undefined /* not there: what removing it is for */);

beforeAll(async () => {
  if (!engineUp || unavailable) return;
  joinSwarm();
  joined = true;
  dir = mkdtempSync(join(tmpdir(), "svc-swarm-auth-"));
  registry = await startAuthRegistry();
  localTag = `svc-test-provider-worker:${session.slice(-10)}`;
  await buildProviderWorkerImage(docker, localTag, session);
  pushed = await registry.push(docker, localTag, "private/swarm-worker", session.slice(-10));
  pushedForWrong = await registry.push(docker, localTag, "private/swarm-wrong", session.slice(-10));
  for (const name of [pushed, pushedForWrong, localTag]) await removeImage(name);
  driver = createSwarmDriver({ session, stopGraceMs: 2000 });
  service = await startService({ dataDir: join(dir, "data"), driver, apiKeys: [KEY], leaseMs: 3000, heartbeatMs: 1000 });
}, 240_000);

afterAll(async () => {
  await service?.close();
  await driver?.close();
  if (engineUp) {
    for (const s of (await docker.listServices({ filters: { label: [`${LABELS.session}=${session}`] } }).catch(() => [])) as Array<{ ID: string }>)
      await docker
        .getService(s.ID)
        .remove()
        .catch(() => undefined);
    for (const name of [pushed, pushedForWrong, localTag]) if (name) await removeImage(name);
  }
  await registry?.stop();
  if (joined) leaveSwarm();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 120_000);

describeDocker("worker images on Swarm, pulled with registry auth", () => {
  it.skipIf(unavailable !== undefined)(
    "an endpoint of a private image is READY on Swarm, its node pulls the image with the template's registry auth, and it answers /runsync",
    async () => {
      const url = service!.url;
      const auth = await call(`${url}/v1/containerregistryauth`, {
        key: KEY,
        body: { name: "private", username: registry!.username, password: registry!.password },
      });
      const template = await call(`${url}/v1/templates`, { key: KEY, body: { name: "echo", imageName: pushed, containerRegistryAuthId: auth.body.id } });
      const created = await call(`${url}/v1/endpoints`, { key: KEY, body: { name: "echo", templateId: template.body.id, workersMax: 1, idleTimeout: 60 } });
      expect([created.body.status, created.body.statusReason]).toEqual(["READY", null]);

      const sync = await call(`${created.body.url}/runsync`, { key: KEY, body: { input: { mode: "echo", value: "on swarm" } } });
      expect(sync.body).toMatchObject({ status: "COMPLETED", output: { value: "on swarm" } });

      // Its worker is a Swarm service of the registry's image, which the engine now holds (the node pulled it).
      const services = (await docker.listServices({ filters: { label: [`${LABELS.session}=${session}`, `${LABELS.endpoint}=${created.body.id}`] } })) as Array<{
        Spec?: { TaskTemplate?: { ContainerSpec?: { Image?: string; Env?: string[] } } };
      }>;
      expect(services).toHaveLength(1);
      const spec = services[0]!.Spec!.TaskTemplate!.ContainerSpec!;
      expect(spec.Image!.startsWith(pushed!)).toBe(true);
      expect((spec.Env ?? []).join("\n")).not.toContain(registry!.password);
      await docker.getImage(pushed!).inspect();
    },
    240_000,
  );

  it.skipIf(unavailable !== undefined)(
    "a wrong password on Swarm: the node cannot pull, the endpoint waits saying which pull failed and with which credentials, its job stays queued",
    async () => {
      const url = service!.url;
      const auth = await call(`${url}/v1/containerregistryauth`, {
        key: KEY,
        body: { name: "wrong", username: registry!.username, password: "not-the-password" },
      });
      // An image the registry has and the engine does not: only the password stands in the way.
      const image = pushedForWrong!;
      const template = await call(`${url}/v1/templates`, { key: KEY, body: { name: "wrong", imageName: image, containerRegistryAuthId: auth.body.id } });
      const created = await call(`${url}/v1/endpoints`, { key: KEY, body: { name: "wrong", templateId: template.body.id, workersMax: 1, idleTimeout: 60 } });
      const job = await call(`${created.body.url}/run`, { key: KEY, body: { input: { mode: "echo", value: 1 } } });
      const waiting = await until(
        "the endpoint to say why it waits",
        async () => {
          const r = (await call(`${url}/v1/endpoints/${created.body.id}`, { key: KEY })).body;
          return r.statusReason ? r : undefined;
        },
        90_000,
      );
      expect(waiting.status).toBe("WAITING");
      expect(waiting.statusReason).toMatch(new RegExp(`^pulling "${image.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}" failed: .+ \\(registry auth "wrong"\\)$`));
      expect(waiting.statusReason).not.toContain("not-the-password");
      expect((await call(`${created.body.url}/status/${job.body.id}`, { key: KEY })).body.status).toBe("IN_QUEUE");
    },
    240_000,
  );
});
