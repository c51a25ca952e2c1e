// The job engine driven as the service drives it, over an in-memory store and a clock the test moves: what a
// caller observes of submit/take/done, leases and their lapse, priorities, cancellation, retention, and a store
// that refuses writes.

import { afterEach, describe, expect, it } from "vitest";
import { JobEngine, type Clock, type EngineEndpoint, type EngineHooks } from "./index.js";
import { StorageUnavailable, type StorageState } from "../store/faults.js";
import { ADOPT_EVERY_MS, ANNOUNCE_EVERY_MS, HANDOFF_LINGER_MS, STREAM_GAP_MS } from "./handoff.js";
import type { EndpointRow, JobRow, KeyRow, LogRow, Store, StoreOp, StreamChunkRow, WebhookRow } from "../store/types.js";

/** The store's job side in Maps; `refuse` makes apply fail (nothing applied) with that error code, as a full disk does. */
class MemoryJobStore implements Store {
  readonly jobs = new Map<string, JobRow>();
  readonly chunks = new Map<string, StreamChunkRow[]>();
  readonly logLines: Array<LogRow & { seq: number }> = [];
  readonly webhooks = new Map<string, WebhookRow>();
  readonly counters = new Map<string, { completed: number; failed: number; retried: number }>();
  refuse?: string;
  applied = 0;

  async apply(ops: StoreOp[]): Promise<void> {
    if (this.refuse) throw Object.assign(new Error(`refused (${this.refuse})`), { code: this.refuse });
    this.applied++;
    for (const o of ops) {
      switch (o.op) {
        case "insertJob":
          this.jobs.set(o.job.id, { ...o.job });
          break;
        case "updateJob": {
          const row = this.jobs.get(o.id);
          if (row) Object.assign(row, o.set);
          break;
        }
        case "deleteJob":
          this.jobs.delete(o.id);
          this.chunks.delete(o.id);
          break;
        case "insertChunk": {
          let list = this.chunks.get(o.chunk.jobId);
          if (!list) this.chunks.set(o.chunk.jobId, (list = []));
          list.push({ ...o.chunk });
          break;
        }
        case "deleteChunksAfter":
          this.chunks.set(
            o.jobId,
            (this.chunks.get(o.jobId) ?? []).filter((c) => c.seq <= o.seq),
          );
          break;
        case "insertLog":
          this.logLines.push({ ...o.line, seq: this.logLines.length + 1 });
          break;
        case "insertWebhook":
          this.webhooks.set(o.webhook.id, { ...o.webhook });
          break;
        case "addCounters": {
          const c = this.counters.get(o.endpointId) ?? { completed: 0, failed: 0, retried: 0 };
          this.counters.set(o.endpointId, { completed: c.completed + o.completed, failed: c.failed + o.failed, retried: c.retried + o.retried });
          break;
        }
        case "deleteEndpoint":
          this.counters.delete(o.id);
          break;
        default:
          throw new Error(`MemoryJobStore: ${o.op} is not a job-side op`);
      }
    }
  }

  async getJob(id: string) {
    const row = this.jobs.get(id);
    return row && { ...row };
  }
  async jobInput(id: string) {
    return this.jobs.get(id)?.input;
  }
  async activeJobs() {
    return [...this.jobs.values()].filter((j) => j.status === "IN_QUEUE" || j.status === "IN_PROGRESS").map((j) => ({ ...j }));
  }
  async chunksAfter(jobId: string, seq: number) {
    return (this.chunks.get(jobId) ?? []).filter((c) => c.seq > seq).sort((a, b) => a.seq - b.seq);
  }
  async lastChunkSeq(jobId: string) {
    return Math.max(0, ...(this.chunks.get(jobId) ?? []).map((c) => c.seq));
  }
  async expiredJobIds(now: number, limit: number) {
    return [...this.jobs.values()]
      .filter((j) => j.expiresAt !== null && j.expiresAt <= now)
      .slice(0, limit)
      .map((j) => j.id);
  }
  async logs(q: { endpointId: string; jobId?: string; since?: number; afterId?: number; limit: number }) {
    return this.logLines
      .filter((l) => l.endpointId === q.endpointId && (q.jobId === undefined || l.jobId === q.jobId) && (q.afterId === undefined || l.seq > q.afterId))
      .slice(0, q.limit);
  }
  async dueWebhooks(now: number, limit: number) {
    return [...this.webhooks.values()].filter((w) => w.nextAt <= now).slice(0, limit);
  }
  async endpoints(): Promise<EndpointRow[]> {
    return [];
  }
  async keyByHash(): Promise<KeyRow | undefined> {
    return undefined;
  }
  async apps() {
    return [];
  }
  async environments() {
    return [];
  }
  async build() {
    return undefined;
  }
  async releases() {
    return [];
  }
  async close() {}

