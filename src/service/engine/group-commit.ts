// Group commit: every change appends store ops to the current batch; one transaction per tick (setImmediate)
// writes the batch, then the callers waiting on it answer. A response that acknowledges a change is sent only
// after its batch committed. The writer also knows whether the store takes writes (the storage state).

import type { JobRow, Store, StoreOp } from "../store/types.js";
import { storageCause, StorageUnavailable, type StorageState } from "../store/faults.js";
import type { Clock } from "./clock.js";
import type { CounterKey, EngineHooks } from "./types.js";

/** Writes must go through this long after a storage fault before the store counts as ok again. */
export const STORAGE_RECOVERED_MS = 2000;

export class GroupCommit {
  private batch: StoreOp[] = [];
  private batchPromise?: Promise<void>;
  private batchSettle?: { resolve(): void; reject(err: unknown): void };
  private afterCommit: Array<() => void> = [];
  private flushScheduled = false;
  /** Batches commit strictly in order, even with a store whose apply is truly asynchronous. */
  private lastFlush: Promise<void> = Promise.resolve();
  private storage: StorageState = { ok: true };
  private storageRecovering?: number;
  /** Endpoint counters changed since the last batch: written once per batch, as one row update each. */
  private readonly counterDeltas = new Map<string, Record<CounterKey, number>>();
  /** Run at the start of every flush, before the batch is cut: what they write joins it. */
  private readonly preparers: Array<() => void> = [];
  /** The next batch adopts handed-off jobs too (adoptWithNextBatch). */
  private adoptNext = false;
  private adopted?: (rows: JobRow[]) => void;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly hooks: Pick<EngineHooks, "onStorage" | "onCommit">,
  ) {}

  /** Append ops to the current batch; resolves when the batch is committed. */
  write(ops: StoreOp[], after?: () => void): Promise<void> {
    for (const o of ops) this.batch.push(o);
    if (after) this.afterCommit.push(after);
    // One promise per batch, shared by every caller in it (a busy tick has thousands).
    if (!this.batchPromise) {
      this.batchPromise = new Promise<void>((resolve, reject) => {
        this.batchSettle = { resolve, reject };
      });
      this.batchPromise.catch(() => undefined /* every writer awaits it: only keeps a batch nobody waits on from going unhandled */);
    }
    this.scheduleFlush();
    return this.batchPromise;
  }

  /** The batch being filled, if any change is in it. */
  get current(): Promise<void> | undefined {
    return this.batchPromise;
  }

  /** Resolves once every change written so far has committed (or failed): a barrier for reads that must see them. */
  settled(): Promise<void> {
    return (this.batchPromise ?? this.lastFlush).then(
      () => undefined,
      // The writers hear of a failed batch; a barrier only orders.
      () => undefined,
    );
  }

  /**
   * Adopt the jobs other replicas handed off with the next batch (engine/handoff.ts), in its transaction; resolves
   * once that batch committed and `onAdopted` has queued them. In a batch, the adoption is ordered with this
   * replica's own writes: a job it gets back as queued has no final state committed here.
   */
  adoptWithNextBatch(): Promise<void> {
    this.adoptNext = true;
    return this.write([]);
  }

  /** Who takes the adopted jobs: called right after their batch committed, before anything else runs. */
  onAdopted(fn: (rows: JobRow[]) => void): void {
    this.adopted = fn;
  }

  /** Make sure a flush runs this tick (its preparers may have work even when the batch is empty). */
  scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.lastFlush = this.lastFlush.then(() => this.flush());
    });
  }

  beforeFlush(fn: () => void): void {
    this.preparers.push(fn);
  }

  /** Count one completed/failed/retried job of an endpoint into the next batch. */
  addCounter(endpointId: string, key: CounterKey): void {
    let d = this.counterDeltas.get(endpointId);
    if (!d) this.counterDeltas.set(endpointId, (d = { completed: 0, failed: 0, retried: 0 }));
    d[key]++;
  }

  /** The endpoint is gone: its pending counter changes with it. */
  dropCounters(endpointId: string): void {
    this.counterDeltas.delete(endpointId);
  }

  /** The store's state as last seen by a batch. */
  state(): StorageState {
    return { ...this.storage };
  }

  /** Say the store is ok again once writes have gone through for STORAGE_RECOVERED_MS (called periodically). */
  checkRecovered(now: number): void {
    if (!this.storage.ok && this.storageRecovering !== undefined && now - this.storageRecovering >= STORAGE_RECOVERED_MS) {
      this.storage = { ok: true };
      this.storageRecovering = undefined;
      this.hooks.onStorage?.(this.storage);
    }
  }

  private async flush(): Promise<void> {
    // Takers first: what they take joins this batch (a job submitted and taken in one tick is one insert).
    for (const fn of this.preparers) fn();
    this.flushScheduled = false;
    this.collectCounters();
    const ops = this.batch;
    const settle = this.batchSettle;
    const after = this.afterCommit;
    this.batch = [];
    this.batchPromise = undefined;
    this.batchSettle = undefined;
    this.afterCommit = [];
    const adopting = this.adoptNext && this.store.applyAndAdopt !== undefined;
    this.adoptNext = false;
    let adopted: JobRow[] | undefined;
    const started = performance.now();
    try {
      if (adopting) adopted = await this.store.applyAndAdopt!(ops);
      else await this.store.apply(ops);
      this.hooks.onCommit?.((performance.now() - started) / 1000);
    } catch (err) {
      const cause = storageCause(err);
      if (cause === undefined) {
        settle?.reject(err);
        return;
      }
      // A condition that clears (full disk, read-only, I/O error, database away): the callers restore what they
      // changed in memory and answer 503; said once, not a stack per request.
      this.storageRecovering = undefined;
      if (this.storage.ok) {
        this.storage = { ok: false, cause, message: err instanceof Error ? err.message : String(err), since: this.clock.now() };
        this.hooks.onStorage?.(this.storage);
      }
      settle?.reject(new StorageUnavailable(cause, err));
      return;
    }
    // Back to ok only once writes have gone through for a while: a nearly full disk takes small batches and
    // refuses large ones, and its state must not flap (nor the log repeat) with every batch.
    if (!this.storage.ok) this.storageRecovering ??= this.clock.now();
    if (adopted) this.adopted?.(adopted);
    for (const fn of after) {
      try {
        fn();
      } catch {
        // a notification callback must never break the commit path
      }
    }
    settle?.resolve();
  }

  private collectCounters(): void {
    for (const [endpointId, d] of this.counterDeltas) {
      this.batch.push({ op: "addCounters", endpointId, ...d });
    }
    this.counterDeltas.clear();
  }
}
