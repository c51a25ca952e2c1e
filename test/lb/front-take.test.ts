// Workers' takes on the LB front (src/service/lb/front.ts, workers/routes.ts quickTake): a take, with the results
// it carries, is answered by the front without node:http, as node:http answers it; one the front does not take
// (an invalid body, another path) goes to node:http with its bytes; a worker that hangs up while its take waits
// loses no job. Raw sockets, so that which connection carries which request is what the test says it is.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, manifest, ProtocolWorker, resource, startTestService, until, type TestService } from "../service/helpers.js";
import { Raw } from "./raw-http.js";
import type { DeployedEndpoint } from "../../src/service/index.js";

let t: TestService;
let endpoint: DeployedEndpoint;
let port: number;

beforeAll(async () => {
  t = await startTestService();
  [endpoint] = await t.service.deploy({ app: "front-take", env: "test", artifactPath: t.artifact, manifest: manifest({ work: resource() }) });
  port = Number(new URL(t.service.url).port);
});
afterAll(async () => {
  await t?.close();
});

const stats = () => t.service.lbFrontStats()!;

function takeBytes(worker: ProtocolWorker, body: unknown, path = "/_worker/v1/take"): Buffer {
  const text = JSON.stringify(body);
  return Buffer.from(
    `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${worker.token}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
  );
}

async function exchange(conn: Raw, request: Buffer): Promise<{ status: number; headers: Record<string, string>; body: any }> {
  conn.send(request);
  const answer = await conn.answer();
  const text = answer.body.toString("utf8");
  return { status: answer.status, headers: answer.headers, body: text ? JSON.parse(text) : undefined };
}

async function submit(input: unknown): Promise<string> {
  // A query string keeps the submission on node:http: the front's counts below are the takes' alone.
  const r = await call(`${endpoint.url}/run?via=node`, { key: t.key, body: { input } });
  expect(r.status).toBe(200);
  return r.body.id as string;
}

describe("workers' takes on the LB front", () => {
  it("answers a take and the results it carries itself, as node:http does, on one kept connection", async () => {
    const worker = await ProtocolWorker.mint(t, endpoint.id);
    await worker.register();
    const id = await submit({ n: 1 });
    const conn = new Raw(port);
    const before = stats();
    const taken = await exchange(conn, takeBytes(worker, { workerId: worker.workerId, max: 4, waitMs: 2000 }));
    expect(taken.status).toBe(200);
    expect(stats().takes).toBe(before.takes + 1);
    expect(taken.body.jobs).toHaveLength(1);
    expect(taken.body.jobs[0]).toMatchObject({ id, input: { n: 1 }, attempt: 1 });
    expect(taken.headers["content-type"]).toBe("application/json");
    expect(taken.headers["connection"]).toBe("keep-alive");
    expect(taken.headers["ratelimit"]).toBeUndefined(); // workers are not rate limited

    // The next take carries the result: recorded, acknowledged, and the job is complete.
    const second = await submit({ n: 2 });
    const next = await exchange(
      conn,
      takeBytes(worker, {
        workerId: worker.workerId,
        max: 4,
        waitMs: 2000,
        results: [{ jobId: id, lease: taken.body.jobs[0].lease, status: "COMPLETED", output: { doubled: 2 } }],
      }),
    );
    expect(stats().takes).toBe(before.takes + 2);
    expect(next.body.results).toEqual([{ jobId: id, accepted: true }]);
    expect(next.body.jobs.map((j: { id: string }) => j.id)).toEqual([second]);
    const record = await call(`${endpoint.url}/status/${id}?via=node`, { key: t.key });
    expect(record.body).toMatchObject({ status: "COMPLETED", output: { doubled: 2 } });

    // The same take through node:http (a query string is node's to read): the same answer, the same headers.
    const third = await submit({ n: 3 });
    const handedOver = stats().handedOver;
    const viaNode = await exchange(
      conn,
      takeBytes(
        worker,
        { workerId: worker.workerId, max: 4, waitMs: 2000, results: [{ jobId: second, lease: next.body.jobs[0].lease, status: "COMPLETED", output: 4 }] },
        "/_worker/v1/take?via=node",
      ),
    );
    expect(stats().handedOver).toBe(handedOver + 1);
    expect(viaNode.status).toBe(200);
    expect(viaNode.body.results).toEqual([{ jobId: second, accepted: true }]);
    expect(viaNode.body.jobs.map((j: { id: string }) => j.id)).toEqual([third]);
    expect(Object.keys(viaNode.body.jobs[0]).sort()).toEqual(Object.keys(taken.body.jobs[0]).sort());
    expect(Object.keys(viaNode.headers).sort()).toEqual(Object.keys(taken.headers).sort());
    await worker.done([{ jobId: third, lease: viaNode.body.jobs[0].lease, status: "COMPLETED", output: 6 }]);
    conn.close();
  });

  it("leaves a take it cannot answer as is to node:http, which answers its problem", async () => {
    const worker = await ProtocolWorker.mint(t, endpoint.id);
    await worker.register();
    const conn = new Raw(port);
    const before = stats();
    const invalid = await exchange(conn, takeBytes(worker, { workerId: worker.workerId, max: 0 }));
    expect(invalid.status).toBe(422);
    expect(invalid.headers["content-type"]).toBe("application/problem+json");
    expect(invalid.body.errors).toEqual(["$.max: must be an integer from 1 to 1000"]);
    expect(stats().takes).toBe(before.takes);
    conn.close();

    // Another worker's id in the body: node:http's 403, with the front counting nothing.
    const other = new Raw(port);
    const refused = await exchange(other, takeBytes(worker, { workerId: "someone-else", max: 1 }));
    expect(refused.status).toBe(403);
    expect(stats().takes).toBe(before.takes);
    other.close();

    // An API key is not a worker's token.
    const user = new Raw(port);
    const text = JSON.stringify({ max: 1 });
    user.send(
      `POST /_worker/v1/take HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${t.key}\r\ncontent-type: application/json\r\ncontent-length: ${text.length}\r\n\r\n${text}`,
    );
    expect((await user.answer()).status).toBe(403);
    expect(stats().takes).toBe(before.takes);
    user.close();
  });

  it("gives the job of a take whose worker hung up while it waited to the next worker", async () => {
    const gone = await ProtocolWorker.mint(t, endpoint.id);
    const next = await ProtocolWorker.mint(t, endpoint.id);
    await gone.register();
    await next.register();
    const conn = new Raw(port);
    const before = stats();
    conn.send(takeBytes(gone, { workerId: gone.workerId, max: 1, waitMs: 10_000 }));
    await until(() => stats().takes === before.takes + 1 || undefined);
    conn.socket.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const id = await submit({ n: "after the hang-up" });
    const [job] = await next.take(1, 3000);
    expect(job).toMatchObject({ id, attempt: 1 });
    await next.done([{ jobId: id, lease: job!.lease, status: "COMPLETED", output: null }]);
  });
});