  /** Jobs other replicas handed off, by id: the mark a PostgreSQL row carries. */
  readonly handedOff = new Set<string>();
  async handOffJobs(jobs: JobRow[]) {
    for (const job of jobs) {
      this.jobs.set(job.id, { ...job });
      this.handedOff.add(job.id);
    }
  }
  async applyAndAdopt(ops: StoreOp[]) {
    await this.apply(ops);
    const ids = [...this.handedOff];
    this.handedOff.clear();
    return ids
      .map((id) => this.jobs.get(id))
      .filter((j): j is JobRow => j?.status === "IN_QUEUE")
      .map((j) => ({ ...j }));
  }
}

/** Time moves only when the test says; timers due by then fire in order. */
class FakeClock implements Clock {
  private t = Date.UTC(2025, 0, 1);
  private nextId = 1;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): number {
    const id = this.nextId++;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  }
  clearTimeout(timer: unknown): void {
    this.timers.delete(timer as number);
  }
  advance(ms: number): void {
    this.t += ms;
    for (;;) {
      const due = [...this.timers].filter(([, x]) => x.at <= this.t).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) return;
      this.timers.delete(due[0]);
      due[1].fn();
    }
  }
}

const LEASE_MS = 30_000;
const engines: JobEngine[] = [];
afterEach(async () => {
  for (const e of engines.splice(0)) await e.close();
});

function setup(opts: { endpoint?: Partial<EngineEndpoint>; hooks?: EngineHooks } = {}) {
  const store = new MemoryJobStore();
  const clock = new FakeClock();
  const engine = new JobEngine(store, { leaseMs: LEASE_MS, heartbeatMs: 10_000 }, opts.hooks ?? {}, clock);
  engines.push(engine);
  engine.endpoints.set("e1", { id: "e1", type: "queue", retries: 0, executionTimeoutMs: 600_000, maxConcurrency: 2, functions: [], ...opts.endpoint });
  return { store, clock, engine, w1: engine.register("w1", "e1", 1), w2: engine.register("w2", "e1", 1) };
}

