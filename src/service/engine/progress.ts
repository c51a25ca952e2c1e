// Progress a running job's handler reports (ctx.progress): the latest value replaces the one before, is kept
// on the job's row (it survives a restart as any job state does), and is what /status shows as `output` while
// the job is IN_PROGRESS. Only the attempt that holds the current lease may report.

import type { LeaseSystem } from "./leases.js";
import { changeJob, queueWebhook, type EngineResources } from "./resources.js";
import type { WorkerEntry } from "./types.js";

/** The largest progress value, as JSON text in UTF-8 (the SDK refuses larger ones before they are sent). */
export { MAX_PROGRESS_BYTES } from "../../wire/worker.js";

export class ProgressSystem {
  constructor(
    private readonly $: EngineResources,
    private readonly leases: LeaseSystem,
  ) {}

  /**
   * Record `json` (the value's JSON text) as the job's progress. False when the lease is not current (the attempt
   * no longer counts); resolves once committed, after which the hook hears of it.
   */
  async report(w: WorkerEntry, jobId: unknown, lease: unknown, json: string): Promise<boolean> {
    w.lastSeen = this.$.clock.now();
    const job = this.leases.byLease(lease);
    if (!job || job.row.id !== jobId || job.row.endpointId !== w.endpointId) return false;
    await changeJob(this.$, job, { progress: json });
    this.$.hooks.onProgress?.(job.row);
    // A `progress` webhook (only where the job's or its endpoint's filter asks for it) follows the committed value.
    queueWebhook(this.$, job.row, "progress", JSON.parse(json));
    return true;
  }
}
