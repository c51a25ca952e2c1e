// Submissions on every replica. Replicas on one database (PostgreSQL) pass job traffic to the one replica that
// serves jobs, except `/run`: a replica that does not serve jobs writes the job itself, marked as handed off (its
// 200 still means committed), then tells the serving replica (the change feed's "handoff" notice, sent by the
// onHandedOff hook). The serving replica adopts the marked jobs into its queue on the notice (and every
// ADOPT_EVERY_MS after it while more may come or adoptions find jobs), every few seconds
// (a notice is lost while a listener reconnects), when it takes over, and before a cancel or purge that may
// concern a job not adopted yet.
//
// Adoption is a conditional claim, not a read: the store clears the marks and returns the marked jobs still
// queued, so each comes back once whatever the notices' order. It is part of one of this replica's batches
// (GroupCommit.adoptWithNextBatch: no commit of its own, and ordered with this replica's writes): a job it gets
// back as queued has no final state committed by this replica, so one this replica already holds (found by a
// takeover's load, or by a cancel before its adoption) is still in memory then, and is skipped; one that ran and
// left memory cannot come back queued and run again.

import { Refusal } from "../../errors.js";
import type { JobRow } from "../store/types.js";
import { newJobRow } from "./jobs.js";
import type { QueueSystem } from "./queue.js";
import type { Clock } from "./clock.js";
import type { EngineResources } from "./resources.js";
import type { LiveJob, SubmitInput } from "./types.js";

/** Adoptions begin at most this often (each takes every job handed off since the one before). */
export const ADOPT_EVERY_MS = 10;
/**
 * Under a steady stream of submissions (a write ended within STREAM_GAP_MS), a follower's next write waits up to
 * HANDOFF_LINGER_MS for the callers of the cycle before to come back: a write is a statement and a commit (a WAL
 * flush) and a wake-up of this process and the database's, whether it carries one job or twenty, and the database's
 * time per statement is mostly that fixed part (0.2 ms of its CPU for one job, 0.28 ms for five). Clients that wait
 * for each answer before sending again come back together; writing at the first of them split five clients into
 * writes of 1 to 3 jobs. A lone submission never waits.
 *
 * On a loaded machine the clients come back 2 to 6 ms after their answers (the answer, their own turn on a core,
 * the next request): with 2 ms for both bounds, five clients of a follower made writes of 4.1 jobs on average, a
 * fifth of them carrying one or two (the first client back found the stream ended and was written alone); with
 * these, 4.9 (measured: docs/scale-out.md).
 */
export const HANDOFF_LINGER_MS = 4;
export const STREAM_GAP_MS = 6;
/** The most callers a write waits for: more than this make a write worth its commit without waiting. */
const COMPANY_MAX = 8;
/**
 * A follower announces its handed-off jobs at most this often. A notice is a transaction of its own, and it wakes
 * every replica's listener and its database connection. Under a steady stream the replica serving jobs goes on
 * adopting without notices (FOLLOW_UP_MS below), so what a notice costs is paid for nothing there: at 25 ms, two
 * followers sent 80 a second.
 */
export const ANNOUNCE_EVERY_MS = 80;
const FOLLOW_UP_MS = ANNOUNCE_EVERY_MS + ADOPT_EVERY_MS;
/** The marks' table is vacuumed after this many adoptions (~5 pages of dead rows), at most every VACUUM_EVERY_MS. */
const VACUUM_AFTER_ADOPTED = 1_000;
const VACUUM_EVERY_MS = 2_000;

interface Pending {
  row: JobRow;
  resolve(row: JobRow): void;
  reject(err: unknown): void;
}

