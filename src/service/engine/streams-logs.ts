// What a running job streams (chunks, read once each by /stream) and what workers log (kept within their quotas
// unless the store refuses them, followed live by the console, removed by the retention sweep).

import type { JobStatus } from "svc/internal";
import { ATTEMPT_MARK_BYTES, markAttempt } from "./chunk-attempt.js";
import type { LogRow, StoreOp } from "../store/types.js";
import type { LeaseSystem } from "./leases.js";
import { DEFAULT_LOG_LIMITS, droppedCount, DROPPED_STREAM, LogQuota, logLineBytes, SERVICE_WORKER_ID } from "./log-quota.js";
import { LogRetention } from "./log-retention.js";
import { adoptJob, changeJob, findJob, writeJob, type EngineResources } from "./resources.js";
import { isFinal, MAX_CHUNK_BYTES, STREAM_WAIT_MS, type WorkerEntry } from "./types.js";

/** Notices a logs answer adds up at most: a notice a worker every 10 s of a week-long flood is 60,480. */
const MAX_NOTICES_COUNTED = 100_000;

export class StreamsAndLogs {
  private readonly logFollowers = new Map<string, Set<(lines: LogRow[]) => void>>();
  /** Worker log lines the store refused since the start (appendLogs). */
  droppedLogLines = 0;
  private readonly quota: LogQuota;
  private readonly retention: LogRetention;

  constructor(
    private readonly $: EngineResources,
    private readonly leases: LeaseSystem,
  ) {
    const limits = { ...DEFAULT_LOG_LIMITS, ...$.options.logLimits };
    this.quota = new LogQuota(limits, (reason, n) => $.hooks.onLogsDropped?.(reason, n));
    this.retention = new LogRetention($.store, limits, (reason, n) => $.hooks.onLogsRemoved?.(reason, n));
  }

  /** Append stream chunks of a running job; chunks over 1 MB are split. */
  async appendStream(w: WorkerEntry, jobId: string, lease: unknown, chunks: unknown[]): Promise<boolean> {
    const job = this.leases.byLease(lease);
    if (!job || job.row.id !== jobId || job.row.endpointId !== w.endpointId) return false;
    const ops: StoreOp[] = [];
    // A re-run's chunks say which attempt they are (a reader may already hold chunks of the one dropped).
    const attempt = job.row.attempt;
    const limit = attempt > 1 ? MAX_CHUNK_BYTES - ATTEMPT_MARK_BYTES : MAX_CHUNK_BYTES;
    for (const chunk of chunks) {
      for (const piece of splitChunk(chunk, limit)) {
        ops.push({ op: "insertChunk", chunk: { jobId, seq: ++job.lastSeq, data: markAttempt(piece, attempt) } });
      }
    }
    // Its chunks are read by id from the store: an unwritten job goes there with them.
    await writeJob(this.$, job, ops, () => this.$.waiters.notify(jobId));
    return true;
  }

  /** Stream chunks not returned before; waits briefly for new ones while the job runs. */
  async readStream(endpointId: string, id: string): Promise<{ status: JobStatus; chunks: string[] } | undefined> {
    const deadline = this.$.clock.now() + STREAM_WAIT_MS;
    for (;;) {
      const found = await findJob(this.$, endpointId, id);
      if (!found) return undefined;
      const cursor = found.row.streamCursor;
      const chunks = await this.$.store.chunksAfter(id, cursor);
      const left = deadline - this.$.clock.now();
      if (chunks.length > 0 || isFinal(found.row.status) || left <= 0 || this.$.closed) {
        if (chunks.length > 0) {
          const job = adoptJob(this.$, found);
          await changeJob(this.$, job, { streamCursor: chunks[chunks.length - 1]!.seq });
        }
        return { status: found.row.status, chunks: chunks.map((c) => c.data) };
      }
      await this.$.waiters.wait(id, left);
    }
  }

  /**
   * Keep worker log lines, within their quotas (log-quota.ts: lines beyond them are dropped, and a notice says so).
   * Never rejects: lines the store refuses are dropped too (a log is not worth holding a worker back for),
   * counted, and the count is reported with the storage state (/health).
   */
  appendLogs(lines: LogRow[]): Promise<void> {
    if (lines.length === 0) return Promise.resolve();
    const now = this.$.clock.now();
    return this.keep(
      this.quota.admit(
        lines.map((l) => (l.ts > now && l.workerId !== SERVICE_WORKER_ID ? { ...l, ts: now } : l)),
        now,
      ),
    );
  }

  /** Notices of bursts of dropped lines that ended (the engine's tick). */
  flushDropNotices(now: number): void {
    const notices = this.quota.flush(now);
    if (notices.length > 0) void this.keep(notices);
  }

  /** Remove lines past the retention age or beyond their endpoint's size (the retention timer); lines removed. */
  sweepLogs(now: number): Promise<number> {
    return this.retention.sweep(this.$.endpoints.keys(), now);
  }

