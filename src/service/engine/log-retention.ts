// Log retention: an endpoint's lines older than the retention age go, and so do its oldest lines beyond its size,
// swept as expired job results are (by the replica serving jobs, on the retention timer).
//
// What an endpoint's lines count is measured in the store once (and again every REMEASURE_MS, for lines other
// replicas wrote), and followed in between from what this replica appended and the sweep removed; so a sweep costs
// one short index read per endpoint when nothing is due, and the lines it removes when something is, never a
// scan of everything kept.

import type { Store } from "../store/types.js";
import { LOG_LINE_OVERHEAD_BYTES, type LogLimits } from "./log-quota.js";

/** How often an endpoint's size is measured again in the store (other replicas' lines, lines the sweep missed). */
const REMEASURE_MS = 5 * 60_000;
/** Lines one endpoint's sweep removes at most (one transaction: bounded, so that it never stalls the store long). */
const PRUNE_BATCH = 20_000;

interface Size {
  /** What the endpoint's lines counted when measured, plus appended, less removed since. */
  bytes: number;
  measuredAt: number;
}

export class LogRetention {
  private readonly sizes = new Map<string, Size>();
  private sweeping = false;

  constructor(
    private readonly store: Pick<Store, "logBytes" | "pruneLogs">,
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
    const { logBytes, pruneLogs } = this.store;
    if (!logBytes || !pruneLogs) return 0;
    let removed = 0;
    for (const endpointId of endpointIds) {
      let size = this.sizes.get(endpointId);
      if (!size || now - size.measuredAt >= REMEASURE_MS) {
        size = { bytes: await logBytes.call(this.store, endpointId, LOG_LINE_OVERHEAD_BYTES), measuredAt: now };
        this.sizes.set(endpointId, size);
      }
      const dropBytes = Math.max(0, size.bytes - this.limits.endpointMaxBytes);
      const result = await pruneLogs.call(this.store, {
        endpointId,
        before: now - this.limits.retentionMs,
        dropBytes,
        lineOverheadBytes: LOG_LINE_OVERHEAD_BYTES,
        limit: PRUNE_BATCH,
      });
      size.bytes = Math.max(0, size.bytes - result.removedBytes);
      if (result.removedByAge > 0) this.onRemoved("age", result.removedByAge);
      if (result.removedBySize > 0) this.onRemoved("size", result.removedBySize);
      removed += result.removedByAge + result.removedBySize;
    }
    return removed;
  }
}
