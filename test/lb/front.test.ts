// The LB front (src/service/lb/front.ts) on a real service: plain LB requests are served by the front, everything
// else on the same connection is handed to node:http with its bytes and answered as before. Raw sockets, so that
// connection reuse, pipelining and split writes are what the test says they are.

import { connect } from "node:net";
import { Raw, type Answer } from "./raw-http.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, until, type LiveApp } from "./harness.js";

let app: LiveApp;
let endpointId: string;
let port: number;

beforeAll(async () => {
  app = await startApp("fixtures/lb-app", { resources: { api: { workersMin: 1, workersMax: 1, maxConcurrency: 8, idleTimeout: 60 } } });
  endpointId = app.endpoints.find((e) => e.name === "api")!.id;
  port = app.service.port;
  // The one worker is up and ready (its /ping answered 200) before the tests start.
  await until(
    "a ready worker",
    async () => {
      const r = await fetch(`${app.service.url}/lb/${endpointId}/items/warm`, { headers: { authorization: `Bearer ${app.key}` } });
      return r.status === 200 ? true : undefined;
    },
    30_000,
  );
});

afterAll(async () => {
  await app?.close();
});

const get = (path: string, extra = "") => `GET ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nauthorization: Bearer ${app.key}\r\n${extra}\r\n`;
const post = (path: string, body: string | Buffer, type = "application/json") =>
  Buffer.concat([
    Buffer.from(
      `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nauthorization: Bearer ${app.key}\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`,
      "latin1",
    ),
    Buffer.isBuffer(body) ? body : Buffer.from(body),
  ]);
const json = (a: Answer) => JSON.parse(a.body.toString("utf8"));
const stats = () => app.service.lbFrontStats()!;

