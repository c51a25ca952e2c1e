import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RouteDefinition } from "svc/internal";
import { matchRoute, parseBody, serveRoutes, toResponse, type RouteServer } from "./lb.js";
import { lbCredentialOfToken } from "../lb-credential.js";

const routes: RouteDefinition[] = [
  { method: "POST", path: "/process", handler: async (body) => ({ got: body }) },
  { method: "GET", path: "/items/:id", handler: async (_b, ctx) => ({ id: ctx.params.id, q: ctx.query.get("q") }) },
  { method: "GET", path: "/raw", handler: () => new Uint8Array([1, 2, 3]) },
  { method: "GET", path: "/text", handler: () => "plain" },
  { method: "DELETE", path: "/items/:id", handler: () => undefined },
  { method: "GET", path: "/custom", handler: () => new Response("teapot", { status: 418, headers: { "x-kind": "tea" } }) },
  {
    method: "GET",
    path: "/boom",
    handler: () => {
      throw new Error("kaput");
    },
  },
];

describe("matchRoute / parseBody / toResponse", () => {
  it("matches paths with parameters, and tells 404 from 405", () => {
    expect(matchRoute(routes, "GET", "/items/a%20b/")).toMatchObject({ kind: "route", params: { id: "a b" } });
    expect(matchRoute(routes, "HEAD", "/items/1")).toMatchObject({ kind: "route" });
    expect(matchRoute(routes, "PUT", "/items/1")).toEqual({ kind: "method-not-allowed", allow: ["GET", "DELETE"] });
    expect(matchRoute(routes, "GET", "/nope")).toEqual({ kind: "not-found" });
  });
  it("parses bodies by content type", () => {
    expect(parseBody(Buffer.from('{"a":1}'), "application/json; charset=utf-8")).toEqual({ value: { a: 1 } });
    expect(parseBody(Buffer.from("{bad"), "application/json")).toHaveProperty("error");
    expect(parseBody(Buffer.from("hi"), "text/plain")).toEqual({ value: "hi" });
    expect(parseBody(Buffer.alloc(0), "application/json")).toEqual({ value: undefined });
    expect(parseBody(Buffer.from([0xff]), "application/octet-stream")).toEqual({ value: Buffer.from([0xff]) });
  });
  it("converts handler results", async () => {
    expect((await toResponse(undefined)).status).toBe(204);
    expect((await toResponse({ a: 1 })).headers["content-type"]).toBe("application/json");
    expect((await toResponse(new Response("x", { status: 201 }))).status).toBe(201);
  });
});

describe("serveRoutes", () => {
  let server: RouteServer;
  beforeAll(async () => {
    server = await serveRoutes(routes);
  });
  afterAll(async () => {
    await server.close();
  });
  const call = (path: string, init?: RequestInit) => fetch(`${server.address}${path}`, init);

  it("serves routes over real HTTP", async () => {
    const posted = await call("/process", { method: "POST", headers: { "content-type": "application/json" }, body: '{"x":[1,2]}' });
    expect(posted.status).toBe(200);
    expect(await posted.json()).toEqual({ got: { x: [1, 2] } });
    expect(await (await call("/items/42?q=z")).json()).toEqual({ id: "42", q: "z" });
    expect(Buffer.from(await (await call("/raw")).arrayBuffer())).toEqual(Buffer.from([1, 2, 3]));
    expect(await (await call("/text")).text()).toBe("plain");
    expect((await call("/items/1", { method: "DELETE" })).status).toBe(204);
    const custom = await call("/custom");
    expect([custom.status, custom.headers.get("x-kind"), await custom.text()]).toEqual([418, "tea", "teapot"]);
  });

  it("answers /ping, and problem+json for errors", async () => {
    expect(await (await call("/ping")).json()).toEqual({ status: "healthy" });
    const missing = await call("/nope");
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toBe("application/problem+json");
    const wrong = await call("/process");
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe("POST");
    const boom = await call("/boom");
    expect(boom.status).toBe(500);
    expect(await boom.json()).toMatchObject({ title: "Internal Server Error", status: 500, detail: "kaput" });
    const bad = await call("/process", { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
    expect(bad.status).toBe(400);
  });
});

describe("serveRoutes on a local socket too (SVC_LB_SOCKET)", () => {
  const viaSocket = (socketPath: string, path: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest({ socketPath, path, headers: { host: "w" } }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      req.end();
    });

  it("answers the same routes on the socket as on its port, and removes the socket file when it closes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-lb-sock-"));
    const socketPath = join(dir, "w1.sock");
    // A file left by a killed worker of the same id does not stop it.
    writeFileSync(socketPath, "stale");
    const server = await serveRoutes(routes, { socketPath });
    try {
      expect(server.socket).toBe(socketPath);
      expect(await viaSocket(socketPath, "/items/7?q=a")).toEqual({ status: 200, body: '{"id":"7","q":"a"}' });
      expect((await viaSocket(socketPath, "/ping")).status).toBe(200);
      expect(await (await fetch(`${server.address}/items/8`)).json()).toEqual({ id: "8", q: null });
    } finally {
      await server.close();
    }
    expect(existsSync(socketPath)).toBe(false);
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves on its port alone when it cannot listen on the socket, and says so (no `socket`)", async () => {
    const server = await serveRoutes(routes, { socketPath: join(tmpdir(), "svc-no-such-dir-for-sockets", "w.sock") });
    try {
      expect(server.socket).toBeUndefined();
      expect((await fetch(`${server.address}/ping`)).status).toBe(200);
    } finally {
      await server.close();
    }
  });
});

