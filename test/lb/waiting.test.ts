// The edges of the pool: a request that finds no worker within the documented wait gets a 503 problem, and a
// worker whose server has no /ping (what an image not built by svc may be) is found out and gets no traffic.

import { createServer, type Server } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkPingPath } from "../../src/service/lb/index.js";
import { lbEndpointUrl } from "../../src/service/lb/address.js";
import { startService, type Service } from "../../src/service/index.js";
import { call, manifest, resource } from "../service/helpers.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { until } from "./harness.js";

let dir: string;
let service: Service;
let noPing: Server;
let noPingAddress: string;
let pings = 0;
let served = 0;
const key = "svc_lb_wait_key_0123456789";
const auth = { authorization: `Bearer ${key}` };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-lb-wait-"));
  // An HTTP app with routes but no /ping, as a prebuilt image might be.
  noPing = createServer((req, res) => {
    if (req.url === "/ping") pings++;
    else served++;
    res.writeHead(req.url === "/ping" ? 404 : 200, { "content-type": "text/plain" });
    res.end(req.url === "/ping" ? "not found" : "hello");
  });
  await new Promise<void>((r) => noPing.listen(0, "127.0.0.1", r));
  noPingAddress = `http://127.0.0.1:${(noPing.address() as AddressInfo).port}`;
  // No driver: workers come from outside (here, the test registers one by hand).
  service = await startService({ dataDir: join(dir, "data"), apiKeys: [key], lbWaitMs: 700 });
});