export class HandoffSystem {
  /** Jobs to hand off with the next insert (one statement per tick, one at a time, as the group commit does). */
  private pending: Pending[] = [];
  private writing = false;
  /** Callers of the last cycle (the write just answered and those who came during it): the company to wait for. */
  private company = 0;
  private lastWriteEndedAt = -Infinity;
  /** Ends a write's wait for company, once enough have come. */
  private companyCame?: () => void;
  /** How many jobs the last adopting batch took. */
  private lastAdopted = 0;
  /**
   * Followers' notices come at each of their commits, hundreds a second under load; an adoption costs the database
   * about as much (planning and running its statement) whether it takes one job or twenty, so adoptions begin at
   * most every ADOPT_EVERY_MS, each taking what came meanwhile.
   */
  private readonly adoptions: Paced<number>;
  /**
   * The replica serving jobs is told (the onHandedOff hook: a notice on the change feed) at most every
   * ANNOUNCE_EVERY_MS: a notice is a transaction of its own that wakes every replica (at 5 ms, two followers under
   * load sent as many notices as inserts). What a follower commits between two of its notices is taken by the
   * adoptions the serving replica goes on making after the first (FOLLOW_UP_MS), so a job waits about
   * ADOPT_EVERY_MS, not ANNOUNCE_EVERY_MS.
   */
  private readonly announcements: Paced<void>;
  /** Adopt again after each adoption until then (a notice moves it on), or while adoptions find jobs. */
  private followUntil = -Infinity;
  /** Jobs adopted since the marks' table was last vacuumed, and when that was (the engine's clock). */
  private adoptedSinceVacuum = 0;
  private lastVacuumAt = -Infinity;
  private vacuuming = false;
  /** Only the replica serving jobs adopts (enable()); on the others a handed-off job must stay marked. */
  private enabled = false;

  constructor(
    private readonly $: EngineResources,
    private readonly queue: QueueSystem,
  ) {
    $.writer.onAdopted((rows) => this.take(rows));
    this.adoptions = new Paced($.clock, ADOPT_EVERY_MS, async () => {
      // Shut down meanwhile: the marks stay, for whichever replica serves jobs next.
      if (this.$.closed) return 0;
      await this.$.writer.adoptWithNextBatch();
      // Read before any later batch can commit (that takes I/O): the count of the batch just awaited.
      const adopted = this.lastAdopted;
      if (adopted > 0 || this.$.clock.now() < this.followUntil) this.followUp();
      this.vacuumWhenDue(adopted);
      return adopted;
    });
    this.announcements = new Paced($.clock, ANNOUNCE_EVERY_MS, async () => this.$.hooks.onHandedOff?.());
  }

  /** Whether this store can take jobs from replicas that do not serve them. */
  get supported(): boolean {
    return this.$.store.handOffJobs !== undefined && this.$.store.applyAndAdopt !== undefined;
  }

  /** This replica serves jobs (from its start, or since it took over): it adopts from now on. */
  enable(): void {
    this.enabled = true;
  }

  /** Write a `/run` job for the replica that serves jobs; resolves once committed. */
  handOff(endpointId: string, s: SubmitInput, from: string): Promise<JobRow> {
    if (this.$.closed) return Promise.reject(new Refusal("unavailable", "The service is shutting down"));
    const row = newJobRow(this.$.endpoints.get(endpointId), endpointId, s, this.$.clock.now());
    return new Promise<JobRow>((resolve, reject) => {
      this.pending.push({ row, resolve, reject });
      if (this.pending.length === 1 && !this.writing) setImmediate(() => void this.write(from));
      else if (this.companyCame && this.pending.length >= this.company) this.companyCame();
    });
  }

