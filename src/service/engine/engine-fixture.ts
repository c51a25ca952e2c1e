// The job engine as its tests drive it, the service's way: over an in-memory store (the store's job side in
// Maps) and a clock the test moves. Shared by the engine's test files (engine*.test.ts), which close the engines
// it made after each test (`afterEach(closeEngines)`).

import { JobEngine, type Clock, type EngineEndpoint, type EngineHooks } from "./index.js";
import type { EndpointRow, JobRow, KeyRow, LogRow, Store, StoreOp, StreamChunkRow, WebhookRow } from "../store/types.js";

/** The store's job side in Maps; `refuse` makes apply fail (nothing applied) with that error code, as a full disk does. */
export class MemoryJobStore implements Store {
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
export class FakeClock implements Clock {
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

export const LEASE_MS = 30_000;
/** The engines made since the last `closeEngines`. */
export const engines: JobEngine[] = [];

export async function closeEngines(): Promise<void> {
  for (const e of engines.splice(0)) await e.close();
}

/** An engine over a fresh store and clock, with endpoint e1 (queue-based, no retries) and its workers w1 and w2. */
export function setup(opts: { endpoint?: Partial<EngineEndpoint>; hooks?: EngineHooks } = {}) {
  const store = new MemoryJobStore();
  const clock = new FakeClock();
  const engine = new JobEngine(store, { leaseMs: LEASE_MS, heartbeatMs: 10_000 }, opts.hooks ?? {}, clock);
  engines.push(engine);
  engine.endpoints.set("e1", { id: "e1", type: "queue", retries: 0, executionTimeoutMs: 600_000, maxConcurrency: 2, functions: [], ...opts.endpoint });
  return { store, clock, engine, w1: engine.register("w1", "e1", 1), w2: engine.register("w2", "e1", 1) };
}