describe("the LB front", () => {
  it("serves plain LB requests itself: headers, rate limits and keep-alive as node:http gives them", async () => {
    const before = stats();
    const raw = new Raw(port);
    raw.send(get(`/lb/${endpointId}/items/7?q=x`));
    const first = await raw.answer();
    expect(first.status).toBe(200);
    expect(json(first)).toMatchObject({ id: "7", q: "x" });
    expect(first.headers["x-svc-worker"]).toMatch(/^w/);
    expect(first.headers["content-type"]).toBe("application/json");
    expect(first.headers["ratelimit"]).toMatch(/^"minute";r=\d+;t=\d+/);
    expect(first.headers["ratelimit-policy"]).toMatch(/^"minute";q=\d+;w=60/);
    expect(first.headers["date"]).toBeTruthy();
    expect(first.headers["keep-alive"]).toBe("timeout=65");
    // The worker's own connection headers are not passed on.
    expect(first.headers["connection"]).toBe("keep-alive");
    raw.send(post(`/lb/${endpointId}/echo`, '{"a":[1,2]}'));
    expect(json(await raw.answer())).toEqual({ got: { a: [1, 2] }, contentType: "application/json" });
    raw.send(get(`/lb/${endpointId}/teapot`));
    const teapot = await raw.answer();
    expect([teapot.status, teapot.body.toString(), teapot.headers["set-cookie"], teapot.headers["x-app"]]).toEqual([418, "short and stout", "a=1", "lb-app"]);
    raw.close();
    expect(stats().served - before.served).toBe(3);
  });

  it("hands a connection to node:http at the first request it does not serve, and node answers it and the rest", async () => {
    const raw = new Raw(port);
    raw.send(get(`/lb/${endpointId}/items/1`));
    expect((await raw.answer()).status).toBe(200);
    const before = stats();
    // The service's OpenAPI document on the same connection: a route the front does not serve.
    raw.send(get(`/openapi.json`, "accept: application/json\r\n"));
    const document = await raw.answer();
    expect(document.status).toBe(200);
    expect(json(document)).toHaveProperty("openapi");
    expect(stats().handedOver - before.handedOver).toBeGreaterThanOrEqual(1);
    // node:http now owns the connection and still proxies LB requests (its own path).
    raw.send(get(`/lb/${endpointId}/items/2`));
    const after = await raw.answer();
    expect([after.status, json(after).id]).toEqual([200, "2"]);
    expect(stats().served).toBe(before.served);
    raw.close();
  });

  it("answers pipelined requests in order, the LB ones and a non-LB one behind them", async () => {
    const raw = new Raw(port);
    const before = stats();
    raw.send(
      get(`/lb/${endpointId}/slow?ms=150`) +
        get(`/lb/${endpointId}/items/b`) +
        get(`/openapi.json`, "accept: application/json\r\n") +
        get(`/lb/${endpointId}/items/d`),
    );
    const a = await raw.answer();
    const b = await raw.answer();
    const c = await raw.answer();
    const d = await raw.answer();
    expect([a.status, b.status, c.status, d.status]).toEqual([200, 200, 200, 200]);
    expect(json(b).id).toBe("b");
    expect(json(c)).toHaveProperty("openapi");
    expect(json(d).id).toBe("d");
    // The two LB requests ahead of the non-LB one were the front's; from that one on, node:http's.
    expect(stats().served - before.served).toBe(2);
    raw.close();
  });

  it("waits for a body that arrives in pieces, and serves a head split across writes through node:http", async () => {
    const before = stats();
    const raw = new Raw(port);
    const whole = post(`/lb/${endpointId}/bytes`, Buffer.from([0, 1, 2, 255, 254, 10, 13, 0]), "application/octet-stream");
    const headEnd = whole.indexOf("\r\n\r\n") + 4;
    raw.send(whole.subarray(0, headEnd + 3));
    await new Promise((r) => setTimeout(r, 50));
    raw.send(whole.subarray(headEnd + 3));
    const bytes = await raw.answer();
    expect([bytes.status, bytes.headers["x-byte-count"], [...bytes.body]]).toEqual([201, "8", [0, 1, 2, 255, 254, 10, 13, 0]]);
    expect(stats().served - before.served).toBe(1);
    raw.close();

    const split = new Raw(port);
    const request = get(`/lb/${endpointId}/items/split`);
    split.send(request.slice(0, 20));
    await new Promise((r) => setTimeout(r, 50));
    split.send(request.slice(20));
    const answer = await split.answer();
    expect([answer.status, json(answer).id]).toEqual([200, "split"]);
    expect(stats().served - before.served).toBe(1);
    split.close();
  });

  it("leaves chunked bodies, HTTP/1.0, bad keys and broken requests to node:http, which answers them as before", async () => {
    const before = stats();
    const chunked = new Raw(port);
    chunked.send(
      `POST /lb/${endpointId}/bytes HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${app.key}\r\ntransfer-encoding: chunked\r\ncontent-type: application/octet-stream\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n`,
    );
    const bytes = await chunked.answer();
    expect([bytes.status, bytes.body.toString()]).toEqual([201, "abcde"]);
    chunked.close();

    const old = new Raw(port);
    old.send(`GET /lb/${endpointId}/items/old HTTP/1.0\r\nauthorization: Bearer ${app.key}\r\n\r\n`);
    const answer = await old.answer();
    expect([answer.status, json(answer).id]).toEqual([200, "old"]);
    await until("HTTP/1.0 connection closed", () => old.closed || undefined, 5000);

    const bad = new Raw(port);
    bad.send(`GET /lb/${endpointId}/items/1 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer not-a-key\r\n\r\n`);
    const refused = await bad.answer();
    expect([refused.status, refused.headers["content-type"], refused.headers["www-authenticate"]]).toEqual([401, "application/problem+json", "Bearer"]);
    bad.send(`GET /lb/${endpointId}/items/1 HTTP/1.1\r\nhost: x\r\n\r\n`);
    expect((await bad.answer()).status).toBe(401);
    bad.close();

    const broken = new Raw(port);
    broken.send(`GET /lb/${endpointId}/items/1 HTTP/1.1\r\nhost: x\r\nbad header line\r\n\r\n`);
    const problem = await broken.answer();
    expect([problem.status, problem.headers["content-type"]]).toEqual([400, "application/problem+json"]);
    broken.close();
    // None of them was the front's: each connection went to node:http (workers' own connections may add more).
    expect(stats().served).toBe(before.served);
    expect(stats().handedOver - before.handedOver).toBeGreaterThanOrEqual(4);
  });

  it("serves a key it has not seen before on the same connection after looking it up", async () => {
    const { key } = await app.service.mintKey({ scopes: [`jobs:${endpointId}`] });
    const before = stats();
    const raw = new Raw(port);
    raw.send(get(`/lb/${endpointId}/items/new`).replace(app.key, key));
    const answer = await raw.answer();
    expect([answer.status, json(answer).id]).toEqual([200, "new"]);
    expect(stats().served - before.served).toBe(1);
    raw.close();
  });

  it("reads each request's key on a kept connection: another key there is checked as that key", async () => {
    const { key: elsewhere } = await app.service.mintKey({ scopes: ["jobs:someotherendpoint"] });
    const before = stats();
    const raw = new Raw(port);
    raw.send(get(`/lb/${endpointId}/items/mine`));
    expect((await raw.answer()).status).toBe(200);
    // Same connection, a key without access to this endpoint: refused as that key, not served as the first one.
    raw.send(get(`/lb/${endpointId}/items/theirs`).replace(app.key, elsewhere));
    const refused = await raw.answer();
    expect([refused.status, refused.headers["content-type"]]).toEqual([403, "application/problem+json"]);
    raw.send(get(`/lb/${endpointId}/items/again`));
    expect([(await raw.answer()).status, stats().served - before.served]).toEqual([200, 3]);
    raw.close();
  });

  it("passes HEAD and streamed answers through, and closes when the caller asks", async () => {
    const before = stats();
    const raw = new Raw(port);
    raw.send(`HEAD /lb/${endpointId}/items/h HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${app.key}\r\n\r\n`);
    const head = await raw.answer(true);
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    raw.send(get(`/lb/${endpointId}/events?count=3&gap=50`));
    const events = await raw.answer();
    expect(events.headers["transfer-encoding"]).toBe("chunked");
    expect(events.body.toString().match(/^data:/gm)?.length).toBe(3);
    raw.send(get(`/lb/${endpointId}/items/last`, "connection: close\r\n"));
    const last = await raw.answer();
    expect([last.status, last.headers["connection"]]).toEqual([200, "close"]);
    await until("the server closes the connection", () => raw.closed || undefined, 5000);
    expect(stats().served - before.served).toBe(3);
  });
});