  private async write(from: string): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    try {
      while (this.pending.length > 0) {
        const streaming = this.$.clock.now() - this.lastWriteEndedAt <= STREAM_GAP_MS;
        if (streaming && this.pending.length < this.company) await this.waitForCompany();
        const batch = this.pending;
        this.pending = [];
        try {
          await this.$.store.handOffJobs!(
            batch.map((p) => p.row),
            from,
          );
          void this.announcements.ask();
          for (const p of batch) p.resolve(p.row);
        } catch (err) {
          // Not committed: every caller of the batch is refused (a storage fault becomes a 503 at the route).
          for (const p of batch) p.reject(err);
        }
        this.company = Math.min(COMPANY_MAX, batch.length + this.pending.length);
        this.lastWriteEndedAt = this.$.clock.now();
      }
    } finally {
      this.writing = false;
    }
  }

  /** Resolves once `company` submissions are pending, or after HANDOFF_LINGER_MS. */
  private waitForCompany(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        this.$.clock.clearTimeout(timer);
        this.companyCame = undefined;
        resolve();
      };
      const timer = this.$.clock.setTimeout(done, HANDOFF_LINGER_MS);
      this.companyCame = done;
    });
  }

  /**
   * Take the handed-off jobs into this replica's queue, with the next batch; resolves with how many that batch
   * adopted.
   */
  adopt(options: { announced?: boolean } = {}): Promise<number> {
    if (!this.supported || !this.enabled || this.$.closed) return Promise.resolve(0);
    if (options.announced) this.followUntil = Math.max(this.followUntil, this.$.clock.now() + FOLLOW_UP_MS);
    return this.adoptions.ask();
  }

  /**
   * One more adoption, ADOPT_EVERY_MS after this one began: under a steady stream of hand-offs the followers'
   * notices are paced, and this is what takes the jobs committed in between.
   */
  private followUp(): void {
    if (this.$.closed || !this.enabled) return;
    this.adoptions.ask().catch(() => {
      // The storage failed this batch: the marks stay in the database, and the next notice or the periodic rescan
      // (whose caller reports the outage) adopts them.
    });
  }

  /**
   * Vacuum the marks' table once VACUUM_AFTER_ADOPTED jobs were adopted since the last time, at most every
   * VACUUM_EVERY_MS. An adoption reads the whole table, dead rows included: left to autovacuum (once a minute),
   * a minute of a steady stream made each adoption ~0.2 ms slower at 3 000 jobs/s (measured: docs/scale-out.md).
   */
  private vacuumWhenDue(adopted: number): void {
    this.adoptedSinceVacuum += adopted;
    const now = this.$.clock.now();
    const vacuum = this.$.store.vacuumHandoffs;
    if (!vacuum || this.vacuuming || this.adoptedSinceVacuum < VACUUM_AFTER_ADOPTED || now - this.lastVacuumAt < VACUUM_EVERY_MS) return;
    this.vacuuming = true;
    this.adoptedSinceVacuum = 0;
    this.lastVacuumAt = now;
    vacuum.call(this.$.store).then(
      () => (this.vacuuming = false),
      // Dropped on purpose: it only reclaims space, autovacuum still does it later, and a database that fails
      // shows in the next batch's write, which the engine reports (onStorage).
      () => (this.vacuuming = false),
    );
  }

  /** The jobs a batch adopted, right after it committed. */
  private take(rows: JobRow[]): void {
    let adopted = 0;
    for (const row of rows) {
      // In memory already (a takeover's load found it, a cancel or ttl change brought it in): that one is the truth.
      if (this.$.live.has(row.id) || this.$.closed) continue;
      const job: LiveJob = { row, leaseExpiresAt: 0, lastSeq: 0, version: 0 };
      this.$.live.set(row.id, job);
      this.queue.enqueue(job, false);
      adopted++;
    }
    this.lastAdopted = adopted;
  }
}

/**
 * Asks answered by runs that begin at most every `everyMs`: every ask made before a run begins is answered by that
 * run, and one made while a run is under way waits for the next.
 */
class Paced<T> {
  private pending?: Promise<T>;
  private lastBegun = -Infinity;

  constructor(
    private readonly clock: Clock,
    private readonly everyMs: number,
    private readonly run: () => Promise<T>,
  ) {}

  ask(): Promise<T> {
    this.pending ??= new Promise<void>((resolve) => {
      const wait = this.lastBegun + this.everyMs - this.clock.now();
      if (wait > 0) this.clock.setTimeout(resolve, wait);
      else resolve();
    }).then(() => {
      this.pending = undefined;
      this.lastBegun = this.clock.now();
      return this.run();
    });
    return this.pending;
  }
}
