// The job API against a real service (127.0.0.1, real SQLite file); the test acts as the worker through the
// worker protocol.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { call, manifest, ProtocolWorker, resource, startTestService, until, type TestService } from "./helpers.js";
import type { DeployedEndpoint } from "../../src/service/index.js";

let t: TestService;
let echo: DeployedEndpoint;
let other: DeployedEndpoint;
let worker: ProtocolWorker;

beforeAll(async () => {
  // The webhook receiver below listens on 127.0.0.1, which webhooks reach only when the operator allows it.
  t = await startTestService({ webhooks: { allow: ["127.0.0.1/32"] } });
  [echo, other] = await t.service.deploy({
    app: "demo",
    env: "prod",
    artifactPath: t.artifact,
    manifest: manifest({ echo: resource(), other: resource({ retries: 0 }) }),
  });
  worker = await ProtocolWorker.mint(t, echo.id);
  await worker.register();
});
afterAll(async () => {
  await t?.close();
});

/** Drain whatever is queued on `echo` so each test starts from an empty queue. */
async function drainQueue() {
  await call(`${echo.url}/purge-queue`, { method: "POST", key: t.key });
}

describe("authentication and errors", () => {
  it("answers 401 without a key, with a malformed one, and with an unknown one", async () => {
    for (const authorization of [undefined, "Bearer", "Basic a b", "Bearer nope-not-a-key"]) {
      const r = await call(`${echo.url}/health`, { authorization: authorization ?? undefined, key: null });
      expect(r.status).toBe(401);
      expect(r.headers.get("content-type")).toBe("application/problem+json");
      expect(r.body).toMatchObject({ title: "Unauthorized", status: 401 });
      expect(typeof r.body.detail).toBe("string");
    }
  });

  it("accepts the bare key in the authorization header as well as Bearer", async () => {
    expect((await call(`${echo.url}/health`, { authorization: t.key })).status).toBe(200);
    expect((await call(`${echo.url}/health`, { authorization: `bearer ${t.key}` })).status).toBe(200);
  });

  it("answers 403 for a key scoped to another endpoint, a worker token on user routes and a user key on worker routes", async () => {
    const scoped = await t.service.mintKey({ scopes: [`jobs:${other.id}`] });
    expect((await call(`${other.url}/health`, { key: scoped.key })).status).toBe(200);
    const denied = await call(`${echo.url}/run`, { key: scoped.key, body: { input: {} } });
    expect(denied.status).toBe(403);
    expect(denied.body.title).toBe("Forbidden");
    expect((await call(`${echo.url}/health`, { key: worker.token })).status).toBe(403);
    expect((await call(`${t.service.url}/_worker/v1/take`, { key: t.key, body: { max: 1 } })).status).toBe(403);
    // a worker token of one worker cannot speak for another
    expect((await worker.post("take", { workerId: "someone-else" })).status).toBe(403);
  });

  it("answers 404 for another user's endpoint, an unknown endpoint, route or job", async () => {
    const stranger = await t.service.mintKey({ scopes: ["admin"], userId: "someone" });
    const r = await call(`${echo.url}/health`, { key: stranger.key });
    expect(r.status).toBe(404);
    expect(r.body).toMatchObject({ title: "Not Found", status: 404 });
    expect((await call(`${t.service.url}/v2/0123456789abcdef/health`, { key: t.key })).status).toBe(404);
    expect((await call(`${echo.url}/nope`, { key: t.key })).status).toBe(404);
    expect((await call(`${t.service.url}/elsewhere`, { key: t.key })).status).toBe(404);
    expect((await call(`${echo.url}/status/not-a-job`, { key: t.key })).status).toBe(404);
  });

  it("answers 405 for a wrong method, 400 for malformed JSON, 422 for invalid bodies and parameters", async () => {
    const wrong = await call(`${echo.url}/run`, { method: "GET", key: t.key });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe("POST");
    const bad = await call(`${echo.url}/run`, { key: t.key, raw: '{"input": ' });
    expect(bad.status).toBe(400);
    expect(bad.body.title).toBe("Bad Request");
    const missing = await call(`${echo.url}/run`, { key: t.key, body: { inptu: 1 } });
    expect(missing.status).toBe(422);
    expect(missing.body.title).toBe("Unprocessable Entity");
    expect(missing.body.errors).toEqual(expect.arrayContaining(["$.input: is required", "$.inptu: unknown property"]));
    const policy = await call(`${echo.url}/run`, { key: t.key, body: { input: {}, policy: { ttl: "long" }, function: "nope" } });
    expect(policy.status).toBe(422);
    expect(policy.body.errors.join("\n")).toMatch(/\$\.policy\.ttl/);
    expect(policy.body.errors.join("\n")).toMatch(/\$\.function/);
    const wait = await call(`${echo.url}/runsync?wait=5`, { key: t.key, body: { input: {} } });
    expect(wait.status).toBe(422);
    expect(wait.body.errors[0]).toMatch(/wait/);
  });

  it("parses a JSON body sent without its content type (fetch's text/plain, curl -d's form), and refuses multipart (415)", async () => {
    for (const type of ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded"]) {
      const r = await fetch(`${echo.url}/run`, {
        method: "POST",
        headers: { authorization: `Bearer ${t.key}`, "content-type": type },
        body: JSON.stringify({ input: { via: type } }),
      });
      expect(r.status).toBe(200);
      expect(((await r.json()) as { status: string }).status).toBe("IN_QUEUE");
    }
    const multipart = await fetch(`${echo.url}/run`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "multipart/form-data; boundary=x" },
      body: '{"input":{}}',
    });
    expect(multipart.status).toBe(415);
    expect(multipart.headers.get("content-type")).toContain("application/problem+json");
    expect(((await multipart.json()) as { detail: string }).detail).toContain("Content-Type: application/json");
    await drainQueue();
  });

  it("answers 413 for a /run body over 10 MB and stores nothing", async () => {
    await drainQueue();
    const big = JSON.stringify({ input: { blob: "x".repeat(10 * 1024 * 1024 + 10) } });
    const r = await call(`${echo.url}/run`, { key: t.key, raw: big });
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ title: "Payload Too Large", status: 413 });
    expect((await call(`${echo.url}/health`, { key: t.key })).body.jobs.inQueue).toBe(0);
    // /runsync allows up to 20 MB: 11 MB is accepted
    const ok = await call(`${echo.url}/runsync?wait=1000`, { key: t.key, raw: big });
    expect(ok.status).toBe(200);
    expect(ok.body.status).toBe("IN_QUEUE");
    await drainQueue();
  });
});