describe("serveRoutes with a credential (only the service's proxy reaches the routes)", () => {
  const credential = lbCredentialOfToken("svcw_this_worker");
  let calls = 0;
  const seen: Array<Record<string, unknown>> = [];
  const guarded: RouteDefinition[] = [
    {
      method: "GET",
      path: "/private",
      handler: (_b, ctx) => {
        calls++;
        seen.push({ ...ctx.headers });
        return { secret: "mine" };
      },
    },
  ];
  let server: RouteServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-lb-cred-"));
    server = await serveRoutes(guarded, { credential, socketPath: join(dir, "w.sock") });
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses a request without it (401) or with another (403) before any route or /ping answers", async () => {
    for (const path of ["/private", "/ping", "/nope"]) {
      const none = await fetch(`${server.address}${path}`);
      expect(none.status).toBe(401);
      expect(none.headers.get("content-type")).toBe("application/problem+json");
      expect(await none.json()).toMatchObject({ status: 401, detail: expect.stringContaining("x-svc-lb-credential") });
      for (const forged of [lbCredentialOfToken("svcw_another_worker"), `${credential}x`, credential.toUpperCase(), ""]) {
        const res = await fetch(`${server.address}${path}`, { headers: { "x-svc-lb-credential": forged } });
        expect(res.status, forged).toBe(403);
        expect(await res.text()).not.toContain("mine");
      }
    }
    // Twice, even with the right one among them: node joins them, and the join is not the credential.
    const twice = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${server.address}/private`, { headers: { "x-svc-lb-credential": [credential, credential] } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end();
    });
    expect(twice).toBe(403);
    const head = await fetch(`${server.address}/private`, { method: "HEAD" });
    expect(head.status).toBe(401);
    expect(calls).toBe(0);
  });

  it("serves with it, on its port and its socket, and the route never sees it", async () => {
    const ok = await fetch(`${server.address}/private`, { headers: { "x-svc-lb-credential": credential, "x-app": "a" } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ secret: "mine" });
    expect((await fetch(`${server.address}/ping`, { headers: { "x-svc-lb-credential": credential } })).status).toBe(200);
    const viaSocket = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({ socketPath: join(dir, "w.sock"), path: "/private", headers: { host: "w", "x-svc-lb-credential": credential } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end();
    });
    expect(viaSocket).toBe(200);
    const refused = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({ socketPath: join(dir, "w.sock"), path: "/private", headers: { host: "w" } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end();
    });
    expect(refused).toBe(401);
    expect(calls).toBe(2);
    expect(seen[0]).toMatchObject({ "x-app": "a" });
    for (const headers of seen) expect(Object.keys(headers)).not.toContain("x-svc-lb-credential");
  });
});
