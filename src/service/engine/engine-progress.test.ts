// The job engine over an in-memory store and a fake clock (engine-fixture.ts): what a running job reports on its
// way, its progress (and the webhook message it asks for), its stream chunks and its log lines.

import { afterEach, describe, expect, it } from "vitest";
import { closeEngines, setup } from "./engine-fixture.js";

afterEach(closeEngines);

describe("the job engine's progress, streams and logs of a running job", () => {
  it("progress a running job reports is kept on its row, only from the current lease, and cleared by the next attempt", async () => {
    const reported: Array<string | null | undefined> = [];
    const { engine, store, clock, w1 } = setup({
      endpoint: { retries: 1, backoff: { baseMs: 0, factor: 2, maxMs: 0 } },
      hooks: { onProgress: (row) => reported.push(row.progress) },
    });
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [a] = await engine.take(w1, 1, 0);
    const firstLease = a!.lease!;
    expect(await engine.progress(w1, job.id, firstLease, '{"step":1}')).toBe(true);
    expect(await engine.progress(w1, job.id, a!.lease, '{"step":2}')).toBe(true);
    expect(await engine.progress(w1, job.id, "not-the-lease", '{"step":99}')).toBe(false);
    expect((await engine.record("e1", job.id))!.progress).toBe('{"step":2}');
    expect(store.jobs.get(job.id)!.progress).toBe('{"step":2}');
    expect(reported).toEqual(['{"step":1}', '{"step":2}']);
    await engine.done(w1, [{ jobId: job.id, lease: firstLease, status: "FAILED", error: { message: "x" } }]);
    clock.advance(0);
    const [b] = await engine.take(w1, 1, 0);
    expect(b).toMatchObject({ id: job.id, attempt: 2, progress: null });
    expect(await engine.progress(w1, job.id, firstLease, '{"step":3}')).toBe(false);
    await engine.done(w1, [{ jobId: job.id, lease: b!.lease!, status: "COMPLETED", output: 1 }]);
    await engine.write([]);
    expect(store.jobs.get(job.id)).toMatchObject({ status: "COMPLETED", progress: null, output: "1" });
  });

  it("progress of a job with a webhook asks for a progress webhook message with the reported value, after its commit", async () => {
    const asked: Array<[string, string, unknown]> = [];
    const { engine, store, w1 } = setup({
      hooks: {
        webhookOps: (row, event, output) => {
          asked.push([row.id, event, output]);
          return event === "progress"
            ? [{ op: "insertLog", line: { ts: 0, endpointId: "e1", workerId: "w", jobId: row.id, stream: "webhook", text: JSON.stringify(output) } }]
            : [];
        },
      },
    });
    const job = await engine.submit("e1", { input: 1, sync: false, webhook: "http://127.0.0.1:9/hook" });
    const [taken] = await engine.take(w1, 1, 0);
    expect(await engine.progress(w1, job.id, taken!.lease!, '{"frame":12}')).toBe(true);
    await engine.write([]);
    expect(asked).toContainEqual([job.id, "progress", { frame: 12 }]);
    expect(store.logLines.some((l) => l.jobId === job.id && l.text === `{"frame":12}`)).toBe(true);
  });

  it("stream chunks are read once each; log lines reach followers and queries", async () => {
    const { engine, w1 } = setup();
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [taken] = await engine.take(w1, 1, 0);
    expect(await engine.appendStream(w1, job.id, taken!.lease, [{ output: "a" }, "b"])).toBe(true);
    expect(await engine.appendStream(w1, job.id, "not-a-lease", ["c"])).toBe(false);
    expect(await engine.readStream("e1", job.id)).toEqual({
      status: "IN_PROGRESS",
      chunks: [JSON.stringify({ output: "a" }), JSON.stringify({ output: "b" })],
    });

    const followed: string[] = [];
    const stop = engine.followLogs("e1", (lines) => followed.push(...lines.map((l) => l.text)));
    await engine.appendLogs([{ ts: 1, endpointId: "e1", workerId: "w1", jobId: job.id, stream: "stdout", text: "hello" }]);
    stop();
    await engine.appendLogs([{ ts: 2, endpointId: "e1", workerId: "w1", jobId: job.id, stream: "stdout", text: "later" }]);
    expect(followed).toEqual(["hello"]);
    expect((await engine.queryLogs({ endpointId: "e1", limit: 10 })).map((l) => l.text)).toEqual(["hello", "later"]);
  });
});