describe("the LB front under mixed traffic", () => {
  it("answers every request in order across random mixes, pipelining and split writes (seeded)", async () => {
    // mulberry32: the same sequence every run, so a failure can be replayed.
    let seed = 0x5eed;
    const random = () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const auth = `authorization: Bearer ${app.key}\r\n`;
    const kinds: Array<() => { text: string; status: number; head?: boolean }> = [
      () => ({ text: get(`/lb/${endpointId}/items/m${Math.floor(random() * 1000)}`), status: 200 }),
      () => ({ text: post(`/lb/${endpointId}/echo`, JSON.stringify({ n: random() })).toString("latin1"), status: 200 }),
      () => ({ text: get(`/v2/${endpointId}/health`), status: 200 }),
      () => ({ text: `GET /lb/${endpointId}/items/1 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer nope\r\n\r\n`, status: 401 }),
      () => ({ text: `POST /lb/${endpointId}/bytes HTTP/1.1\r\nhost: x\r\n${auth}transfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`, status: 201 }),
      () => ({ text: get(`/lb/${endpointId}/slow?ms=${Math.floor(random() * 20)}`), status: 200 }),
      () => ({ text: get(`/lb/${endpointId}/teapot`), status: 418 }),
      () => ({ text: `HEAD /lb/${endpointId}/items/h HTTP/1.1\r\nhost: x\r\n${auth}\r\n`, status: 200, head: true }),
    ];
    const session = async () => {
      const requests = Array.from({ length: 3 + Math.floor(random() * 6) }, () => kinds[Math.floor(random() * kinds.length)]!());
      const raw = new Raw(port);
      const plan: Array<{ text: string; split: number | undefined; pause: number }> = [];
      for (let i = 0; i < requests.length; ) {
        const group = 1 + Math.floor(random() * 3);
        const text = requests
          .slice(i, i + group)
          .map((r) => r.text)
          .join("");
        plan.push({ text, split: random() < 0.3 ? Math.floor(random() * text.length) : undefined, pause: random() < 0.5 ? Math.floor(random() * 15) : 0 });
        i += group;
      }
      const writing = (async () => {
        for (const step of plan) {
          if (step.split === undefined) raw.send(step.text);
          else {
            raw.send(step.text.slice(0, step.split));
            await new Promise((r) => setTimeout(r, 5));
            raw.send(step.text.slice(step.split));
          }
          if (step.pause > 0) await new Promise((r) => setTimeout(r, step.pause));
        }
      })();
      const statuses: number[] = [];
      for (const r of requests) statuses.push((await raw.answer(r.head)).status);
      await writing;
      raw.close();
      expect(statuses).toEqual(requests.map((r) => r.status));
    };
    const before = stats();
    for (let batch = 0; batch < 5; batch++) await Promise.all(Array.from({ length: 10 }, session));
    // Both sides of the hand-over were exercised.
    expect(stats().served - before.served).toBeGreaterThan(20);
    expect(stats().handedOver - before.handedOver).toBeGreaterThan(10);
  });
});

