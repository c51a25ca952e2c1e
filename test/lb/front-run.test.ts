// Job `/run`s on the LB front (src/service/lb/front.ts, jobs/routes.ts quickRun): a plain submission is answered by
// the front without node:http, with the answer node:http gives; anything else on the same connection (a bad body, an
// unknown endpoint, another content type) is handed to node:http with its bytes and answered exactly as before.
// Raw sockets, so that which connection carries which request is what the test says it is.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, until, type LiveApp } from "./harness.js";
import { Raw } from "./raw-http.js";

let app: LiveApp;
let endpointId: string;

beforeAll(async () => {
  app = await startApp("fixtures/service-app");
  endpointId = app.endpoints.find((e) => e.name === "greeter")!.id;
});

afterAll(async () => {
  await app?.close();
});

/** Send a request's bytes on `conn`, read its answer (or, without bytes, the next answer of requests sent before). */
async function exchange(conn: Raw, request?: Buffer): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  if (request) conn.send(request);
  const answer = await conn.answer();
  return { ...answer, body: answer.body.toString("utf8") };
}

const post = (path: string, body: string, type = "application/json") =>
  Buffer.from(
    `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${app.key}\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
const get = (path: string) => Buffer.from(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${app.key}\r\n\r\n`);
const stats = () => app.service.lbFrontStats()!;

async function completed(jobId: string): Promise<Record<string, unknown>> {
  return until(
    `job ${jobId} completed`,
    async () => {
      const r = await fetch(`${app.service.url}/v2/${endpointId}/status/${jobId}`, { headers: { authorization: `Bearer ${app.key}` } });
      const job = (await r.json()) as Record<string, unknown>;
      return job.status === "COMPLETED" ? job : undefined;
    },
    30_000,
  );
}

describe("job /run on the LB front", () => {
  it("answers a plain /run itself, as node:http does, and the job runs", async () => {
    const conn = new Raw(app.service.port);
    const before = stats();
    const quick = await exchange(conn, post(`/v2/${endpointId}/run`, '{"input":{"who":"front"}}'));
    const after = stats();
    expect(quick.status).toBe(200);
    // (Connections handed over meanwhile are the workers': the job starts one.)
    expect(after.served).toBe(before.served + 1);
    const job = JSON.parse(quick.body) as { id: string; status: string };
    expect(job.status).toBe("IN_QUEUE");
    expect(quick.headers["content-type"]).toBe("application/json");
    expect(quick.headers["ratelimit"]).toMatch(/^"minute";r=\d+;t=\d+/);
    expect(quick.headers["ratelimit-policy"]).toMatch(/^"minute";q=\d+;w=60/);
    expect(quick.headers["date"]).toBeTruthy();
    expect(quick.headers["connection"]).toBe("keep-alive");
    expect((await completed(job.id)).output).toMatchObject({ message: "hello front" });

    // The same submission through node:http (a query string is node's to read): the same answer.
    const beforeNode = stats();
    const viaNode = await exchange(conn, post(`/v2/${endpointId}/run?x=1`, '{"input":{"who":"node"}}'));
    expect(stats().handedOver).toBeGreaterThanOrEqual(beforeNode.handedOver + 1);
    expect(stats().served).toBe(beforeNode.served);
    expect(viaNode.status).toBe(200);
    expect(Object.keys(JSON.parse(viaNode.body))).toEqual(Object.keys(job));
    expect(Object.keys(viaNode.headers).sort()).toEqual(Object.keys(quick.headers).sort());
    expect((await completed((JSON.parse(viaNode.body) as { id: string }).id)).output).toMatchObject({ message: "hello node" });
    conn.close();
  });

  it("keeps the connection for the next /runs, pipelined or not", async () => {
    const conn = new Raw(app.service.port);
    const before = stats();
    const first = await exchange(
      conn,
      Buffer.concat([post(`/v2/${endpointId}/run`, '{"input":{"who":"a"}}'), post(`/v2/${endpointId}/run`, '{"input":{"who":"b"}}')]),
    );
    const second = await exchange(conn);
    const third = await exchange(conn, post(`/v2/${endpointId}/run`, '{"input":{"who":"c"}}'));
    expect([first.status, second.status, third.status]).toEqual([200, 200, 200]);
    expect(stats().served).toBe(before.served + 3);
    const ids = [first, second, third].map((a) => (JSON.parse(a.body) as { id: string }).id);
    expect(new Set(ids).size).toBe(3);
    for (const [i, id] of ids.entries()) expect((await completed(id)).output).toMatchObject({ message: `hello ${"abc"[i]}` });
    conn.close();
  });

  it.each([
    ["a body that is not JSON", "ENDPOINT", '{"input":', "application/json", 400, /not valid JSON/],
    ["a submission without input", "ENDPOINT", '{"webhook":"nope"}', "application/json", 422, /not valid/],
    ["an endpoint that does not exist", "nope", '{"input":{}}', "application/json", 404, /No endpoint nope/],
    ["a content type that is not JSON", "ENDPOINT", "<input/>", "application/xml", 415, /must be JSON/],
  ])("hands %s to node:http, which answers as it always did", async (_what, endpoint, body, type, status, detail) => {
    const conn = new Raw(app.service.port);
    const before = stats();
    const answer = await exchange(conn, post(`/v2/${endpoint === "ENDPOINT" ? endpointId : endpoint}/run`, body, type));
    expect(answer.status).toBe(status);
    expect(answer.headers["content-type"]).toBe("application/problem+json");
    expect((JSON.parse(answer.body) as { detail: string }).detail).toMatch(detail);
    expect(stats().served).toBe(before.served);
    expect(stats().handedOver).toBeGreaterThanOrEqual(before.handedOver + 1);
    // node:http goes on serving the connection.
    const next = await exchange(conn, post(`/v2/${endpointId}/run`, '{"input":{"who":"after"}}'));
    expect(next.status).toBe(200);
    conn.close();
  });
});

