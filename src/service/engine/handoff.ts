// Submissions on every replica. Replicas on one database (PostgreSQL) pass job traffic to the one replica that
// serves jobs, except `/run`: a replica that does not serve jobs writes the job itself, marked as handed off (its
// 200 still means committed), and the database tells the serving replica at that commit (the change feed's
// "handoff" notice). The serving replica adopts the marked jobs into its queue on the notice, every few seconds
// (a notice is lost while a listener reconnects) and when it takes over.
//
// Adoption is a conditional claim, not a read: the store clears the marks and returns the marked jobs still
// queued, so each comes back once whatever the notices' order. It runs between two of this replica's batches
// (GroupCommit.inOrder): a job it gets back as queued has no final state committed by this replica, so one this
// replica already holds (found by a takeover's load, or by a cancel before its adoption) is still in memory then,
// and is skipped; one that ran and left memory cannot come back queued and run again.

import { HttpProblem } from "../http.js";
import type { JobRow } from "../store/types.js";
import { newJobRow } from "./jobs.js";
import type { QueueSystem } from "./queue.js";
import type { EngineResources } from "./resources.js";
import type { LiveJob, SubmitInput } from "./types.js";

interface Pending {
  row: JobRow;
  resolve(row: JobRow): void;
  reject(err: unknown): void;
}

export class HandoffSystem {
  /** Jobs to hand off with the next insert (one statement per tick, one at a time, as the group commit does). */
  private pending: Pending[] = [];
  private writing = false;
  /** The adoption running, and whether another was asked for meanwhile (its read may predate the ask). */
  private adopting?: Promise<number>;
  private next?: { promise: Promise<number>; resolve(n: number): void; reject(err: unknown): void };
  /** Only the replica serving jobs adopts (enable()); on the others a handed-off job must stay marked. */
  private enabled = false;

  constructor(
    private readonly $: EngineResources,
    private readonly queue: QueueSystem,
  ) {}

  /** Whether this store can take jobs from replicas that do not serve them. */
  get supported(): boolean {
    return this.$.store.handOffJobs !== undefined && this.$.store.adoptHandedOffJobs !== undefined;
  }

  /** This replica serves jobs (from its start, or since it took over): it adopts from now on. */
  enable(): void {
    this.enabled = true;
  }

  /** Write a `/run` job for the replica that serves jobs; resolves once committed. */
  handOff(endpointId: string, s: SubmitInput, from: string): Promise<JobRow> {
    if (this.$.closed) return Promise.reject(new HttpProblem(503, "The service is shutting down"));
    const row = newJobRow(this.$.endpoints.get(endpointId), endpointId, s, this.$.clock.now());
    return new Promise<JobRow>((resolve, reject) => {
      this.pending.push({ row, resolve, reject });
      if (this.pending.length === 1 && !this.writing) setImmediate(() => void this.write(from));
    });
  }

  private async write(from: string): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    try {
      while (this.pending.length > 0) {
        const batch = this.pending;
        this.pending = [];
        try {
          await this.$.store.handOffJobs!(batch.map((p) => p.row), from);
          for (const p of batch) p.resolve(p.row);
        } catch (err) {
          // Not committed: every caller of the batch is refused (a storage fault becomes a 503 at the route).
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.writing = false;
    }
  }

  /**
   * Take the handed-off jobs into this replica's queue. Resolves with how many, once an adoption that started
   * after this call has run (one asked for while another runs goes after it).
   */
  adopt(): Promise<number> {
    if (!this.supported || !this.enabled || this.$.closed) return Promise.resolve(0);
    if (!this.adopting) return this.start();
    if (!this.next) {
      let resolve!: (n: number) => void;
      let reject!: (err: unknown) => void;
      const promise = new Promise<number>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      this.next = { promise, resolve, reject };
    }
    return this.next.promise;
  }

  private start(): Promise<number> {
    const run = this.$.writer.inOrder(() => this.adoptOnce());
    this.adopting = run;
    const after = () => {
      this.adopting = undefined;
      const next = this.next;
      this.next = undefined;
      if (next) this.start().then(next.resolve, next.reject);
    };
    run.then(after, after);
    return run;
  }

  private async adoptOnce(): Promise<number> {
    const rows = await this.$.store.adoptHandedOffJobs!();
    let adopted = 0;
    for (const row of rows) {
      // In memory already (a takeover's load found it, a cancel or ttl change brought it in): that one is the truth.
      if (this.$.live.has(row.id) || this.$.closed) continue;
      const job: LiveJob = { row, leaseExpiresAt: 0, lastSeq: 0, version: 0 };
      this.$.live.set(row.id, job);
      this.queue.enqueue(job, false);
      adopted++;
    }
    return adopted;
  }
}