describe("the LB front on a cold endpoint", () => {
  it("waits through a cold start itself and keeps the connection; answers the route's problems itself", async () => {
    // idleTimeout 1 s: the deploy's probe worker (docs/deploy.md, Releases) idles out, then the endpoint is cold.
    const cold = await startApp("fixtures/lb-app", { resources: { api: { workersMin: 0, workersMax: 1, maxConcurrency: 4, idleTimeout: 1 } } });
    try {
      const id = cold.endpoints.find((e) => e.name === "api")!.id;
      await until(
        "the deploy's worker to idle out",
        async () => {
          const w = (
            (await (await fetch(`${cold.service.url}/v2/${id}/health`, { headers: { authorization: `Bearer ${cold.key}` } })).json()) as {
              workers: Record<string, number>;
            }
          ).workers;
          return w.idle! + w.running! + w.initializing! === 0 ? true : undefined;
        },
        20_000,
      );
      const before = cold.service.lbFrontStats()!;
      const socket = connect(cold.service.port, "127.0.0.1");
      const raw = new Raw(socket);
      const ask = (path: string) => `GET ${path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${cold.key}\r\n\r\n`;
      raw.send(ask(`/lb/${id}/items/first`));
      const first = await raw.answer();
      expect([first.status, JSON.parse(first.body.toString()).id]).toEqual([200, "first"]);
      raw.send(ask(`/lb/${"0".repeat(16)}/items/1`));
      const missing = await raw.answer();
      expect([missing.status, missing.headers["content-type"], JSON.parse(missing.body.toString()).detail]).toEqual([
        404,
        "application/problem+json",
        `No endpoint ${"0".repeat(16)}`,
      ]);
      expect(missing.headers["ratelimit"]).toBeTruthy();
      // HEAD: the same headers, no body (the next answer on the connection parses right after them).
      raw.send(`HEAD /lb/${"0".repeat(16)}/items/1 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${cold.key}\r\n\r\n`);
      const headMissing = await raw.answer(true);
      expect([headMissing.status, headMissing.headers["content-length"], headMissing.body.length]).toEqual([404, missing.headers["content-length"], 0]);
      raw.send(ask(`/lb/${id}/items/second`));
      expect((await raw.answer()).status).toBe(200);
      const after = cold.service.lbFrontStats()!;
      // All four answered by the front on this one connection (the worker's own calls to the service are
      // other connections, handed to node:http).
      expect(after.served - before.served).toBe(4);
      const health = (await (await fetch(`${cold.service.url}/v2/${id}/health`, { headers: { authorization: `Bearer ${cold.key}` } })).json()) as {
        coldStarts: { count: number };
      };
      expect(health.coldStarts.count).toBe(1);
      raw.close();
    } finally {
      await cold.close();
    }
  });
});