  forgetEndpoint(endpointId: string): void {
    this.retention.forget(endpointId);
  }

  private keep(lines: LogRow[]): Promise<void> {
    if (lines.length === 0) return Promise.resolve();
    for (const l of lines) this.retention.appended(l.endpointId, logLineBytes(l.text));
    const written = this.$.writer.write(
      lines.map((line) => ({ op: "insertLog", line }) as StoreOp),
      () => {
        const byEndpoint = new Map<string, LogRow[]>();
        for (const l of lines) {
          if (!this.logFollowers.has(l.endpointId)) continue;
          let list = byEndpoint.get(l.endpointId);
          if (!list) byEndpoint.set(l.endpointId, (list = []));
          list.push(l);
        }
        for (const [endpointId, list] of byEndpoint) for (const fn of this.logFollowers.get(endpointId) ?? []) fn(list);
      },
    );
    return written.catch(() => {
      this.droppedLogLines += lines.length;
      this.$.hooks.onLogsDropped?.("storage", lines.length);
    });
  }

  queryLogs(q: { endpointId: string; jobId?: string; since?: number; afterId?: number; limit: number }) {
    return this.$.store.logs(q);
  }

  /** Lines the quotas dropped, as the notices among the lines `q` selects tell (all of them, not a page). */
  async droppedLines(q: { endpointId: string; jobId?: string; since?: number }): Promise<number> {
    const texts = (await this.$.store.droppedLogNotices?.({ ...q, limit: MAX_NOTICES_COUNTED })) ?? [];
    return texts.reduce((sum, text) => sum + (droppedCount({ stream: DROPPED_STREAM, text }) ?? 0), 0);
  }

  followLogs(endpointId: string, fn: (lines: LogRow[]) => void): () => void {
    let set = this.logFollowers.get(endpointId);
    if (!set) this.logFollowers.set(endpointId, (set = new Set()));
    set.add(fn);
    return () => {
      set!.delete(fn);
      if (set!.size === 0) this.logFollowers.delete(endpointId);
    };
  }
}

/**
 * Split a stream chunk whose JSON is over 1 MB: a string output is cut into strings, an array output into
 * arrays, an object's largest string or array field likewise. Returns JSON texts of {output, metrics?}.
 */
export function splitChunk(chunk: unknown, limit = MAX_CHUNK_BYTES): string[] {
  const normalized =
    typeof chunk === "object" && chunk !== null && !Array.isArray(chunk) && "output" in chunk
      ? (chunk as { output: unknown; metrics?: unknown })
      : { output: chunk };
  const text = JSON.stringify(normalized);
  if (Buffer.byteLength(text) <= limit) return [text];
  const { output, metrics } = normalized;
  const wrap = (o: unknown, first: boolean) => JSON.stringify(first && metrics !== undefined ? { output: o, metrics } : { output: o });
  const budget = Math.max(1024, limit - 4096 - (metrics === undefined ? 0 : Buffer.byteLength(JSON.stringify(metrics))));
  if (typeof output === "string") {
    const pieces: string[] = [];
    // Cut by characters so that each piece's JSON (escapes included, at most 6 bytes a char) fits.
    const step = Math.max(1, Math.floor(budget / 6));
    for (let i = 0; i < output.length; i += step) pieces.push(wrap(output.slice(i, i + step), i === 0));
    return pieces;
  }
  if (Array.isArray(output)) {
    const pieces: string[] = [];
    let current: unknown[] = [];
    let size = 2;
    for (const item of output) {
      const itemSize = Buffer.byteLength(JSON.stringify(item) ?? "null") + 1;
      if (current.length > 0 && size + itemSize > budget) {
        pieces.push(wrap(current, pieces.length === 0));
        current = [];
        size = 2;
      }
      current.push(item);
      size += itemSize;
    }
    if (current.length > 0) pieces.push(wrap(current, pieces.length === 0));
    return pieces;
  }
  if (typeof output === "object" && output !== null) {
    // Split the largest string/array field; other fields ride on the first piece.
    const entries = Object.entries(output as Record<string, unknown>);
    const largest = entries
      .filter(([, v]) => typeof v === "string" || Array.isArray(v))
      .sort((a, b) => JSON.stringify(b[1]).length - JSON.stringify(a[1]).length)[0];
    if (largest) {
      const [key, value] = largest;
      const rest = Object.fromEntries(entries.filter(([k]) => k !== key));
      return splitChunk({ output: value }, budget).map((piece, i) => {
        const part = (JSON.parse(piece) as { output: unknown }).output;
        return wrap(i === 0 ? { ...rest, [key]: part } : { [key]: part }, i === 0);
      });
    }
  }
  // Not splittable (a huge number?): keep it whole rather than corrupt it.
  return [text];
}
