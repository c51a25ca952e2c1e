// The worker loop's own logic against FakeService, an in-memory service written here: what it takes and when,
// what it reports and how, retries with backoff, the concurrency limit, cancels, drains and stops. The wire and a
// real service are test/runtime's.

import type { InvokeContext, InvokeResult, LoadedHandler } from "svc/internal";
import { describe, expect, it } from "vitest";
import { ApiError } from "../errors.js";
import type { JobResult, RegisterResponse, TakenJob } from "./api.js";
import { WorkerLoop, type WorkerLoopOptions } from "./loop.js";

type Answer = unknown;
/** What a route of the fake answers: a value, or a thrown error (an ApiError is the service's refusal). */
type Override = (body: Record<string, unknown>) => Answer | Promise<Answer>;

/**
 * A fake of the service's worker routes, in memory: jobs are queued with `add`; takes wait (up to their waitMs)
 * for one; results, chunks, releases and heartbeats are recorded. `override[route]` replaces a route's answer.
 */
class FakeService {
  readonly requests: Array<{ route: string; body: Record<string, unknown> }> = [];
  readonly results: JobResult[] = [];
  readonly chunks = new Map<string, unknown[]>();
  readonly released: string[] = [];
  readonly takeMax: number[] = [];
  readonly override: Partial<Record<string, Override>> = {};
  private readonly queue: TakenJob[] = [];
  private readonly takeWaiters: Array<() => void> = [];
  private pendingEvents: { cancel?: string[]; drain?: boolean } | undefined;
  private readonly eventWaiters: Array<() => void> = [];
  private seq = 0;

  constructor(private readonly register: Partial<RegisterResponse> = {}) {}

  add(input: unknown, extra: Partial<TakenJob> = {}): TakenJob {
    const n = ++this.seq;
    const job: TakenJob = { id: `job-${n}`, lease: `lease-${n}`, input, ...extra };
    this.queue.push(job);
    for (const wake of this.takeWaiters.splice(0)) wake();
    return job;
  }

  /** The next events long poll answers this. */
  event(events: { cancel?: string[]; drain?: boolean }): void {
    this.pendingEvents = events;
    for (const wake of this.eventWaiters.splice(0)) wake();
  }

  count(route: string): number {
    return this.requests.filter((r) => r.route === route).length;
  }

