// Log retention: an endpoint's lines older than the retention age go, and so do its oldest lines beyond its size,
// swept as expired job results are (by the replica serving jobs, on the retention timer).
//
// What an endpoint's lines count is measured in the store once (and again every few minutes where replicas share
// the store, for lines the others wrote), a part at a time, and followed in between from what this replica appended
// and the sweep removed; so a sweep costs one short index read per endpoint when nothing is due, and the lines it
// removes when something is, never a scan of everything kept.

import type { Store } from "../store/types.js";
import { LOG_LINE_OVERHEAD_BYTES, type LogLimits } from "./log-quota.js";

/**
 * How often an endpoint's size is measured again when replicas share the store (the lines other replicas wrote). On a
 * store of one service (SQLite) what this one wrote and removed is all there is: measured once.
 */
const REMEASURE_SHARED_MS = 5 * 60_000;
/**
 * Lines one transaction removes or measures at most: on SQLite it runs on the event loop (about 45 ms for 5,000 lines
 * on 2 busy cores), so the sweep goes in such steps with other work between them.
 */
const BATCH = 5_000;
/** Steps of removal one endpoint gets a sweep: 40,000 lines, twice what an endpoint's default rate writes in 10 s. */
const MAX_STEPS = 8;

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Size {
  /** What the endpoint's lines counted when measured, plus appended, less removed since. */
  bytes: number;
  measuredAt: number;
}

export class LogRetention {
  private readonly sizes = new Map<string, Size>();
  private sweeping = false;

  constructor(
    private readonly store: Pick<Store, "logBytes" | "pruneLogs" | "handOffJobs">,
    private readonly limits: Pick<LogLimits, "retentionMs" | "endpointMaxBytes">,
    private readonly onRemoved: (reason: "age" | "size", lines: number) => void = () => undefined,
  ) {}

  /** Lines this replica wrote (their size as the byte limits count it). */
  appended(endpointId: string, bytes: number): void {
    const size = this.sizes.get(endpointId);
    if (size) size.bytes += bytes;
  }

  forget(endpointId: string): void {
    this.sizes.delete(endpointId);
  }

  /** Remove what is past the age or beyond the size of each endpoint; lines removed. One sweep at a time. */
  async sweep(endpointIds: Iterable<string>, now: number): Promise<number> {
    if (this.sweeping) return 0;
    this.sweeping = true;
    try {
      return await this.sweepAll([...endpointIds], now);
    } finally {
      this.sweeping = false;
    }
  }

  private async sweepAll(endpointIds: string[], now: number): Promise<number> {
    const { pruneLogs } = this.store;
    if (!this.store.logBytes || !pruneLogs) return 0;
    // Replicas share the store when it takes hand-offs (PostgreSQL).
    const remeasureMs = this.store.handOffJobs ? REMEASURE_SHARED_MS : Infinity;
    let removed = 0;
    for (const endpointId of endpointIds) {
      let size = this.sizes.get(endpointId);
      if (!size || now - size.measuredAt >= remeasureMs) {
        size = { bytes: await this.measure(endpointId), measuredAt: now };
        this.sizes.set(endpointId, size);
      }
      for (let step = 0; step < MAX_STEPS; step++) {
        const result = await pruneLogs.call(this.store, {
          endpointId,
          before: now - this.limits.retentionMs,
          dropBytes: Math.max(0, size.bytes - this.limits.endpointMaxBytes),
          lineOverheadBytes: LOG_LINE_OVERHEAD_BYTES,
          limit: BATCH,
        });
        size.bytes = Math.max(0, size.bytes - result.removedBytes);
        if (result.removedByAge > 0) this.onRemoved("age", result.removedByAge);
        if (result.removedBySize > 0) this.onRemoved("size", result.removedBySize);
        removed += result.removedByAge + result.removedBySize;
        if (result.removedByAge + result.removedBySize < BATCH) break;
        await turn();
      }
    }
    return removed;
  }

  /** What an endpoint's lines count now, read a part at a time. */
  private async measure(endpointId: string): Promise<number> {
    let bytes = 0;
    for (let afterSeq = 0; ; ) {
      const part = await this.store.logBytes!({ endpointId, lineOverheadBytes: LOG_LINE_OVERHEAD_BYTES, afterSeq, limit: BATCH });
      bytes += part.bytes;
      if (part.lastSeq === null || part.lines < BATCH) return bytes;
      afterSeq = part.lastSeq;
      await turn();
    }
  }
}