describe("the job engine over an in-memory store and a fake clock", () => {
  it("a submitted job is taken under a lease; its completion is recorded with its output, in memory and in the store", async () => {
    const { engine, store, w1 } = setup();
    const job = await engine.submit("e1", { input: { n: 1 }, sync: false });
    expect(job).toMatchObject({ status: "IN_QUEUE", attempt: 0 });
    expect(store.jobs.get(job.id)?.status).toBe("IN_QUEUE");

    const [taken] = await engine.take(w1, 1, 0);
    expect(taken).toMatchObject({ id: job.id, status: "IN_PROGRESS", attempt: 1, workerId: "w1" });
    const lease = taken!.lease!;
    expect(typeof lease).toBe("string");
    expect(store.jobs.get(job.id)).toMatchObject({ status: "IN_PROGRESS", lease });
    expect(engine.health("e1")).toMatchObject({ jobs: { inQueue: 0, inProgress: 1 }, workers: { running: 1, idle: 1 } });

    const answers = await engine.done(w1, [{ jobId: job.id, lease, status: "COMPLETED", output: { sum: 3 } }]);
    expect(answers).toEqual([{ jobId: job.id, accepted: true }]);
    const record = await engine.record("e1", job.id);
    expect(record).toMatchObject({ status: "COMPLETED", output: JSON.stringify({ sum: 3 }), lease: null });
    expect(store.jobs.get(job.id)).toMatchObject({ status: "COMPLETED", output: JSON.stringify({ sum: 3 }) });
    expect(engine.health("e1").jobs).toMatchObject({ completed: 1, inProgress: 0 });
    expect(store.counters.get("e1")).toEqual({ completed: 1, failed: 0, retried: 0 });
    // The same result sent again is told why it is refused.
    expect(await engine.done(w1, [{ jobId: job.id, lease, status: "COMPLETED", output: 1 }])).toEqual([
      { jobId: job.id, accepted: false, code: "job-final", status: "COMPLETED", reason: "job is COMPLETED" },
    ]);
  });

  it("a caller waiting for a job's end is answered from the final state just committed, without reading the store again", async () => {
    const { engine, store, w1 } = setup();
    const job = await engine.submit("e1", { input: { n: 2 }, sync: true });
    const waiting = engine.waitFinalHead("e1", job.id, 60_000);
    const [taken] = await engine.take(w1, 1, 0);
    // The take woke the waiter (the job changed); it waits again before the result comes, as over a network.
    await new Promise((resolve) => setImmediate(resolve));
    let reads = 0;
    const getJob = store.getJob.bind(store);
    store.getJob = async (id: string) => {
      reads++;
      return getJob(id);
    };
    await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: { sum: 4 } }]);
    const answer = await waiting;
    expect(answer).toEqual({ row: expect.objectContaining({ id: job.id, status: "COMPLETED", output: JSON.stringify({ sum: 4 }) }), outputBytes: null });
    // On PostgreSQL each such read is a round trip on every /runsync's path.
    expect(reads).toBe(0);
    // A later reader, with the job out of memory, reads what the store has.
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "COMPLETED" });
    expect(reads).toBe(1);
  });

  it("a heartbeat keeps the lease; a lease left alone lapses at leaseMs: the job is queued again, taken as attempt 2, and the stale result is refused", async () => {
    const { engine, clock, w1, w2 } = setup();
    const job = await engine.submit("e1", { input: 1, sync: false });
    // Taken rows are the live records: keep the lease as it was handed out.
    const [first] = await engine.take(w1, 1, 0);
    const lease1 = first!.lease!;

    clock.advance(LEASE_MS - 1);
    expect(engine.heartbeat(w1, [lease1])).toEqual([]);
    clock.advance(LEASE_MS - 1);
    engine.tick();
    expect((await engine.record("e1", job.id))!.status).toBe("IN_PROGRESS");

    clock.advance(1);
    engine.tick();
    expect((await engine.record("e1", job.id))!.status).toBe("IN_QUEUE");
    expect(engine.queuedCount("e1")).toBe(1);
    expect(engine.health("e1").workers).toMatchObject({ running: 0, idle: 2 });

    const [second] = await engine.take(w2, 1, 0);
    const lease2 = second!.lease!;
    expect(second).toMatchObject({ id: job.id, attempt: 2, workerId: "w2" });
    expect(lease2).not.toBe(lease1);
    expect(engine.heartbeat(w1, [lease1])).toEqual([lease1]);
    expect(await engine.done(w1, [{ jobId: job.id, lease: lease1, status: "COMPLETED", output: "from w1" }])).toEqual([
      { jobId: job.id, accepted: false, code: "lease-lost", reason: "lease lost" },
    ]);
    expect(await engine.done(w2, [{ jobId: job.id, lease: lease2, status: "COMPLETED", output: "from w2" }])).toEqual([{ jobId: job.id, accepted: true }]);
    expect((await engine.record("e1", job.id))!.output).toBe(JSON.stringify("from w2"));
  });

  it("normal-priority jobs are taken before low-priority ones, each kind in order of submission", async () => {
    const { engine, w1 } = setup();
    const low1 = await engine.submit("e1", { input: "low1", lowPriority: true, sync: false });
    const normal1 = await engine.submit("e1", { input: "normal1", sync: false });
    const low2 = await engine.submit("e1", { input: "low2", lowPriority: true, sync: false });
    const normal2 = await engine.submit("e1", { input: "normal2", sync: false });
    const taken = await engine.take(w1, 10, 0);
    expect(taken.map((j) => j.id)).toEqual([normal1.id, normal2.id, low1.id, low2.id]);
  });

  it("a waiting take is answered with a job submitted meanwhile, and answers empty when its wait is over", async () => {
    const { engine, clock, w1 } = setup();
    const waiting = engine.take(w1, 1, 10_000);
    const job = await engine.submit("e1", { input: 1, sync: false });
    // A real second at most: a take nobody serves would otherwise wait for the fake clock forever.
    const answer = await Promise.race([waiting, new Promise((resolve) => setTimeout(() => resolve("still waiting"), 1000))]);
    expect((answer as Array<{ id: string }>).map((j) => j.id)).toEqual([job.id]);

    const empty = engine.take(w1, 1, 10_000);
    let answered = false;
    void empty.then(() => (answered = true));
    await new Promise((r) => setImmediate(r));
    expect(answered).toBe(false);
    clock.advance(10_000);
    expect(await empty).toEqual([]);
  });

  it("cancelling a running job tells its worker through the events long poll, and the job ends CANCELLED", async () => {
    const { engine, w1 } = setup();
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [taken] = await engine.take(w1, 1, 0);
    const lease = taken!.lease!;
    const events = engine.events(w1, 60_000);
    const cancelled = await engine.cancel("e1", job.id);
    expect(cancelled).toMatchObject({ status: "CANCELLED" });
    expect(await events).toEqual({ cancel: [job.id], drain: false });
    expect(await engine.done(w1, [{ jobId: job.id, lease, status: "COMPLETED" }])).toEqual([
      { jobId: job.id, accepted: false, code: "job-final", status: "CANCELLED", reason: "job is CANCELLED" },
    ]);
    await expect(engine.cancel("e1", job.id)).rejects.toMatchObject({ kind: "invalid" });
  });

  it("a job past its execution timeout ends TIMED_OUT at the next tick and its worker is told to stop it", async () => {
    const { engine, store, clock, w1 } = setup({ endpoint: { executionTimeoutMs: 5_000 } });
    const job = await engine.submit("e1", { input: 1, sync: false });
    await engine.take(w1, 1, 0);
    clock.advance(5_000);
    engine.tick();
    expect((await engine.record("e1", job.id))!.status).toBe("IN_PROGRESS");
    clock.advance(1);
    engine.tick();
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "TIMED_OUT", errorType: "TimeoutError" });
    await engine.write([]);
    expect(store.jobs.get(job.id)).toMatchObject({ status: "TIMED_OUT" });
    expect(await engine.events(w1, 0)).toEqual({ cancel: [job.id], drain: false });
  });

  it("a job's own execution timeout (policy.executionTimeout) wins over its endpoint's", async () => {
    const { engine, clock, w1 } = setup({ endpoint: { executionTimeoutMs: 600_000 } });
    const job = await engine.submit("e1", { input: 1, executionTimeoutMs: 2_000, sync: false });
    const [taken] = await engine.take(w1, 1, 0);
    expect(taken).toMatchObject({ executionTimeoutMs: 2_000 });
    clock.advance(2_001);
    engine.tick();
    expect(await engine.record("e1", job.id)).toMatchObject({
      status: "TIMED_OUT",
      errorType: "TimeoutError",
      error: "The job ran longer than its execution timeout of 2000 ms",
    });
  });

  it("a failed job with retries left is queued again; out of retries it ends FAILED, counted once each way", async () => {
    const { engine, store, clock, w1 } = setup({ endpoint: { retries: 1 } });
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [a] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: job.id, lease: a!.lease!, status: "FAILED", error: { message: "boom" } }]);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "IN_QUEUE", retried: 1, error: null });
    clock.advance(1_000); // the first retry's backoff is at most the default base, 1 s
    const [b] = await engine.take(w1, 1, 0);
    expect(b).toMatchObject({ id: job.id, attempt: 2 });
    await engine.done(w1, [{ jobId: job.id, lease: b!.lease!, status: "FAILED", error: { message: "boom again", type: "Oops" } }]);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "FAILED", error: "boom again", errorType: "Oops" });
    expect(engine.health("e1").jobs).toMatchObject({ failed: 1, retried: 1 });
    expect(store.counters.get("e1")).toEqual({ completed: 0, failed: 1, retried: 1 });
  });

  it("a failed job waits out its backoff before it can be taken again, also after a restart; the wait is kept in the store", async () => {
    const backoff = { baseMs: 1_000, factor: 2, maxMs: 3_000 };
    const { engine, store, clock, w1 } = setup({ endpoint: { retries: 3, backoff } });
    const job = await engine.submit("e1", { input: 1, sync: false });
    const ceilings: number[] = [];
    for (let retry = 1; retry <= 3; retry++) {
      const [taken] = await engine.take(w1, 1, 0);
      expect(taken).toMatchObject({ id: job.id, attempt: retry });
      const failedAt = clock.now();
      await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "FAILED", error: { message: "flaky" } }]);
      const notBefore = (await engine.record("e1", job.id))!.notBefore!;
      // Full jitter: anywhere from now to the exponential ceiling, capped at maxMs.
      ceilings.push(Math.min(3_000, 1_000 * 2 ** (retry - 1)));
      expect(notBefore - failedAt).toBeGreaterThanOrEqual(0);
      expect(notBefore - failedAt).toBeLessThanOrEqual(ceilings[retry - 1]!);
      await engine.write([]);
      expect(store.jobs.get(job.id)).toMatchObject({ status: "IN_QUEUE", notBefore });
      // The job's logs say why it waits and for how long.
      expect(store.logLines.at(-1)).toMatchObject({
        jobId: job.id,
        workerId: "svc",
        stream: "log",
        text: `attempt ${retry} failed; retry ${retry} of 3 in ${notBefore - failedAt} ms`,
      });
      if (notBefore > clock.now()) {
        clock.advance(notBefore - clock.now() - 1);
        expect(await engine.take(w1, 1, 0)).toEqual([]);
        // Waiting out a backoff is not waiting for a worker: the scaler is not told of it.
        expect(engine.waiting("e1", 10)).toEqual({ normal: 0, low: 0, waitingSince: [] });
        expect(engine.health("e1").jobs.inQueue).toBe(1);
      }
      clock.advance(1);
    }
    expect(ceilings).toEqual([1_000, 2_000, 3_000]);
    const [last] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: job.id, lease: last!.lease!, status: "FAILED", error: { message: "flaky" } }]);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "FAILED", retried: 3, attempt: 4 });

    // Across a restart: a job still backing off is loaded as such and taken only once its backoff is over.
    const other = await engine.submit("e1", { input: 2, sync: false });
    const [o] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: other.id, lease: o!.lease!, status: "FAILED", error: { message: "flaky" } }]);
    const notBefore = (await engine.record("e1", other.id))!.notBefore!;
    await engine.close();
    const restarted = new JobEngine(store, { leaseMs: LEASE_MS, heartbeatMs: 10_000 }, {}, clock);
    engines.push(restarted);
    restarted.endpoints.set("e1", { id: "e1", type: "queue", retries: 3, backoff, executionTimeoutMs: 600_000, maxConcurrency: 2, functions: [] });
    await restarted.load([{ id: "e1", completed: 0, failed: 1, retried: 3 }]);
    const w9 = restarted.register("w9", "e1", 1);
    if (notBefore > clock.now()) expect(await restarted.take(w9, 1, 0)).toEqual([]);
    clock.advance(Math.max(0, notBefore - clock.now()));
    expect((await restarted.take(w9, 1, 0)).map((j) => j.id)).toEqual([other.id]);
  });

  it("a failure the handler marks not retryable ends the job FAILED at once, whatever retries are left", async () => {
    const { engine, w1 } = setup({ endpoint: { retries: 5 } });
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [a] = await engine.take(w1, 1, 0);
    await engine.done(w1, [
      { jobId: job.id, lease: a!.lease!, status: "FAILED", error: { message: "bad input", type: "NonRetryableError", retryable: false } },
    ]);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "FAILED", retried: 0, attempt: 1, error: "bad input", errorType: "NonRetryableError" });
    expect(engine.health("e1").jobs).toMatchObject({ failed: 1, retried: 0, inQueue: 0 });
  });

  it("a job whose ttl runs out in the queue is never taken and ends TIMED_OUT saying so; a running one is stopped", async () => {
    const finals: JobRow[] = [];
    const { engine, store, clock, w1 } = setup({ hooks: { onFinal: (row) => finals.push(row) } });
    const queued = await engine.submit("e1", { input: "late", lifetimeMs: 5_000, sync: false });
    clock.advance(4_999);
    engine.tick();
    expect((await engine.record("e1", queued.id))!.status).toBe("IN_QUEUE");
    clock.advance(1);
    // Taken at the very moment its ttl ran out, before any tick noticed: never handed out.
    expect(await engine.take(w1, 1, 0)).toEqual([]);
    expect(await engine.record("e1", queued.id)).toMatchObject({
      status: "TIMED_OUT",
      startedAt: null,
      attempt: 0,
      errorType: "TtlExpired",
      error: expect.stringMatching(/ttl of 5000 ms .* ran out while it waited in the queue; it never started/),
    });
    expect(engine.health("e1").jobs).toMatchObject({ inQueue: 0, inProgress: 0 });

    const running = await engine.submit("e1", { input: "slow", lifetimeMs: 5_000, sync: false });
    await engine.take(w1, 1, 0);
    clock.advance(5_000);
    engine.tick();
    expect(await engine.record("e1", running.id)).toMatchObject({
      status: "TIMED_OUT",
      errorType: "TtlExpired",
      error: expect.stringMatching(/ran out while it ran; it was stopped/),
    });
    expect(await engine.events(w1, 0)).toEqual({ cancel: [running.id], drain: false });
    await engine.write([]);
    expect(store.jobs.get(running.id)).toMatchObject({ status: "TIMED_OUT" });
    // Kept for the interface's retention after it ended (30 min for /run), then gone.
    expect(store.jobs.get(running.id)!.expiresAt).toBe(clock.now() + 30 * 60_000);
    expect(finals.map((r) => r.id)).toEqual([queued.id, running.id]);
  });

  it("a job without a ttl lives the provider's default, 24 hours; /retry gives a job its whole ttl again", async () => {
    const { engine, clock } = setup();
    const job = await engine.submit("e1", { input: 1, sync: false });
    expect((await engine.record("e1", job.id))!.deadlineAt).toBe(clock.now() + 24 * 3600_000);
    clock.advance(24 * 3600_000);
    engine.tick();
    expect((await engine.record("e1", job.id))!.status).toBe("TIMED_OUT");
    clock.advance(1_000);
    await engine.retry("e1", job.id);
    expect(await engine.record("e1", job.id)).toMatchObject({ status: "IN_QUEUE", deadlineAt: clock.now() + 24 * 3600_000 });
  });

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

  it("a final job is gone from record() once its ttl passed, and sweep() deletes it from the store", async () => {
    const { engine, store, clock, w1 } = setup();
    const job = await engine.submit("e1", { input: 1, sync: false });
    const [taken] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: 1 }]);
    await engine.setTtl("e1", job.id, 1_000);

    clock.advance(999);
    expect(await engine.sweep()).toBe(0);
    expect((await engine.record("e1", job.id))?.status).toBe("COMPLETED");
    clock.advance(1);
    expect(await engine.record("e1", job.id)).toBeUndefined();
    expect(store.jobs.has(job.id)).toBe(true);
    expect(await engine.sweep()).toBe(1);
    expect(store.jobs.has(job.id)).toBe(false);
  });

  it("a worker that is gone hands its jobs back at once; a restarted engine loads queued and running jobs from the store", async () => {
    const { engine, store, clock, w1 } = setup();
    const a = await engine.submit("e1", { input: "a", sync: false });
    const b = await engine.submit("e1", { input: "b", sync: false });
    await engine.take(w1, 1, 0);
    engine.workerGone("w1");
    expect(engine.health("e1").jobs).toMatchObject({ inQueue: 2, inProgress: 0 });
    const w3 = engine.register("w3", "e1", 1);
    const [again] = await engine.take(w3, 1, 0);
    const lease = again!.lease;
    expect(again).toMatchObject({ id: a.id, attempt: 2 });
    await engine.close();

    const restarted = new JobEngine(store, { leaseMs: LEASE_MS, heartbeatMs: 10_000 }, {}, clock);
    engines.push(restarted);
    await restarted.load([{ id: "e1", completed: 0, failed: 0, retried: 0 }]);
    expect(restarted.health("e1").jobs).toMatchObject({ inQueue: 1, inProgress: 1 });
    const w4 = restarted.register("w4", "e1", 1);
    expect((await restarted.take(w4, 5, 0)).map((j) => j.id)).toEqual([b.id]);
    // The running job keeps its lease for one more lease period after the restart.
    clock.advance(LEASE_MS - 1);
    restarted.heartbeat(w4, []);
    restarted.tick();
    expect(await restarted.record("e1", a.id)).toMatchObject({ status: "IN_PROGRESS", lease });
    clock.advance(1);
    restarted.tick();
    expect(await restarted.record("e1", a.id)).toMatchObject({ status: "IN_QUEUE", lease: null });
  });

  it("a store that refuses writes fails the submission with 503 and says so in the storage state, until writes go through again for a while", async () => {
    const states: StorageState[] = [];
    const { engine, store, clock, w1 } = setup({ hooks: { onStorage: (s) => states.push(s) } });
    store.refuse = "SQLITE_FULL";
    await expect(engine.submit("e1", { input: 1, sync: false })).rejects.toBeInstanceOf(StorageUnavailable);
    expect(engine.storageState()).toMatchObject({ ok: false, cause: "full", since: clock.now() });
    expect(engine.queuedCount("e1")).toBe(0);
    expect(store.jobs.size).toBe(0);

    store.refuse = undefined;
    const kept = await engine.submit("e1", { input: 2, sync: false });
    expect((await engine.take(w1, 5, 0)).map((j) => j.id)).toEqual([kept.id]);
    clock.advance(1_999);
    engine.tick();
    expect(engine.storageState().ok).toBe(false);
    clock.advance(1);
    engine.tick();
    expect(engine.storageState()).toEqual({ ok: true });
    expect(states.map((s) => s.ok)).toEqual([false, true]);
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
  describe("a /runsync job (its caller learns its id only from the answer)", () => {
    /** Every state of `id` the store was given, in order. */
    function statesStored(store: MemoryJobStore, id: () => string | undefined): string[] {
      const seen: string[] = [];
      const apply = store.apply.bind(store);
      store.apply = async (ops: StoreOp[]) => {
        await apply(ops);
        for (const o of ops) {
          if (o.op === "insertJob" && o.job.id === id()) seen.push(`insert ${o.job.status}`);
          if (o.op === "updateJob" && o.id === id()) seen.push(`update ${o.set.status ?? "-"}`);
        }
      };
      return seen;
    }

    it("reaches the store once, whole, when it ends within its wait: one commit for the job instead of one per change", async () => {
      const { engine, store, w1 } = setup();
      let id: string | undefined;
      const seen = statesStored(store, () => id);
      const job = await engine.submit("e1", { input: { n: 5 }, sync: true, deferWrite: true });
      id = job.id;
      const [taken] = await engine.take(w1, 1, 0);
      expect(taken).toMatchObject({ id: job.id, status: "IN_PROGRESS" });
      expect(store.jobs.has(job.id)).toBe(false);
      // The service's own reads see it all along.
      expect(await engine.record("e1", job.id)).toMatchObject({ status: "IN_PROGRESS", workerId: "w1" });

      await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: { sum: 6 } }]);
      await engine.persist(job.id);
      expect(seen).toEqual(["insert COMPLETED"]);
      expect(store.jobs.get(job.id)).toMatchObject({ status: "COMPLETED", output: JSON.stringify({ sum: 6 }), workerId: "w1", attempt: 1 });
      expect(store.counters.get("e1")).toEqual({ completed: 1, failed: 0, retried: 0 });
    });

    it("is in the store before a caller whose wait ended first learns its id, and its end is an update from there", async () => {
      const { engine, store, w1 } = setup();
      let id: string | undefined;
      const seen = statesStored(store, () => id);
      const job = await engine.submit("e1", { input: 1, sync: true, deferWrite: true });
      id = job.id;
      const [taken] = await engine.take(w1, 1, 0);
      await engine.persist(job.id);
      expect(store.jobs.get(job.id)).toMatchObject({ status: "IN_PROGRESS", lease: taken!.lease });
      await engine.done(w1, [{ jobId: job.id, lease: taken!.lease!, status: "COMPLETED", output: 2 }]);
      expect(seen).toEqual(["insert IN_PROGRESS", "update COMPLETED"]);
      expect(store.jobs.get(job.id)).toMatchObject({ status: "COMPLETED", output: "2" });
    });

    it("goes to the store before its first stream chunk, which readers find there by its id", async () => {
      const { engine, store, w1 } = setup();
      const job = await engine.submit("e1", { input: 1, sync: true, deferWrite: true });
      const [taken] = await engine.take(w1, 1, 0);
      expect(await engine.appendStream(w1, job.id, taken!.lease, ["a"])).toBe(true);
      expect(store.jobs.get(job.id)).toMatchObject({ status: "IN_PROGRESS" });
      expect(await engine.readStream("e1", job.id)).toEqual({ status: "IN_PROGRESS", chunks: [JSON.stringify({ output: "a" })] });
    });

    it("whose end the store refused runs on unwritten: the worker's resend is accepted and writes it whole", async () => {
      const { engine, store, w1 } = setup();
      const job = await engine.submit("e1", { input: 1, sync: true, deferWrite: true });
      const [taken] = await engine.take(w1, 1, 0);
      store.refuse = "SQLITE_FULL";
      const result = { jobId: job.id, lease: taken!.lease!, status: "COMPLETED" as const, output: 3 };
      await expect(engine.done(w1, [result])).rejects.toBeInstanceOf(StorageUnavailable);
      expect(store.jobs.has(job.id)).toBe(false);
      expect(await engine.record("e1", job.id)).toMatchObject({ status: "IN_PROGRESS" });
      store.refuse = undefined;
      expect(await engine.done(w1, [result])).toEqual([{ jobId: job.id, accepted: true }]);
      await engine.persist(job.id);
      expect(store.jobs.get(job.id)).toMatchObject({ status: "COMPLETED", output: "3" });
    });

    it("is written at once, and refused at once, while the store refuses writes", async () => {
      const { engine, store } = setup();
      store.refuse = "SQLITE_FULL";
      await expect(engine.submit("e1", { input: 1, sync: false })).rejects.toBeInstanceOf(StorageUnavailable);
      await expect(engine.submit("e1", { input: 2, sync: true, deferWrite: true })).rejects.toBeInstanceOf(StorageUnavailable);
      expect(engine.queuedCount("e1")).toBe(0);
      store.refuse = undefined;
    });
  });

  it("jobs handed off by other replicas are adopted once, and only by the engine serving jobs: one it holds already is not queued twice", async () => {
    const { engine, store, clock, w1, w2 } = setup();
    const submitted = { input: {}, sync: false };
    // Handed off before this engine loaded: the load finds it, and its mark is still there at the adoption.
    const early = await engine.handOff("e1", submitted, "follower");
    await engine.load([]);
    // Not serving jobs yet: nothing is adopted (a follower must leave the marks alone).
    expect(await engine.adoptHandedOff()).toBe(0);
    expect(store.handedOff.has(early.id)).toBe(true);
    const late = await engine.handOff("e1", submitted, "follower");
    expect(await engine.acceptHandoffs()).toBe(1);
    expect(engine.health("e1").jobs.inQueue).toBe(2);
    const taken = [...(await engine.take(w1, 1, 0)), ...(await engine.take(w2, 1, 0))];
    expect(taken.map((j) => j.id)).toEqual([early.id, late.id]);
    expect(engine.health("e1").jobs.inQueue).toBe(0);
    // Adoptions begin at most every ADOPT_EVERY_MS.
    const next = engine.adoptHandedOff();
    clock.advance(ADOPT_EVERY_MS);
    expect(await next).toBe(0);
  });

  it("after a follower's notice, jobs it hands off before it may send the next are adopted without one, and adopting stops once nothing comes", async () => {
    const { engine, clock } = setup();
    await engine.acceptHandoffs();
    const submitted = { input: {}, sync: false };
    /** Let the clock's timers and the batches they start run their course. */
    const step = async (ms: number) => {
      clock.advance(ms);
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    };
    await step(ADOPT_EVERY_MS);
    await engine.handOff("e1", submitted, "follower");
    expect(await engine.adoptHandedOff({ announced: true })).toBe(1);
    // The follower's next notice may come only ANNOUNCE_EVERY_MS after the first: its next jobs come meanwhile,
    // after an adoption that found none...
    await step(ADOPT_EVERY_MS);
    expect(engine.health("e1").jobs.inQueue).toBe(1);
    await engine.handOff("e1", submitted, "follower");
    await step(ADOPT_EVERY_MS);
    expect(engine.health("e1").jobs.inQueue).toBe(2);
    // ...and while adoptions find some.
    await engine.handOff("e1", submitted, "follower");
    await step(ADOPT_EVERY_MS);
    expect(engine.health("e1").jobs.inQueue).toBe(3);
    // Nothing more for longer than the pause between notices: the engine stops looking...
    for (let t = 0; t < ANNOUNCE_EVERY_MS * 3; t += ADOPT_EVERY_MS) await step(ADOPT_EVERY_MS);
    await engine.handOff("e1", submitted, "follower");
    for (let t = 0; t < ANNOUNCE_EVERY_MS * 3; t += ADOPT_EVERY_MS) await step(ADOPT_EVERY_MS);
    expect(engine.health("e1").jobs.inQueue).toBe(3);
    // ...until the next notice (or rescan).
    expect(await engine.adoptHandedOff({ announced: true })).toBe(1);
    expect(engine.health("e1").jobs.inQueue).toBe(4);
  });

  it("a follower writes a lone submission at once, and under a steady stream waits for the callers of its last write", async () => {
    const { engine, store, clock } = setup();
    const writes: number[] = [];
    let release: (() => void) | undefined;
    const handOffJobs = store.handOffJobs.bind(store);
    store.handOffJobs = async (jobs: JobRow[]) => {
      writes.push(jobs.length);
      if (writes.length === 1) await new Promise<void>((resolve) => (release = resolve));
      return handOffJobs(jobs);
    };
    const submitted = { input: {}, sync: false };
    const tick = () => new Promise((r) => setImmediate(r));
    const handOff = () => engine.handOff("e1", submitted, "follower");
    const first = handOff();
    await tick();
    // Written with no wait for company (the clock has not moved).
    expect(writes).toEqual([1]);
    // Two come while it is under way: with the one it answers, three callers were busy in this cycle.
    const second = [handOff(), handOff()];
    release!();
    await first;
    await tick();
    expect(writes).toEqual([1]);
    // The third comes back: the company is complete and the write goes at once, the clock still unmoved.
    second.push(handOff());
    await tick();
    expect(writes).toEqual([1, 3]);
    await Promise.all(second);
    // Of those three, two come back: the write waits for the third, at most HANDOFF_LINGER_MS.
    const third = [handOff(), handOff()];
    await tick();
    clock.advance(HANDOFF_LINGER_MS - 1);
    await tick();
    expect(writes).toEqual([1, 3]);
    clock.advance(1);
    await tick();
    expect(writes).toEqual([1, 3, 2]);
    await Promise.all(third);
    // One of those two comes back 5 ms later, as clients do on a loaded machine (2-6 ms): still the stream, so it
    // waits for the other.
    expect(STREAM_GAP_MS).toBeGreaterThan(5);
    clock.advance(5);
    const late = handOff();
    await tick();
    expect(writes).toEqual([1, 3, 2]);
    clock.advance(HANDOFF_LINGER_MS);
    await late;
    expect(writes).toEqual([1, 3, 2, 1]);
    // After a pause, a lone submission is written at once again.
    clock.advance(10 * HANDOFF_LINGER_MS);
    await handOff();
    expect(writes).toEqual([1, 3, 2, 1, 1]);
  });

  it("a caller waiting for a handed-off job hears of its end even when the job ran and ended while its first read was in flight", async () => {
    const { engine, store, clock, w1 } = setup();
    await engine.acceptHandoffs();
    // Another replica hands a job off; this engine has not adopted it yet.
    const row = (await engine.handOff("e1", { input: {}, sync: false }, "follower")) as JobRow;
    // The waiter's read of the store is slow: it answers with the job as it was when the read began.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const getJob = store.getJob.bind(store);
    store.getJob = async (id: string) => {
      const before = await getJob(id);
      if (id === row.id) await gate;
      return before;
    };
    const waiting = engine.waitFinal("e1", row.id, 60_000);
    // Meanwhile it is adopted, taken and completed.
    clock.advance(ADOPT_EVERY_MS);
    expect(await engine.adoptHandedOff()).toBe(1);
    const [taken] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: row.id, lease: taken!.lease!, status: "COMPLETED", output: { ok: true } }]);
    store.getJob = getJob;
    release();
    // Its read, back, asks for an adoption (the job looks queued and is not in memory); it may have to wait for
    // the one that follows the adoption above.
    for (let i = 0; i < 3; i++) {
      clock.advance(ADOPT_EVERY_MS);
      await new Promise((r) => setImmediate(r));
    }
    const answer = await Promise.race([waiting.then((r) => r?.status), new Promise((resolve) => setTimeout(() => resolve("still waiting"), 500))]);
    expect(answer).toBe("COMPLETED");
  });
});