  /** Resolves once `n` results were recorded. */
  async resultsOf(n: number, timeoutMs = 5000): Promise<JobResult[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.results.length < n) {
      if (Date.now() > deadline) throw new Error(`only ${this.results.length} of ${n} results within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 5));
    }
    return this.results;
  }

  readonly api: WorkerLoopOptions["api"] = {
    post: async <T>(route: string, raw: unknown, options: { signal?: AbortSignal } = {}): Promise<T> => {
      const body = (typeof raw === "string" ? JSON.parse(raw) : raw) as Record<string, unknown>;
      this.requests.push({ route, body });
      const override = this.override[route];
      if (override) return (await override(body)) as T;
      return (await this.answer(route, body, options.signal)) as T;
    },
  };

  private async answer(route: string, body: Record<string, unknown>, signal: AbortSignal | undefined): Promise<Answer> {
    switch (route) {
      case "register":
        return { endpoint: { id: "ep", name: "ep" }, leaseMs: 30_000, heartbeatMs: 50, ...this.register } satisfies RegisterResponse;
      case "take": {
        const carried = (body.results as JobResult[] | undefined) ?? [];
        this.results.push(...carried);
        const max = body.max as number;
        this.takeMax.push(max);
        if (this.queue.length === 0) await this.wait(this.takeWaiters, body.waitMs as number, signal);
        return { jobs: this.queue.splice(0, max), results: carried.map((r) => ({ jobId: r.jobId, accepted: true })) };
      }
      case "done": {
        const results = body.results as JobResult[];
        this.results.push(...results);
        return { results: results.map((r) => ({ jobId: r.jobId, accepted: true })) };
      }
      case "stream": {
        const list = this.chunks.get(body.jobId as string) ?? [];
        list.push(...(body.chunks as Array<{ output: unknown }>).map((c) => c.output));
        this.chunks.set(body.jobId as string, list);
        return { ok: true };
      }
      case "events": {
        if (!this.pendingEvents) await this.wait(this.eventWaiters, body.waitMs as number, signal);
        const events = this.pendingEvents ?? {};
        this.pendingEvents = undefined;
        return events;
      }
      case "heartbeat":
        return { lost: [] };
      case "release":
        this.released.push(...(body.leases as string[]));
        return {};
      default:
        return {};
    }
  }

  /** Until woken, `ms` passed or the request is aborted (then it fails, as a closed request does). */
  private wait(waiters: Array<() => void>, ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(done, ms);
      const onAbort = () => {
        clearTimeout(timer);
        reject(new Error("request aborted"));
      };
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      waiters.push(done);
    });
  }
}

/** A handler whose every job runs `run`. */
function handler(run: (input: unknown, ctx: InvokeContext) => InvokeResult): LoadedHandler {
  return { endpoint: "ep", kind: "queue", functionNames: ["fn"], routes: [], init: async () => undefined, invoke: (_name, input, ctx) => run(input, ctx) };
}
const value = (fn: (input: unknown, ctx: InvokeContext) => unknown): LoadedHandler =>
  handler((input, ctx) => ({ kind: "value", value: Promise.resolve().then(() => fn(input, ctx)) }));

function loopOver(service: FakeService, over: Partial<WorkerLoopOptions> & Pick<WorkerLoopOptions, "handler">) {
  const notes: string[] = [];
  const loop = new WorkerLoop({ api: service.api, workerId: "w1", concurrency: 1, note: (t) => notes.push(t), takeWaitMs: 50, eventsWaitMs: 50, ...over });
  return { loop, notes, done: loop.run() };
}

describe("WorkerLoop", () => {
  it("registers, takes jobs, runs them and reports each result; stop drains and ends the run", async () => {
    const service = new FakeService();
    const { loop, done } = loopOver(service, { handler: value((input) => (input as number) * 2) });
    service.add(1);
    service.add(2);
    const results = await service.resultsOf(2);
    loop.stop("test");
    expect(await done).toBe("drained");
    expect(service.requests[0]).toMatchObject({ route: "register", body: { workerId: "w1", concurrency: 1 } });
    expect(results.map((r) => [r.jobId, r.lease, r.status, r.output])).toEqual([
      ["job-1", "lease-1", "COMPLETED", 2],
      ["job-2", "lease-2", "COMPLETED", 4],
    ]);
    // The service does not take results on a take (takeResults unset): each goes in a done request.
    expect(service.count("done")).toBeGreaterThan(0);
  });

  it("reports a thrown error as FAILED with its type and message, and a non-retryable one as such", async () => {
    const service = new FakeService();
    const { loop, done, notes } = loopOver(service, {
      handler: value((input) => {
        if (input === "final") throw Object.assign(new Error("give up"), { name: "NonRetryableError", retryable: false });
        throw new TypeError("bad input");
      }),
    });
    service.add("plain");
    service.add("final");
    const results = await service.resultsOf(2);
    loop.stop("test");
    await done;
    expect(results[0]).toMatchObject({ jobId: "job-1", status: "FAILED", error: { type: "TypeError", message: "bad input" } });
    expect(results[0]!.error!.retryable).toBeUndefined();
    expect(results[1]).toMatchObject({ jobId: "job-2", status: "FAILED", error: { type: "NonRetryableError", message: "give up", retryable: false } });
    expect(notes.some((n) => n.startsWith("job job-1 failed: TypeError: bad input"))).toBe(true);
  });

  it("sends results on the next take when the service takes them there, instead of a done request", async () => {
    const service = new FakeService({ takeResults: true });
    const { loop, done } = loopOver(service, { handler: value((input) => input) });
    service.add("a");
    await service.resultsOf(1);
    // The take carrying it answers within its wait (50 ms); stopped before that, the loop could not know the
    // result was recorded and would send it again in a done, as it should.
    await new Promise((r) => setTimeout(r, 150));
    loop.stop("test");
    await done;
    const carrying = service.requests.filter((r) => r.route === "take" && Array.isArray(r.body.results));
    expect(carrying.map((r) => (r.body.results as JobResult[]).map((x) => x.jobId))).toEqual([["job-1"]]);
    expect(service.count("done")).toBe(0);
  });

  it("runs at most `concurrency` jobs at once and takes only as many as it has free slots", async () => {
    const service = new FakeService();
    let running = 0;
    let most = 0;
    const { loop, done } = loopOver(service, {
      concurrency: 2,
      handler: value(async () => {
        running++;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 30));
        running--;
        return "ok";
      }),
    });
    for (let i = 0; i < 5; i++) service.add(i);
    await service.resultsOf(5);
    loop.stop("test");
    await done;
    expect(most).toBe(2);
    expect(Math.max(...service.takeMax)).toBe(2);
    expect(service.takeMax.every((max) => max >= 1 && max <= 2)).toBe(true);
  });

  it("retries a register the service did not answer, with backoff, then serves", async () => {
    const service = new FakeService();
    let failures = 2;
    const times: number[] = [];
    service.override.register = () => {
      times.push(Date.now());
      if (failures-- > 0) throw new Error("connect ECONNREFUSED");
      return { endpoint: { id: "ep", name: "ep" }, leaseMs: 30_000, heartbeatMs: 50 };
    };
    const { loop, done } = loopOver(service, { handler: value(() => "up") });
    service.add(null);
    await service.resultsOf(1);
    loop.stop("test");
    await done;
    expect(service.count("register")).toBe(3);
    // backoffMs: at least half of 100 ms, then of 200 ms.
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(45);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(95);
  });

  it("gives up after the service keeps refusing takes", async () => {
    const service = new FakeService();
    service.override.take = () => {
      throw new ApiError({ title: "Forbidden", status: 403, detail: "token revoked" });
    };
    const { done } = loopOver(service, { handler: value(() => "never") });
    // MAX_REFUSALS (10) takes, a second apart.
    expect(await done).toBe("refused");
    expect(service.count("take")).toBe(10);
  }, 20_000);

  it("cancels a job the events channel names: its signal aborts and no result is sent for it", async () => {
    const service = new FakeService();
    let aborted: unknown;
    const { loop, done } = loopOver(service, {
      handler: value(
        (_input, ctx) =>
          new Promise((resolve) => {
            ctx.signal.addEventListener("abort", () => {
              aborted = ctx.signal.reason;
              resolve("late");
            });
          }),
      ),
    });
    const job = service.add("long");
    while (loop.runningCount === 0) await new Promise((r) => setTimeout(r, 5));
    service.event({ cancel: [job.id] });
    while (aborted === undefined) await new Promise((r) => setTimeout(r, 5));
    loop.stop("test");
    await done;
    expect(String(aborted)).toContain("job-1 cancelled");
    expect(service.results).toEqual([]);
  });

  it("drains when the service asks: no more takes, held jobs finish and report", async () => {
    const service = new FakeService();
    let release: () => void = () => undefined;
    const { loop, done } = loopOver(service, { handler: value(() => new Promise((r) => (release = () => r("finished")))) });
    service.add("held");
    while (loop.runningCount === 0) await new Promise((r) => setTimeout(r, 5));
    service.event({ drain: true });
    await new Promise((r) => setTimeout(r, 30));
    const takes = service.count("take");
    service.add("not taken");
    release();
    expect(await done).toBe("drained");
    expect(service.count("take")).toBe(takes);
    expect(service.results.map((r) => [r.jobId, r.output])).toEqual([["job-1", "finished"]]);
  });

  it("on stop, hands back what has not finished within the grace period", async () => {
    const service = new FakeService();
    let signal: AbortSignal | undefined;
    const { loop, done } = loopOver(service, {
      handler: value((_input, ctx) => {
        signal = ctx.signal;
        return new Promise(() => undefined);
      }),
    });
    service.add("forever");
    while (loop.runningCount === 0) await new Promise((r) => setTimeout(r, 5));
    loop.stop("test", 20);
    expect(await done).toBe("drained");
    expect(service.released).toEqual(["lease-1"]);
    expect(signal?.aborted).toBe(true);
    expect(service.results).toEqual([]);
  });

  it("sends a streaming job's chunks in order, and its result with every output", async () => {
    const service = new FakeService();
    const { loop, done } = loopOver(service, {
      handler: handler(() => ({
        kind: "stream",
        stream: (async function* () {
          yield 1;
          yield { token: "b" };
          yield 3;
        })(),
      })),
    });
    service.add(null);
    const [result] = await service.resultsOf(1);
    loop.stop("test");
    await done;
    expect(service.chunks.get("job-1")).toEqual([1, { token: "b" }, 3]);
    expect(result).toMatchObject({ status: "COMPLETED", output: [1, { token: "b" }, 3] });
  });

  it("renews the leases of running jobs on each heartbeat", async () => {
    const service = new FakeService();
    let release: () => void = () => undefined;
    const { loop, done } = loopOver(service, { handler: value(() => new Promise((r) => (release = () => r("ok")))) });
    service.add(null);
    while (service.requests.filter((r) => r.route === "heartbeat" && (r.body.leases as string[]).includes("lease-1")).length === 0) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const beat = service.requests.find((r) => r.route === "heartbeat" && (r.body.leases as string[]).includes("lease-1"))!;
    expect(beat.body).toMatchObject({ workerId: "w1", state: "busy" });
    release();
    await service.resultsOf(1);
    loop.stop("test");
    await done;
  });
});
