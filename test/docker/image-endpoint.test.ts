// Load-balanced endpoints from a prebuilt image (not svc code), with a REAL Docker engine: a test image built
// locally FROM the svc worker image (no registry) runs a plain node HTTP server on $PORT. The service checks
// its /ping before the endpoint gets traffic and says what it found in the create answer (and the CLI prints
// it); an image without /ping gets no workers; an image the engine does not hold waits with the reason.

import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import tarStream from "tar-stream";
import { createDockerDriver, type DockerDriver } from "../../src/drivers/docker.js";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { workerImageName } from "../../src/drivers/image-names.js";
import { startService, type Service } from "../../src/service/index.js";
import { call } from "../service/helpers.js";
import { until } from "../lb/harness.js";
import { describeDocker, docker, leftovers } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "image-endpoint-admin-key";
let dir: string;
let driver: DockerDriver;
let service: Service;
let imageTag: string;

// A server that knows nothing of svc: PORT from the environment, /ping unless NO_PING=1.
const SERVER = `
const http = require("node:http");
const noPing = process.env.NO_PING === "1";
http.createServer((req, res) => {
  if (req.url === "/ping") {
    res.writeHead(noPing ? 404 : 200);
    return res.end(noPing ? "no such path" : "ok");
  }
  const hello = /^\\/hello\\/([^/?]+)/.exec(req.url);
  if (hello) {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(JSON.stringify({ hello: decodeURIComponent(hello[1]), port: process.env.PORT, endpoint: process.env.SVC_ENDPOINT_NAME }));
  }
  res.writeHead(404);
  res.end();
}).listen(Number(process.env.PORT), "0.0.0.0");
process.on("SIGTERM", () => process.exit(0));
`;

async function buildTestImage(tag: string, session: string): Promise<void> {
  const pack = tarStream.pack();
  pack.entry(
    { name: "Dockerfile" },
    `FROM ${workerImageName("cpu")}\nCOPY server.js /home/svc/server.js\nCMD ["/usr/local/bin/node", "/home/svc/server.js"]\n`,
  );
  pack.entry({ name: "server.js" }, SERVER);
  pack.finalize();
  const stream = await docker.buildImage(pack as unknown as NodeJS.ReadableStream, { t: tag, labels: { [LABELS.managed]: "true", [LABELS.session]: session } });
  const events = await new Promise<Array<{ error?: string }>>((resolve, reject) =>
    docker.modem.followProgress(stream, (err, out) => (err ? reject(err) : resolve(out))),
  );
  const failed = events.find((e) => e.error);
  if (failed) throw new Error(`test image build failed: ${failed.error}`);
}

