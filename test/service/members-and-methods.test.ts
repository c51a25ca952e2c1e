// Against a real `svc server`: a body member named like something of Object.prototype (`__proto__`,
// `constructor`, `toString`...) is an unknown member like any other (422, nothing changed), on every route whose
// docs refuse unknown members; and every method on every route family gets an answer, CONNECT and Upgrade
// included, never a closed connection.

import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServerProcess, type ServerProcess } from "../server-process.js";

const KEY = "members-methods-admin-key";
let work: string;
let server: ServerProcess;
let api: (method: string, path: string, body?: string) => Promise<{ status: number; body: any }>;
const ids: Record<string, string> = {};

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-members-"));
  server = await startServerProcess({ dataDir: join(work, "data"), env: { SVC_API_KEY: KEY }, workers: "none" });
  api = async (method, path, body) => {
    const res = await fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" }, body });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  ids.volume = (await api("POST", "/v2/network-volumes", JSON.stringify({ name: "v", size: 10, dataCenter: "local" }))).body.id;
  ids.template = (await api("POST", "/v1/templates", JSON.stringify({ name: "t", imageName: "example/app:1" }))).body.id;
  ids.endpoint = (await api("POST", "/v1/endpoints", JSON.stringify({ name: "e", templateId: ids.template }))).body.id;
  for (const [k, v] of Object.entries(ids)) if (!v) throw new Error(`setup: no ${k}`);
}, 60_000);
afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

const PROTOTYPE_NAMES = ["__proto__", "constructor", "toString", "hasOwnProperty", "prototype", "valueOf"];

describe("members named like Object.prototype's", () => {
  const routes = () => [
    { method: "POST", path: "/v2/network-volumes", valid: { name: "v2", size: 10, dataCenter: "local" } },
    { method: "PATCH", path: `/v2/network-volumes/${ids.volume}`, valid: { name: "renamed" }, read: `/v2/network-volumes/${ids.volume}` },
    { method: "POST", path: "/v1/templates", valid: { name: "t2", imageName: "example/app:2" } },
    { method: "POST", path: "/v1/endpoints", valid: { name: "e2", templateId: ids.template } },
    { method: "PATCH", path: `/v1/endpoints/${ids.endpoint}`, valid: { name: "renamed" }, read: `/v1/endpoints/${ids.endpoint}` },
    { method: "POST", path: "/v1/keys", valid: { scopes: ["jobs:*"] } },
    { method: "PUT", path: "/v1/secrets/TOKEN", valid: { value: "v" } },
  ];

  it("is refused as an unknown member (422 naming it), at the top and nested, and changes nothing", async () => {
    for (const route of routes()) {
      const before = route.read ? (await api("GET", route.read)).body : undefined;
      for (const name of PROTOTYPE_NAMES) {
        // Written as text: an object literal's __proto__ would set the prototype, not add a member.
        const text = JSON.stringify(route.valid).replace(/^\{/, `{${JSON.stringify(name)}: {"polluted": true}, `);
        const r = await api(route.method, route.path, text);
        expect({ route: `${route.method} ${route.path}`, name, status: r.status }).toEqual({ route: `${route.method} ${route.path}`, name, status: 422 });
        expect(r.body.errors).toContain(`$.${name}: unknown property`);
      }
      if (route.read) expect((await api("GET", route.read)).body).toEqual(before);
    }
    // Nested too: a policy of a job.
    const job = await api("POST", `/v2/${ids.endpoint}/run`, '{"input": {}, "policy": {"__proto__": {"ttl": 1}}}');
    expect(job.status).toBe(422);
    expect(job.body.errors).toContain("$.policy.__proto__: unknown property");
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });
});

/** Send a request by hand and read its status line (or say the connection closed with none). */
function rawStatus(request: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(server.url).port), "127.0.0.1", () => socket.write(request));
    let out = "";
    socket.on("data", (d) => {
      out += d;
      // The status line is the answer; the connection may stay open (keep-alive).
      if (out.includes("\r\n")) socket.destroy();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => resolve(out.split("\r\n")[0] || "no answer"));
    setTimeout(() => socket.destroy(), 3000);
  });
}

describe("every method on every route family", () => {
  it("answers CONNECT, TRACE, PROPFIND and an unknown method with a 4xx status line, and an Upgrade request as a plain one", async () => {
    const families = [
      "/v1/apps",
      `/v2/${ids.endpoint}/run`,
      // A POST-only route: the endpoint runs an image, whose OpenAI routes (a GET of models too) are jobs for its
      // workers, and it has none here to answer them.
      `/v2/${ids.endpoint}/openai/v1/chat/completions`,
      "/v1/keys",
      "/_worker/v1/take",
      `/lb/${ids.endpoint}/items`,
      "/openapi.json",
      "/console/",
    ];
    const auth = `Authorization: Bearer ${KEY}\r\n`;
    for (const path of families) {
      for (const request of [
        `CONNECT ${path} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`,
        `TRACE ${path} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`,
        `PROPFIND ${path} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`,
        `FOO ${path} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`,
        `GET ${path} HTTP/1.1\r\nHost: x\r\n${auth}Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
      ]) {
        const line = await rawStatus(request);
        const upgrade = request.includes("Upgrade: websocket");
        expect({ request: request.split("\r\n")[0], line }).toEqual({
          request: request.split("\r\n")[0],
          line: expect.stringMatching(upgrade ? /^HTTP\/1\.1 [1-5]\d\d / : /^HTTP\/1\.1 4\d\d /),
        });
      }
    }
    const connect = await rawStatus("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    expect(connect).toBe("HTTP/1.1 405 Method Not Allowed");
    expect((await fetch(`${server.url}/openapi.json`)).status).toBe(200);
  }, 60_000);
});