describe("worker protocol and state route errors", () => {
  it("answers 404, 405 and 422 on worker routes, and 403/404 on logs", async () => {
    expect((await worker.post("nope", {})).status).toBe(404);
    const get = await call(`${t.service.url}/_worker/v1/take`, { method: "GET", key: worker.token });
    expect(get.status).toBe(405);
    const invalid = await worker.post("take", { workerId: worker.workerId, max: 0, waitMs: 99_999 });
    expect(invalid.status).toBe(422);
    expect(invalid.body.errors).toEqual(["$.max: must be an integer from 1 to 1000", "$.waitMs: must be an integer from 0 to 30000"]);
    expect((await worker.post("done", { results: [{ jobId: 1 }] })).body.errors).toEqual(
      expect.arrayContaining(["$.results[0].jobId: is required", "$.results[0].status: must be COMPLETED or FAILED"]),
    );
    const malformed = await call(`${t.service.url}/_worker/v1/heartbeat`, { key: worker.token, raw: "{" });
    expect(malformed.status).toBe(400);
    const scoped = await t.service.mintKey({ scopes: [`jobs:${other.id}`] });
    expect((await call(`${t.service.url}/v1/endpoints/${echo.id}/logs`, { key: scoped.key })).status).toBe(403);
    expect((await call(`${t.service.url}/v1/endpoints/${other.id}/logs`, { key: scoped.key })).status).toBe(200);
    expect((await call(`${t.service.url}/v1/endpoints/0123456789abcdef/logs`, { key: t.key })).status).toBe(404);
    expect((await call(`${t.service.url}/v1/endpoints/${echo.id}/logs`, { key: worker.token })).status).toBe(403);
    await expect(t.service.mintKey({ scopes: ["root"] })).rejects.toThrow(/scopes/);
  });
});