afterAll(async () => {
  await service?.close();
  await new Promise<void>((r) => noPing.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

async function deployLb(name: string, workersMax = 1): Promise<string> {
  const artifact = join(dir, `${name}.tar.gz`);
  writeFileSync(artifact, `artifact of ${name}`);
  const resources = { [name]: resource({ is_load_balanced: true, functions: [], workersMin: 0, workersMax, handler: `endpoints/${name}/handler.mjs` }) };
  const [endpoint] = await service.deploy({ app: name, env: "test", manifest: manifest(resources, name), artifactPath: artifact });
  return endpoint!.id;
}

describe("waiting for a worker", () => {
  it("answers 503 problem+json with Retry-After when no worker is ready within the wait limit", async () => {
    const id = await deployLb("lonely");
    const started = Date.now();
    const response = await fetch(`${lbEndpointUrl(service.url, id)}/anything`, { headers: auth });
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("5");
    expect(await response.json()).toMatchObject({ title: "Service Unavailable", status: 503, detail: expect.stringMatching(/within 700 ms/) });
    expect(Date.now() - started).toBeGreaterThanOrEqual(650);
    // The endpoint's request, answered by the service: counted with its error and the time it waited.
    const series = await (await fetch(`${service.url}/v1/endpoints/${id}/metrics?window=1h`, { headers: auth })).json();
    expect(series.totals).toMatchObject({ requests: 1, errors: 1 });
    expect(series.totals.latencyMs.p50).toBeGreaterThanOrEqual(600);
  });

  it("refuses a queue-based endpoint on the LB address, and an LB endpoint on the job API", async () => {
    const artifact = join(dir, "q.tar.gz");
    writeFileSync(artifact, "q");
    const [queue] = await service.deploy({ app: "q", env: "test", manifest: manifest({ q: resource() }, "q"), artifactPath: artifact });
    expect((await fetch(`${lbEndpointUrl(service.url, queue!.id)}/x`, { headers: auth })).status).toBe(400);
    const lbId = await deployLb("other");
    const run = await fetch(`${service.url}/v2/${lbId}/run`, { method: "POST", headers: auth, body: '{"input":{}}' });
    expect(run.status).toBe(400);
    expect((await fetch(`${service.url}/v2/${lbId}/health`, { headers: auth })).status).toBe(200);
  });
});

describe("an endpoint no worker will ever serve", () => {
  // Waiting cannot help these: the answer comes at once, says why and what to change, and has no Retry-After.
  it("answers a REST endpoint that cannot run with its status reason and how to update it", async () => {
    // This service has no Docker driver, so a prebuilt image is WAITING with workersMax 0 (management-api.md).
    const template = await call(`${service.url}/v1/templates`, { key, body: { name: "web", imageName: "example/web:1" } });
    const created = await call(`${service.url}/v1/endpoints`, { key, body: { name: "web", templateId: template.body.id, type: "lb", workersMax: 2 } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ status: "WAITING", statusReason: expect.stringContaining("only the Docker driver runs") });
    const response = await fetch(`${created.body.lbUrl}/anything`, { headers: auth });
    expect(response.status).toBe(503);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(response.headers.get("retry-after")).toBeNull();
    const problem = (await response.json()) as { title: string; detail: string };
    expect(problem.title).toBe("Service Unavailable");
    expect(problem.detail).toContain(`Endpoint ${created.body.id} has no workers and will get none: ${created.body.statusReason as string}`);
    expect(problem.detail).toContain(`then update the endpoint (PATCH /v1/endpoints/${created.body.id} or \`svc endpoint update ${created.body.id}\`)`);
  });

  it("answers an app endpoint whose workersMax is 0 by naming that setting", async () => {
    const id = await deployLb("none", 0);
    const response = await fetch(`${lbEndpointUrl(service.url, id)}/anything`, { headers: auth });
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBeNull();
    expect(((await response.json()) as { detail: string }).detail).toBe(
      `Endpoint ${id} has no workers and will get none: its workersMax is 0; raise the maximum of its \`workers\` setting and deploy again (\`svc deploy\`)`,
    );
    // Not counted as a request waiting for a worker.
    const health = (await (await fetch(`${service.url}/v2/${id}/health`, { headers: auth })).json()) as { requests: { waiting: number } };
    expect(health.requests.waiting).toBe(0);
  });
});

describe("the /ping check of an image that was not built by svc", () => {
  it("checkPingPath says the address has no /ping", async () => {
    const check = await checkPingPath(noPingAddress);
    expect(check).toMatchObject({ ok: false, state: "missing", status: 404 });
    expect(check.message).toMatch(/has no \/ping path/);
  });

  it("a registered worker without /ping is logged and gets no traffic", async () => {
    const id = await deployLb("image");
    const worker = await service.mintKey({ scopes: [`worker:${id}`] });
    const register = await fetch(`${service.url}/_worker/v1/register`, {
      method: "POST",
      headers: { authorization: `Bearer ${worker.key}`, "content-type": "application/json" },
      body: JSON.stringify({ workerId: worker.id, address: noPingAddress }),
    });
    expect(register.status).toBe(200);
    const logs = async () =>
      ((await (await fetch(`${service.url}/v1/endpoints/${id}/logs`, { headers: auth })).json()) as { lines: Array<{ text: string }> }).lines.map(
        (l) => l.text,
      );
    const line = await until("the missing /ping log line", async () => (await logs()).find((t) => t.includes("has no /ping path")));
    expect(line).toContain(noPingAddress);
    expect(pings).toBeGreaterThan(0);
    const response = await fetch(`${lbEndpointUrl(service.url, id)}/hello`, { headers: auth });
    expect(response.status).toBe(503);
    expect(served).toBe(0);
  });

  it("refuses a register body whose address is not an http URL", async () => {
    const id = await deployLb("badaddr");
    const worker = await service.mintKey({ scopes: [`worker:${id}`] });
    const register = await fetch(`${service.url}/_worker/v1/register`, {
      method: "POST",
      headers: { authorization: `Bearer ${worker.key}`, "content-type": "application/json" },
      body: JSON.stringify({ workerId: worker.id, address: "file:///etc/passwd" }),
    });
    expect(register.status).toBe(422);
    expect(((await register.json()) as { errors: string[] }).errors).toEqual(["$.address: must be an http(s) URL"]);
  });
});

describe("a worker that claims a local socket", () => {
  it("is reached over TCP unless its driver gave it that socket, and a malformed claim is a 422", async () => {
    const id = await deployLb("claims");
    // An HTTP server on a port and on a Unix socket: which one the proxy uses is what it counts.
    let overSocket = 0;
    let overTcp = 0;
    const app = createServer((req, res) => {
      if (req.url !== "/ping") req.socket.remoteAddress === undefined ? overSocket++ : overTcp++;
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
    });
    await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
    const socketPath = join(dir, "claimed.sock");
    const local = createNetServer((socket) => app.emit("connection", socket));
    await new Promise<void>((r) => local.listen(socketPath, r));
    const address = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
    try {
      const worker = await service.mintKey({ scopes: [`worker:${id}`] });
      const register = (body: object) =>
        fetch(`${service.url}/_worker/v1/register`, {
          method: "POST",
          headers: { authorization: `Bearer ${worker.key}`, "content-type": "application/json" },
          body: JSON.stringify({ workerId: worker.id, address, ...body }),
        });
      const bad = await register({ socket: 42 });
      expect(bad.status).toBe(422);
      expect(((await bad.json()) as { errors: string[] }).errors).toEqual(["$.socket: must be the socket path the worker was given (SVC_LB_SOCKET)"]);
      expect((await register({ socket: socketPath })).status).toBe(200);
      const response = await until("the worker to take traffic", async () => {
        const r = await fetch(`${lbEndpointUrl(service.url, id)}/hello`, { headers: auth });
        return r.status === 200 ? r : undefined;
      });
      expect(await response.text()).toBe("ok");
      expect([overTcp, overSocket]).toEqual([1, 0]);
      const logs = ((await (await fetch(`${service.url}/v1/endpoints/${id}/logs`, { headers: auth })).json()) as { lines: Array<{ text: string }> }).lines.map(
        (l) => l.text,
      );
      expect(logs.some((t) => t.startsWith(`lb: worker ${worker.id} registered at ${address}; checking /ping`))).toBe(true);
    } finally {
      local.close();
      app.closeAllConnections();
      await new Promise<void>((r) => app.close(() => r()));
    }
  });
});

describe("a worker whose /ping stops answering 200", () => {
  it("is taken out of the pool, and comes back when /ping answers 200 again", async () => {
    let pingStatus = 200;
    const app = createServer((req, res) => {
      res.writeHead(req.url === "/ping" ? pingStatus : 200, { "content-type": "text/plain" });
      res.end(req.url === "/ping" ? "" : "served");
    });
    await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
    try {
      const id = await deployLb("flaky");
      const worker = await service.mintKey({ scopes: [`worker:${id}`] });
      const address = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
      const register = await fetch(`${service.url}/_worker/v1/register`, {
        method: "POST",
        headers: { authorization: `Bearer ${worker.key}`, "content-type": "application/json" },
        body: JSON.stringify({ workerId: worker.id, address }),
      });
      expect(register.status).toBe(200);
      const base = lbEndpointUrl(service.url, id);
      const first = await fetch(`${base}/hello`, { headers: auth });
      expect([first.status, first.headers.get("x-svc-worker"), await first.text()]).toEqual([200, worker.id, "served"]);

      pingStatus = 500;
      const health = async () => (await (await fetch(`${service.url}/v2/${id}/health`, { headers: auth })).json()) as { pool: { ready: number } };
      await until("the worker to leave the pool", async () => ((await health()).pool.ready === 0 ? true : undefined), 10_000);
      expect((await fetch(`${base}/hello`, { headers: auth })).status).toBe(503);
      const logs = ((await (await fetch(`${service.url}/v1/endpoints/${id}/logs`, { headers: auth })).json()) as { lines: Array<{ text: string }> }).lines;
      expect(logs.some((l) => l.text.includes(`worker ${worker.id} stopped answering /ping (500): taken out of the pool`))).toBe(true);

      pingStatus = 200;
      await until("the worker to come back", async () => ((await health()).pool.ready === 1 ? true : undefined), 10_000);
      expect((await fetch(`${base}/hello`, { headers: auth })).status).toBe(200);
    } finally {
      app.closeAllConnections();
      await new Promise<void>((r) => app.close(() => r()));
    }
  });
});