describe("job API reads on the LB front", () => {
  it("answers health and a job's status itself, so that a client polling on the connection it submits on keeps its /runs there", async () => {
    const conn = new Raw(app.service.port);
    const other = new Raw(app.service.port);
    const before = stats();
    const run = await exchange(conn, post(`/v2/${endpointId}/run`, '{"input":{"who":"poller"}}'));
    const { id } = JSON.parse(run.body) as { id: string };
    const health = await exchange(conn, get(`/v2/${endpointId}/health`));
    expect(stats().served).toBe(before.served + 2);
    expect(health.status).toBe(200);
    // The same read through node:http (a query string is node's to read): the same answer.
    const viaNode = await exchange(other, get(`/v2/${endpointId}/health?x=1`));
    expect(Object.keys(JSON.parse(health.body))).toEqual(Object.keys(JSON.parse(viaNode.body)));
    expect(Object.keys(health.headers).sort()).toEqual(Object.keys(viaNode.headers).sort());
    expect(health.headers["ratelimit"]).toMatch(/^"minute";r=\d+;t=\d+/);

    let polls = 0;
    let job: Record<string, unknown> = {};
    for (const until = Date.now() + 30_000; job.status !== "COMPLETED" && Date.now() < until; polls++) {
      const answer = await exchange(conn, get(`/v2/${endpointId}/status/${id}`));
      expect(answer.status).toBe(200);
      job = JSON.parse(answer.body) as Record<string, unknown>;
      if (job.status !== "COMPLETED") await new Promise((r) => setTimeout(r, 50));
    }
    expect(job).toMatchObject({ id, status: "COMPLETED", output: { message: "hello poller" } });
    const statusViaNode = await exchange(other, get(`/v2/${endpointId}/status/${id}?x=1`));
    expect(JSON.parse(statusViaNode.body)).toEqual(job);
    // Every poll and the next /run were the front's: the connection never went to node:http.
    const next = await exchange(conn, post(`/v2/${endpointId}/run`, '{"input":{"who":"again"}}'));
    expect(next.status).toBe(200);
    expect(stats().served).toBe(before.served + 3 + polls);
    conn.close();
    other.close();
  });

  it.each([
    ["a job that does not exist", () => `/v2/${endpointId}/status/no-such-job`, 404, /No job no-such-job/],
    ["an endpoint that does not exist", () => "/v2/nope/health", 404, /No endpoint nope/],
  ])("hands a read of %s to node:http, which answers as it always did", async (_what, path, status, detail) => {
    const conn = new Raw(app.service.port);
    const before = stats();
    const answer = await exchange(conn, get(path()));
    expect(answer.status).toBe(status);
    expect(answer.headers["content-type"]).toBe("application/problem+json");
    expect((JSON.parse(answer.body) as { detail: string }).detail).toMatch(detail);
    expect(stats().served).toBe(before.served);
    expect(stats().handedOver).toBeGreaterThanOrEqual(before.handedOver + 1);
    conn.close();
  });
});
