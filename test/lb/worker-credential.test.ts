// Load-balanced workers answer only the service's proxy: a real service, a real LB worker (fixtures/lb-app, whose
// /private route returns a secret of its endpoint's), and workers registered by hand as another tenant's worker
// would (with a worker token of another endpoint). docs/lb.md, "Worker credentials".

import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { lbCredentialOfToken } from "../../src/lb-credential.js";
import { lbEndpointUrl } from "../../src/service/lb/address.js";
import { ARTIFACT_FILE } from "../../src/build/index.js";
import { MANIFEST_FILE, type Manifest } from "svc/internal";
import { startApp, until, useLbApp, type LiveApp } from "./harness.js";

const SECRET = "b-secret-of-the-owner";

/** A GET over a Unix socket (the process driver's local socket of a worker). */
function overSocket(socketPath: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, headers: { host: "w", ...headers } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe.each([true, false])("lbFront: %s", (lbFront) => {
  // B: the real endpoint with a real worker process, whose /private must stay its owner's.
  const lb = useLbApp({ workersMin: 1, workersMax: 1, env: { LB_APP_SECRET: SECRET, LB_APP_INIT_MS: "0" } }, { lbFront, lbWaitMs: 1500 });
  let service: typeof lb.app.service;
  let tcpAddress: string;
  let socketPath: string;
  /**
   * Another app's LB endpoint (another tenant's) whose worker the test registers by hand, as that tenant's handler
   * could with the token in its environment. The deploy's probe runs a real worker; workersMax 0 stops it after.
   */
  const byHand = async (name: string) => {
    const project = join(lb.app.dir, "project");
    const built = JSON.parse(readFileSync(join(project, ".svc", MANIFEST_FILE), "utf8")) as Manifest;
    built.app = name;
    Object.assign(built.resources.api!, { workersMin: 0, workersMax: 0, idleTimeout: 1, env: { LB_APP_INIT_MS: "0" } });
    const deployed = await service.deploy({ app: name, env: "test", manifest: built, artifactPath: join(project, ARTIFACT_FILE) });
    const id = deployed.find((e) => e.name === "api")!.id;
    await until(`${name}'s deploy probe to be gone`, async () => {
      const { workers } = (await (await fetch(`${service.url}/v2/${id}/health`, { headers: lb.auth })).json()) as {
        workers: { idle: number; running: number };
      };
      return workers.idle + workers.running === 0;
    });
    const worker = await service.mintKey({ scopes: [`worker:${id}`] });
    const register = (address: string) =>
      fetch(`${service.url}/_worker/v1/register`, {
        method: "POST",
        headers: { authorization: `Bearer ${worker.key}`, "content-type": "application/json" },
        body: JSON.stringify({ workerId: worker.id, address }),
      });
    return { id, worker, register };
  };

  beforeAll(async () => {
    service = lb.app.service;
    // Through the service first: the worker is up and taking traffic.
    const first = await until("B's worker to take traffic", async () => {
      const r = await fetch(`${lb.base}/private`, { headers: lb.auth });
      return r.status === 200 ? r : undefined;
    });
    expect(await first.json()).toEqual({ secret: SECRET });
    // Where it listens, from the service's log of its registration.
    const registered = (await lb.logLines())
      .map((l) => /registered at (http:\/\/[^\s;]+)(?: \(the proxy uses its local socket (\S+)\))?/.exec(l.text))
      .find(Boolean)!;
    tcpAddress = registered[1]!;
    socketPath = registered[2]!;
  }, 60_000);

  it("B's worker refuses a request straight to its port or socket without its credential, or with another worker's", async () => {
    for (const path of ["/private", "/ping", "/headers"]) {
      const bare = await fetch(`${tcpAddress}${path}`);
      expect([path, bare.status, bare.headers.get("content-type")]).toEqual([path, 401, "application/problem+json"]);
      expect(await bare.text()).not.toContain(SECRET);
    }
    // Another worker's real credential (a token of another endpoint), and made-up ones.
    const other = await byHand("othertenant");
    for (const credential of [lbCredentialOfToken(other.worker.key), lbCredentialOfToken("svcw_guessed"), "x".repeat(43)]) {
      const forged = await fetch(`${tcpAddress}/private`, { headers: { "x-svc-lb-credential": credential } });
      expect(forged.status).toBe(403);
      expect(await forged.text()).not.toContain(SECRET);
    }
    expect(socketPath).toBeDefined();
    const viaSocket = await overSocket(socketPath, "/private");
    expect(viaSocket.status).toBe(401);
    expect(viaSocket.body).not.toContain(SECRET);
    // Through the service it works.
    const proxied = await fetch(`${lb.base}/private`, { headers: lb.auth });
    expect([proxied.status, await proxied.json()]).toEqual([200, { secret: SECRET }]);
  });

  it("a credential the caller sends never reaches the worker: it gets its own once, and its routes see none", async () => {
    const forged = { ...lb.auth, "x-svc-lb-credential": "forged-by-the-caller", "x-app": "kept" };
    const seen = await fetch(`${lb.base}/headers`, { headers: forged });
    expect(seen.status).toBe(200);
    const headers = (await seen.json()) as Record<string, string>;
    expect(headers["x-app"]).toBe("kept");
    expect(Object.keys(headers).filter((h) => /credential|authorization/i.test(h))).toEqual([]);

    // What a worker receives, byte for byte: one that records every request's raw headers.
    const received: Array<{ url: string; raw: string[] }> = [];
    const recorder: Server = createServer((req: IncomingMessage, res) => {
      received.push({ url: req.url ?? "", raw: req.rawHeaders });
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("recorded");
    });
    await new Promise<void>((r) => recorder.listen(0, "127.0.0.1", r));
    try {
      const recorded = await byHand("recorded");
      expect((await recorded.register(`http://127.0.0.1:${(recorder.address() as AddressInfo).port}`)).status).toBe(200);
      const answer = await until("the recording worker to take traffic", async () => {
        const r = await fetch(`${lbEndpointUrl(service.url, recorded.id)}/anything`, { headers: forged });
        return r.status === 200 ? r : undefined;
      });
      expect(await answer.text()).toBe("recorded");
      const own = lbCredentialOfToken(recorded.worker.key);
      const credentialsOf = (raw: string[]) => raw.filter((_, i) => i % 2 === 1 && raw[i - 1]!.toLowerCase() === "x-svc-lb-credential");
      const routed = received.filter((r) => r.url === "/anything");
      expect(routed.length).toBeGreaterThan(0);
      for (const r of routed) expect(credentialsOf(r.raw)).toEqual([own]);
      // Its /ping probes carry it too.
      const pings = received.filter((r) => r.url === "/ping");
      expect(pings.length).toBeGreaterThan(0);
      for (const r of pings) expect(credentialsOf(r.raw)).toEqual([own]);
    } finally {
      recorder.closeAllConnections();
      await new Promise<void>((r) => recorder.close(() => r()));
    }
  });

  it("a worker that registers at another worker's address gets no traffic there: A's requests never reach B's worker", async () => {
    // A's worker (a token of endpoint A, as a handler reads from its environment) says it listens where B's does.
    const a = await byHand("tenanta");
    expect((await a.register(tcpAddress)).status).toBe(200);
    // B's worker refuses the service's /ping for A (A's credential is not B's): A's worker never becomes ready,
    // and A's request waits out the service's wait instead of reading B's data.
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${lbEndpointUrl(service.url, a.id)}/private`, { headers: lb.auth });
      const body = await response.text();
      expect(body).not.toContain(SECRET);
      expect(response.status).toBe(503);
    }
    const health = (await (await fetch(`${service.url}/v2/${a.id}/health`, { headers: lb.auth })).json()) as { pool: { ready: number; notReady: number } };
    expect(health.pool).toEqual({ ready: 0, notReady: 1 });
    // A's endpoint log says why.
    const logs = (
      (await (await fetch(`${service.url}/v1/endpoints/${a.id}/logs`, { headers: lb.auth })).json()) as { lines: Array<{ text: string }> }
    ).lines.map((l) => l.text);
    expect(logs.filter((t) => t.includes("refused worker"))).toEqual([
      `lb: ${tcpAddress} refused worker ${a.worker.id}'s credential (/ping answered 403): the server there is not that worker; it gets no traffic`,
    ]);
    // B is not disturbed.
    const b = await fetch(`${lb.base}/private`, { headers: lb.auth });
    expect([b.status, await b.json()]).toEqual([200, { secret: SECRET }]);
  });
});