describe("job lifecycle", () => {
  it("run -> IN_QUEUE -> IN_PROGRESS -> COMPLETED, with integer times", async () => {
    await drainQueue();
    const run = await call(`${echo.url}/run`, { key: t.key, body: { input: { n: 1 } } });
    expect(run.status).toBe(200);
    expect(run.body).toEqual({ id: expect.any(String), status: "IN_QUEUE" });
    expect((await call(`${echo.url}/status/${run.body.id}`, { key: t.key })).body.status).toBe("IN_QUEUE");
    const [job] = await worker.take(1);
    expect(job).toMatchObject({ id: run.body.id, input: { n: 1 }, attempt: 1 });
    const during = await call(`${echo.url}/status/${run.body.id}`, { method: "POST", key: t.key });
    expect(during.body.status).toBe("IN_PROGRESS");
    await new Promise((r) => setTimeout(r, 20));
    expect(await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: { doubled: 2 } }])).toEqual([
      { jobId: job!.id, accepted: true },
    ]);
    const done = await call(`${echo.url}/status/${run.body.id}`, { key: t.key });
    expect(done.body).toMatchObject({ id: run.body.id, status: "COMPLETED", output: { doubled: 2 } });
    expect(Number.isInteger(done.body.delayTime)).toBe(true);
    expect(Number.isInteger(done.body.executionTime)).toBe(true);
    expect(done.body.executionTime).toBeGreaterThanOrEqual(15);
    // the job is in the SQLite file (or, on PostgreSQL, nothing of it is in the data directory)
    expect(existsSync(join(t.dir, "data", "svc.sqlite"))).toBe(process.env.SVC_TEST_STORE !== "postgres");
  });

  it("runsync waits for the result; a run-out wait answers 200 with the current status", async () => {
    await drainQueue();
    const pending = call(`${echo.url}/runsync`, { key: t.key, body: { input: { q: "hi" }, function: "echo" } });
    const [job] = await worker.take(1, 5000);
    expect(job!.function).toBe("echo");
    await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "HI" }]);
    const r = await pending;
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: job!.id, status: "COMPLETED", output: "HI" });
    expect(Number.isInteger(r.body.delayTime) && Number.isInteger(r.body.executionTime)).toBe(true);

    const started = Date.now();
    const timedOut = await call(`${echo.url}/runsync?wait=1000`, { key: t.key, body: { input: {} } });
    expect(timedOut.status).toBe(200);
    expect(timedOut.body.status).toBe("IN_QUEUE");
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    // status-sync waits for it likewise
    const waiting = call(`${echo.url}/status-sync/${timedOut.body.id}?wait=5000`, { key: t.key });
    const [next] = await worker.take(1);
    await worker.done([{ jobId: next!.id, lease: next!.lease, status: "COMPLETED", output: 7 }]);
    expect((await waiting).body).toMatchObject({ status: "COMPLETED", output: 7 });
  });

  it("FAILED with automatic retries: a failed attempt is requeued, then the job fails with the handler's message", async () => {
    await drainQueue();
    const before = (await call(`${echo.url}/health`, { key: t.key })).body.jobs;
    const { body } = await call(`${echo.url}/run`, { key: t.key, body: { input: {} } });
    const [first] = await worker.take(1);
    await worker.done([{ jobId: first!.id, lease: first!.lease, status: "FAILED", error: { message: "boom 1", type: "Error" } }]);
    expect((await call(`${echo.url}/status/${body.id}`, { key: t.key })).body.status).toBe("IN_QUEUE");
    const [second] = await worker.take(1);
    expect(second).toMatchObject({ id: body.id, attempt: 2 });
    await worker.done([
      {
        jobId: second!.id,
        lease: second!.lease,
        status: "FAILED",
        error: { message: "boom 2", type: "RangeError", stack: "RangeError: boom 2\n    at handler" },
      },
    ]);
    const failed = await call(`${echo.url}/status/${body.id}`, { key: t.key });
    expect(failed.body).toMatchObject({ status: "FAILED", error: "boom 2", errorType: "RangeError" });
    expect(failed.body.errorStack).toMatch(/at handler/);
    const after = (await call(`${echo.url}/health`, { key: t.key })).body.jobs;
    expect(after.retried - before.retried).toBe(1);
    expect(after.failed - before.failed).toBe(1);

    // retry: same id, same input, error removed, back to IN_QUEUE
    const retried = await call(`${echo.url}/retry/${body.id}`, { method: "POST", key: t.key });
    expect(retried.body).toEqual({ id: body.id, status: "IN_QUEUE" });
    const status = await call(`${echo.url}/status/${body.id}`, { key: t.key });
    expect(status.body.status).toBe("IN_QUEUE");
    expect(status.body.error).toBeUndefined();
    const [third] = await worker.take(1);
    expect(third!.id).toBe(body.id);
    await worker.done([{ jobId: third!.id, lease: third!.lease, status: "COMPLETED", output: "ok" }]);
    expect((await call(`${echo.url}/status/${body.id}`, { key: t.key })).body).toMatchObject({ status: "COMPLETED", output: "ok" });
    // only FAILED or TIMED_OUT can be retried
    const refused = await call(`${echo.url}/retry/${body.id}`, { method: "POST", key: t.key });
    expect(refused.status).toBe(400);
    expect(refused.body.title).toBe("Bad Request");
  });

  it("TIMED_OUT: the service ends the job, tells the worker, rejects the late result; retry brings it back", async () => {
    await drainQueue();
    const { body } = await call(`${echo.url}/run`, { key: t.key, body: { input: {}, policy: { executionTimeout: 300 } } });
    const [job] = await worker.take(1);
    expect(job!.executionTimeoutMs).toBe(300);
    const events = await worker.events(3000);
    expect(events.cancel).toContain(body.id);
    const record = await call(`${echo.url}/status/${body.id}`, { key: t.key });
    expect(record.body.status).toBe("TIMED_OUT");
    const [late] = await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "late" }]);
    expect(late!.accepted).toBe(false);
    expect((await call(`${echo.url}/status/${body.id}`, { key: t.key })).body.output).toBeUndefined();
    expect((await call(`${echo.url}/retry/${body.id}`, { method: "POST", key: t.key })).body.status).toBe("IN_QUEUE");
    await drainQueue();
  });

  it("cancel: a queued job at once and out of the queue, a running job with the worker told; a final job is 400", async () => {
    await drainQueue();
    const queued = (await call(`${echo.url}/run`, { key: t.key, body: { input: { a: 1 } } })).body;
    const cancelled = await call(`${echo.url}/cancel/${queued.id}`, { method: "POST", key: t.key });
    expect(cancelled.body).toEqual({ id: queued.id, status: "CANCELLED" });
    expect((await call(`${echo.url}/health`, { key: t.key })).body.jobs.inQueue).toBe(0);
    expect(await worker.take(1, 200)).toEqual([]);

    const running = (await call(`${echo.url}/run`, { key: t.key, body: { input: { a: 2 } } })).body;
    const [job] = await worker.take(1);
    const events = worker.events(5000);
    expect((await call(`${echo.url}/cancel/${running.id}`, { method: "POST", key: t.key })).body.status).toBe("CANCELLED");
    expect((await events).cancel).toEqual([running.id]);
    const [late] = await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: 1 }]);
    expect(late).toMatchObject({ accepted: false });
    expect((await call(`${echo.url}/status/${running.id}`, { key: t.key })).body.status).toBe("CANCELLED");
    const again = await call(`${echo.url}/cancel/${running.id}`, { method: "POST", key: t.key });
    expect(again.status).toBe(400);
    expect((await call(`${echo.url}/retry/${running.id}`, { method: "POST", key: t.key })).status).toBe(400);
  });

  it("purge-queue removes queued jobs only; the running one continues", async () => {
    await drainQueue();
    const running = (await call(`${echo.url}/run`, { key: t.key, body: { input: 0 } })).body;
    const [job] = await worker.take(1);
    const ids: string[] = [];
    for (let i = 1; i <= 3; i++) ids.push((await call(`${echo.url}/run`, { key: t.key, body: { input: i } })).body.id);
    const purge = await call(`${echo.url}/purge-queue`, { method: "POST", key: t.key });
    expect(purge.body).toEqual({ removed: 3, status: "completed" });
    for (const id of ids) expect((await call(`${echo.url}/status/${id}`, { key: t.key })).status).toBe(404);
    expect((await call(`${echo.url}/status/${running.id}`, { key: t.key })).body.status).toBe("IN_PROGRESS");
    await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "still ran" }]);
    expect((await call(`${echo.url}/status/${running.id}`, { key: t.key })).body.output).toBe("still ran");
  });

  it("expiry: a result past its ttl (/status?ttl) is 404 and cannot be retried; /status?ttl extends a result", async () => {
    await drainQueue();
    const { body } = await call(`${echo.url}/run`, { key: t.key, body: { input: {} } });
    const [job] = await worker.take(1);
    await worker.done([{ jobId: job!.id, lease: job!.lease, status: "FAILED", error: { message: "x" } }]);
    const [again] = await worker.take(1);
    await worker.done([{ jobId: again!.id, lease: again!.lease, status: "FAILED", error: { message: "x" } }]);
    expect((await call(`${echo.url}/status/${body.id}?ttl=300`, { key: t.key })).body.status).toBe("FAILED");
    await new Promise((r) => setTimeout(r, 400));
    expect((await call(`${echo.url}/status/${body.id}`, { key: t.key })).status).toBe(404);
    expect((await call(`${echo.url}/retry/${body.id}`, { method: "POST", key: t.key })).status).toBe(404);

    const kept = (await call(`${echo.url}/run`, { key: t.key, body: { input: {} } })).body;
    const [k] = await worker.take(1);
    await worker.done([{ jobId: k!.id, lease: k!.lease, status: "COMPLETED", output: 1 }]);
    expect((await call(`${echo.url}/status/${kept.id}?ttl=300`, { key: t.key })).body.status).toBe("COMPLETED");
    expect((await call(`${echo.url}/status/${kept.id}?ttl=60000`, { key: t.key })).body.status).toBe("COMPLETED");
    await new Promise((r) => setTimeout(r, 400));
    expect((await call(`${echo.url}/status/${kept.id}`, { key: t.key })).body.output).toBe(1);
  });
});