async function svcCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [join(repo, "bin", "svc.js"), ...args], {
      cwd: dir,
      env: { ...process.env, SVC_API_URL: service.url, SVC_API_KEY: KEY, NO_COLOR: "1" },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const template = async (name: string, imageName: string, env: Record<string, string> = {}) =>
  (await call(`${service.url}/v1/templates`, { key: KEY, body: { name, imageName, env } })).body as { id: string };

describeDocker("load-balanced endpoints from a prebuilt image", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-image-endpoint-"));
    driver = createDockerDriver({ networkScope: "session", volumeLifetime: "session" });
    await driver.prepare(["cpu"]);
    imageTag = `svc-test-http-server:${driver.session.slice(0, 12)}`;
    await buildTestImage(imageTag, driver.session);
    service = await startService({ dataDir: join(dir, "data"), driver, apiKeys: [KEY], lbWaitMs: 4000 });
  }, 240_000);

  afterAll(async () => {
    await service?.close();
    await driver?.close();
    if (driver) await cleanupStale({ [LABELS.session]: driver.session }, { docker }).catch(() => undefined);
    if (imageTag)
      await docker
        .getImage(imageTag)
        .remove({ force: true })
        .catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("checks /ping at creation, then serves the image's routes through its /lb address", async () => {
    const t = await template("http-server", imageTag);
    const created = await call(`${service.url}/v1/endpoints`, { key: KEY, body: { name: "web", templateId: t.id, type: "lb", workersMax: 1 } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      type: "lb",
      lbUrl: `${service.url}/lb/${created.body.id}`,
      status: "READY",
      ping: { ok: true, state: "ready" },
    });
    // The check's container is gone; the first request starts a worker from zero.
    const answer = await call(`${created.body.lbUrl}/hello/ada`, { key: KEY });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ hello: "ada", port: "8080", endpoint: "web" });
    expect(answer.headers.get("x-svc-worker")).toMatch(/^w/);
    expect((await call(`${created.body.lbUrl}/hello/ada`)).status).toBe(401);
    const running = await docker.listContainers({ filters: { label: [`${LABELS.session}=${driver.session}`, `${LABELS.endpoint}=${created.body.id}`] } });
    expect(running.map((c) => c.Image)).toEqual([imageTag]);

    // On this (local) engine the proxy moves from the published port to the container's own address once that
    // answers /ping (skipping the engine's port forwarding), and the routes keep answering there.
    const ip = Object.values((await docker.getContainer(running[0]!.Id).inspect()).NetworkSettings.Networks)[0]!.IPAddress;
    const logs = async () =>
      ((await call(`${service.url}/v1/endpoints/${created.body.id}/logs`, { key: KEY })).body.lines as Array<{ text: string }>).map((l) => l.text);
    const moved = await until("the proxy to use the container's address", async () =>
      (await logs()).find((t) => t.includes(`answers at http://${ip}:8080: the proxy uses it instead of http://127.0.0.1:`)),
    );
    expect(moved).toMatch(/^lb: worker w\w+ answers at/);
    const again = await call(`${created.body.lbUrl}/hello/bo`, { key: KEY });
    expect([again.status, again.body]).toEqual([200, { hello: "bo", port: "8080", endpoint: "web" }]);
  }, 120_000);

  it("an image without /ping: the create says so (and the CLI prints it), and the endpoint gets no workers", async () => {
    const t = await template("no-ping", imageTag, { NO_PING: "1" });
    const result = await svcCli(["endpoint", "create", "--name", "blind", "--template", t.id, "--type", "lb", "--json"]);
    expect(result.code).toBe(0);
    const record = JSON.parse(result.stdout);
    expect(record).toMatchObject({ type: "lb", status: "WAITING", ping: { ok: false, state: "missing", status: 404 } });
    expect(record.statusReason).toContain("has no /ping path");
    expect(result.stderr).toContain(`endpoint blind is waiting: `);
    expect(result.stderr).toContain("has no /ping path (it answered 404)");
    const refused = await call(`${record.lbUrl}/hello/bob`, { key: KEY });
    expect(refused.status).toBe(503);
    expect(refused.headers.get("content-type")).toContain("application/problem+json");
    const logs = (await call(`${service.url}/v1/endpoints/${record.id}/logs`, { key: KEY })).body.lines as Array<{ text: string }>;
    expect(logs.some((l) => l.text.startsWith("ping check: ") && l.text.includes("has no /ping path"))).toBe(true);
  }, 120_000);

  it("an image the engine does not hold waits, saying there is no registry to pull it from", async () => {
    const t = await template("absent", "svc-test-absent-image:never-built");
    const created = await call(`${service.url}/v1/endpoints`, { key: KEY, body: { name: "absent", templateId: t.id, type: "lb" } });
    expect(created.status).toBe(201);
    expect(created.body.status).toBe("WAITING");
    expect(created.body.statusReason).toContain('image "svc-test-absent-image:never-built" is not in the Docker engine');
    expect(created.body.ping).toBeUndefined();
  }, 60_000);

  it("a template of svc code cannot make a load-balanced endpoint (422)", async () => {
    const t = await template("code", "svc://0123456789abcdef");
    const refused = await call(`${service.url}/v1/endpoints`, { key: KEY, body: { name: "x", templateId: t.id, type: "lb" } });
    expect(refused.status).toBe(422);
    expect(refused.body.errors[0]).toContain("$.type: a load-balanced endpoint runs a prebuilt image");
  });

  it("leaves nothing of the session behind once closed", async () => {
    await service.close();
    await driver.close();
    expect(await leftovers(driver.session)).toEqual({ containers: [], networks: [], volumes: [] });
  }, 60_000);
});