// The process driver gives its workers a local socket (which wins for traffic); here a driver that says where
// each worker is at an address of its own (as Docker's published port is): a recorder standing in for it.
describe("a worker whose driver gave it an address", () => {
  const received: Array<{ url: string; raw: string[] }> = [];
  const recorder: Server = createServer((req: IncomingMessage, res) => {
    received.push({ url: req.url ?? "", raw: req.rawHeaders });
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("at the driver's address");
  });
  let app: LiveApp;
  let cacheDir: string;
  beforeAll(async () => {
    await new Promise<void>((r) => recorder.listen(0, "127.0.0.1", r));
    const driverAddress = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`;
    cacheDir = mkdtempSync(join(tmpdir(), "svc-lb-driver-address-"));
    const real = createProcessDriver({ cacheDir, closeGraceMs: 500, localSockets: false });
    const driver: WorkerDriver = {
      name: real.name,
      close: () => real.close(),
      async start(launch) {
        const handle = await real.start(launch);
        return { workerId: handle.workerId, exited: handle.exited, stop: (ms) => handle.stop(ms), kill: () => handle.kill(), address: driverAddress };
      },
    };
    app = await startApp("fixtures/lb-app", { resources: { api: { workersMin: 1, workersMax: 1, env: { LB_APP_INIT_MS: "0" } } }, service: { driver } });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    recorder.closeAllConnections();
    await new Promise<void>((r) => recorder.close(() => r()));
    rmSync(cacheDir, { recursive: true, force: true });
  });

  it("is served at the driver's address, never at the one it registers, with the credential of the token it registered with", async () => {
    const api = app.endpoints.find((e) => e.name === "api")!;
    const auth = { authorization: `Bearer ${app.key}` };
    const answer = await until("the worker to take traffic", async () => {
      const r = await fetch(`${lbEndpointUrl(app.service.url, api.id)}/items/1`, { headers: auth });
      return r.status === 200 ? r : undefined;
    });
    expect(await answer.text()).toBe("at the driver's address");
    const credentials = received.flatMap((r) => r.raw.filter((_, i) => i % 2 === 1 && r.raw[i - 1]!.toLowerCase() === "x-svc-lb-credential"));
    expect(credentials.length).toBeGreaterThan(0);
    expect(new Set(credentials).size).toBe(1);
    expect(credentials[0]).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});