describe("progress", () => {
  it("a worker's latest progress is the running job's output in /status; too large is 422, a stale lease is refused", async () => {
    await drainQueue();
    const { body } = await call(`${echo.url}/run`, { key: t.key, body: { input: {} } });
    const [job] = await worker.take(1);
    expect((await call(`${echo.url}/status/${body.id}`, { key: t.key })).body).not.toHaveProperty("output");
    expect((await worker.post("progress", { jobId: job!.id, lease: job!.lease, progress: { step: 1 } })).body).toEqual({ ok: true });
    expect((await worker.post("progress", { jobId: job!.id, lease: job!.lease, progress: { step: 2, note: "halfway" } })).body).toEqual({ ok: true });
    expect((await call(`${echo.url}/status/${body.id}`, { key: t.key })).body).toMatchObject({
      status: "IN_PROGRESS",
      output: { step: 2, note: "halfway" },
      attempts: 1,
    });
    const big = await worker.post("progress", { jobId: job!.id, lease: job!.lease, progress: "x".repeat(64 * 1024) });
    expect(big.status).toBe(422);
    expect(big.body.errors).toEqual(["$.progress: must be at most 65536 bytes of JSON"]);
    expect((await worker.post("progress", { jobId: job!.id, lease: job!.lease })).status).toBe(422);
    expect((await worker.post("progress", { jobId: job!.id, lease: "stale", progress: 3 })).body).toEqual({
      ok: false,
      code: "lease-lost",
      reason: "lease lost",
    });
    // Once it ends, its output is its result.
    await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "finished" }]);
    expect((await call(`${echo.url}/status/${body.id}`, { key: t.key })).body).toMatchObject({ status: "COMPLETED", output: "finished" });
  });
});

