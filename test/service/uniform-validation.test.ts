// Uniform validation against a real service: prototype-named members (`__proto__`, `constructor`, ...) are
// unknown properties like any other (422, nothing stored), and every method on every route family gets an
// answer with a status and a problem+json body, through the LB front and without it.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "node:net";
import { call, manifest, resource, startTestService, type TestService } from "./helpers.js";

const PROTO_NAMES = ["__proto__", "constructor", "toString", "hasOwnProperty", "prototype", "valueOf"];

/** One raw HTTP/1.1 exchange: the request line is written as given, so CONNECT and unknown methods go out as is. */
function rawRequest(port: number, method: string, path: string, key: string): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    });
    let data = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (data += chunk));
    socket.on("error", reject);
    socket.on("close", () => {
      const split = data.indexOf("\r\n\r\n");
      const head = split < 0 ? data : data.slice(0, split);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head: head.toLowerCase(), body: split < 0 ? "" : data.slice(split + 4) });
    });
    setTimeout(() => socket.destroy(), 5000).unref();
  });
}

for (const lbFront of [true, false]) {
  describe(`with the LB front ${lbFront ? "on" : "off"}`, () => {
    let t: TestService;
    let base: string;
    let port: number;
    beforeAll(async () => {
      t = await startTestService({ lbFront });
      base = t.service.url;
      port = Number(new URL(base).port);
    });
    afterAll(async () => {
      await t?.close();
    });

    describe("prototype-named members are unknown properties", () => {
      it.each(PROTO_NAMES)("POST /v2/network-volumes with %s: 422 naming it, nothing created", async (name) => {
        const before = (await call(`${base}/v2/network-volumes`, { key: t.key })).body as unknown[];
        const r = await call(`${base}/v2/network-volumes`, { key: t.key, raw: `{"name":"v","size":20,"dataCenter":"local","${name}":{"x":1}}` });
        expect(r.status).toBe(422);
        expect(r.headers.get("content-type")).toContain("application/problem+json");
        expect(r.body.errors).toContain(`$.${name}: unknown property`);
        expect((await call(`${base}/v2/network-volumes`, { key: t.key })).body).toEqual(before);
      });

      it.each(PROTO_NAMES)("PATCH /v2/network-volumes/{id} with %s: 422 naming it, the volume unchanged", async (name) => {
        const created = await call(`${base}/v2/network-volumes`, { key: t.key, body: { name: `keep-${name}`, size: 20, dataCenter: "local" } });
        expect(created.status).toBe(201);
        const url = `${base}/v2/network-volumes/${created.body.id}`;
        const before = (await call(url, { key: t.key })).body;
        const r = await call(url, { key: t.key, method: "PATCH", raw: `{"size":30,"${name}":{"size":40}}` });
        expect(r.status).toBe(422);
        expect(r.headers.get("content-type")).toContain("application/problem+json");
        expect(r.body.errors).toContain(`$.${name}: unknown property`);
        expect((await call(url, { key: t.key })).body).toEqual(before);
      });

      it.each(PROTO_NAMES)("POST /v1/keys with %s: 422 naming it, no key minted", async (name) => {
        const before = (await call(`${base}/v1/keys`, { key: t.key })).body;
        const r = await call(`${base}/v1/keys`, { key: t.key, raw: `{"name":"k","scopes":["management:read"],"${name}":1}` });
        expect(r.status).toBe(422);
        expect(r.body.errors).toContain(`$.${name}: unknown property`);
        expect((await call(`${base}/v1/keys`, { key: t.key })).body).toEqual(before);
      });

      it.each(PROTO_NAMES)("POST /v1/endpoints with %s: 422 naming it, no endpoint created", async (name) => {
        const before = (await call(`${base}/v1/endpoints`, { key: t.key })).body;
        const r = await call(`${base}/v1/endpoints`, { key: t.key, raw: `{"name":"e","imageName":"img:1","${name}":{"workersMax":3}}` });
        expect(r.status).toBe(422);
        expect(r.headers.get("content-type")).toContain("application/problem+json");
        expect(r.body.errors).toContain(`$.${name}: unknown property`);
        expect((await call(`${base}/v1/endpoints`, { key: t.key })).body).toEqual(before);
      });

      it.each(PROTO_NAMES)("POST /v1/templates with %s: 422 naming it, no template created", async (name) => {
        const before = (await call(`${base}/v1/templates`, { key: t.key })).body;
        const r = await call(`${base}/v1/templates`, { key: t.key, raw: `{"name":"t-${name}","imageName":"img:1","${name}":{"a":1}}` });
        expect(r.status).toBe(422);
        expect(r.body.errors).toContain(`$.${name}: unknown property`);
        expect((await call(`${base}/v1/templates`, { key: t.key })).body).toEqual(before);
      });
    });

    const ACTIONS = ["plan", "activate", "undeploy", "config"];
    const ACTION_CASES = ACTIONS.flatMap((action) => PROTO_NAMES.map((name) => [action, name] as const));
    it.each(ACTION_CASES)("POST /v1/apps/{app}/environments/{env}/%s with %s: 422 naming it, the environment unchanged", async (action, name) => {
      const envUrl = `${base}/v1/apps/proto/environments/dev`;
      expect((await call(envUrl, { key: t.key, method: "PUT" })).status).toBeLessThan(300);
      const before = (await call(envUrl, { key: t.key })).body;
      const r = await call(`${envUrl}/${action}`, { key: t.key, raw: `{"all":true,"dryRun":true,"${name}":{"build":"x"}}` });
      expect(r.status).toBe(422);
      expect(r.headers.get("content-type")).toContain("application/problem+json");
      expect(r.body.errors).toContain(`$.${name}: unknown property`);
      expect((await call(envUrl, { key: t.key })).body).toEqual(before);
    });

    it.each(PROTO_NAMES)("POST /v2/{endpoint}/run with %s (top level and in policy): 422 naming it, no job queued", async (name) => {
      const [echo] = await t.service.deploy({ app: "jobs", env: "prod", artifactPath: t.artifact, manifest: manifest({ echo: resource() }) });
      const before = (await call(`${base}/v2/${echo!.id}/health`, { key: t.key })).body.jobs;
      expect(before.inQueue).toBeTypeOf("number");
      const top = await call(`${base}/v2/${echo!.id}/run`, { key: t.key, raw: `{"input":{},"${name}":{"x":1}}` });
      expect(top.status).toBe(422);
      expect(top.headers.get("content-type")).toContain("application/problem+json");
      expect(top.body.errors).toContain(`$.${name}: unknown property`);
      const nested = await call(`${base}/v2/${echo!.id}/run`, { key: t.key, raw: `{"input":{},"policy":{"${name}":{"ttl":1}}}` });
      expect(nested.status).toBe(422);
      expect(nested.body.errors).toContain(`$.policy.${name}: unknown property`);
      expect((await call(`${base}/v2/${echo!.id}/health`, { key: t.key })).body.jobs).toEqual(before);
    });

    it("a websocket Upgrade request is answered as a plain request (no protocol switch)", async () => {
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, "127.0.0.1", () => {
          socket.write(
            `GET /v2/network-volumes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
          );
        });
        let data = "";
        socket.on("data", (chunk) => {
          data += chunk;
          if (data.includes("\r\n\r\n")) socket.destroy();
        });
        socket.on("error", reject);
        socket.on("close", () => resolve(data));
      });
      expect(answer).toMatch(/^HTTP\/1\.1 200 /);
      expect((await call(`${base}/v2/network-volumes`, { key: t.key })).status).toBe(200);
    });

    describe("every method gets an answer", () => {
      const PATHS = [
        "/health",
        "/v2/some-endpoint/health",
        "/openapi.json",
        "/console",
        "/v2/network-volumes",
        "/v1/endpoints",
        "/v1/templates",
        "/v1/keys",
        "/v1/apps",
        "/_worker/v1/job-take",
        "/v2/some-endpoint/run",
        "/lb/some-endpoint/x",
        "/openai/some-endpoint/v1/chat/completions",
      ];
      const METHODS = ["CONNECT", "TRACE", "FOO", "PROPFIND", "DELETE", "PUT"];
      const CASES = PATHS.flatMap((path) => METHODS.map((method) => [method, path] as const));
      it.each(CASES)("%s %s: a status, problem+json, and the service still answers afterwards", async (method, path) => {
        const r = await rawRequest(port, method, path, t.key);
        expect(r.status, r.head).toBeGreaterThanOrEqual(400);
        expect(r.status, r.head).toBeLessThan(500);
        expect(r.head).toContain("content-type: application/problem+json");
        expect(JSON.parse(r.body).status).toBe(r.status);
        if (r.status === 405) expect(r.head).toMatch(/\r\nallow: [a-z]/);
        expect((await call(`${base}/v2/network-volumes`, { key: t.key })).status).toBe(200);
      });
    });
  });
}