describe("stream, health, webhook, logs, state", () => {
  it("stream returns each chunk once, the rest after the end, then []; big chunks are split", async () => {
    await drainQueue();
    const { body } = await call(`${echo.url}/run`, { key: t.key, body: { input: {} } });
    const [job] = await worker.take(1);
    expect(await worker.stream(job!.id, job!.lease, [{ output: "a" }, { output: "b", metrics: { n: 1 } }])).toEqual({ ok: true });
    const first = await call(`${echo.url}/stream/${body.id}`, { key: t.key });
    expect(first.body).toEqual({ status: "IN_PROGRESS", stream: [{ output: "a" }, { output: "b", metrics: { n: 1 } }] });
    // nothing new: waits briefly for a chunk instead of answering at once
    const waiting = call(`${echo.url}/stream/${body.id}`, { key: t.key });
    await new Promise((r) => setTimeout(r, 100));
    await worker.stream(job!.id, job!.lease, [{ output: "c" }]);
    expect((await waiting).body.stream).toEqual([{ output: "c" }]);
    const big = "y".repeat(1024 * 1024 + 5000);
    await worker.stream(job!.id, job!.lease, [{ output: big }]);
    await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: "end" }]);
    const rest = await call(`${echo.url}/stream/${body.id}`, { key: t.key });
    expect(rest.body.status).toBe("COMPLETED");
    expect(rest.body.stream.length).toBeGreaterThan(1);
    expect(rest.body.stream.map((c: { output: string }) => c.output).join("")).toBe(big);
    for (const c of rest.body.stream) expect(JSON.stringify(c).length).toBeLessThanOrEqual(1024 * 1024);
    const drained = await call(`${echo.url}/stream/${body.id}`, { key: t.key });
    expect(drained.body).toEqual({ status: "COMPLETED", stream: [] });
  });

  it("health reports jobs, workers and cold starts", async () => {
    const h = await call(`${echo.url}/health`, { key: t.key });
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({
      jobs: { completed: expect.any(Number), failed: expect.any(Number), inProgress: 0, inQueue: 0, retried: expect.any(Number) },
      workers: { idle: 1, running: 0, initializing: 0 },
      coldStarts: { count: 0 },
    });
  });

  it("posts the job record to the webhook when the job ends", async () => {
    const received: any[] = [];
    let attempts = 0;
    const hook = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        attempts++;
        // the first delivery fails: the service retries
        if (attempts === 1) {
          res.writeHead(500).end();
          return;
        }
        received.push(JSON.parse(Buffer.concat(chunks).toString()));
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    try {
      const webhook = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/done`;
      const { body } = await call(`${echo.url}/run`, { key: t.key, body: { input: {}, webhook } });
      const [job] = await worker.take(1);
      await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: { fine: true } }]);
      await until(() => received.length > 0, 5000);
      expect(received[0]).toMatchObject({ id: body.id, status: "COMPLETED", output: { fine: true } });
      expect(attempts).toBe(2);
    } finally {
      await new Promise((r) => hook.close(r));
    }
  });

  it("keeps worker log lines per endpoint and job, and follows them as NDJSON", async () => {
    const { body } = await call(`${echo.url}/run`, { key: t.key, body: { input: {} } });
    const [job] = await worker.take(1);
    const since = Date.now() - 1;
    const follow = await fetch(`${t.service.url}/v1/endpoints/${echo.id}/logs?follow=1&job=${job!.id}`, { headers: { authorization: `Bearer ${t.key}` } });
    expect(follow.headers.get("content-type")).toBe("application/x-ndjson");
    const reader = follow.body!.getReader();
    await worker.post("log", {
      workerId: worker.workerId,
      lines: [
        { ts: Date.now(), stream: "stdout", jobId: job!.id, text: "hello from the job" },
        { ts: Date.now(), stream: "stderr", text: "worker noise" },
      ],
    });
    const { value } = await reader.read();
    const line = JSON.parse(new TextDecoder().decode(value).trim().split("\n")[0]!);
    expect(line).toMatchObject({ workerId: worker.workerId, jobId: job!.id, stream: "stdout", text: "hello from the job" });
    await reader.cancel();
    await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED" }]);
    const all = await call(`${t.service.url}/v1/endpoints/${echo.id}/logs?since=${since}`, { key: t.key });
    expect(all.body.lines.map((l: { text: string }) => l.text)).toEqual(["hello from the job", "worker noise"]);
    const onlyJob = await call(`${t.service.url}/v1/endpoints/${echo.id}/logs?job=${body.id}`, { key: t.key });
    expect(onlyJob.body.lines).toHaveLength(1);
    expect(onlyJob.body.lines[0].ts).toEqual(expect.any(Number));
  });

  it("serves the app state the SDK looks endpoints up in", async () => {
    const r = await call(`${t.service.url}/v1/apps/demo/environments/prod`, { key: t.key });
    // (A deploy records the app, environment and build like an upload and activation: the full environment.)
    expect(r.body).toMatchObject({
      app: "demo",
      env: "prod",
      build: expect.stringMatching(/^[0-9a-f]{64}$/),
      endpoints: [
        { name: "echo", id: echo.id, url: echo.url, type: "queue" },
        { name: "other", id: other.id, url: other.url, type: "queue" },
      ],
    });
    expect((r.body as { endpoints: unknown[] }).endpoints).toHaveLength(2);
    expect((await call(`${t.service.url}/v1/apps/demo/environments/nope`, { key: t.key })).status).toBe(404);
    expect((await call(`${t.service.url}/v1/apps/demo/environments/prod`, { method: "POST", key: t.key })).status).toBe(405);
  });
});
