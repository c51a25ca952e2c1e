// Quotas on what workers log. A worker's output is the one write a tenant makes at the speed of its own loop, with
// no request to refuse: a handler printing 50 MB would otherwise put all of it into the store in a second or two,
// and a full disk refuses every tenant's writes. So each line passes token buckets before anything is written (per
// worker and per endpoint, lines and bytes), a line longer than the limit is cut and says so, and lines beyond the
// buckets are dropped. The drop itself is logged: one `[svc] N log lines dropped: <which limit>` line per burst,
// written with the worker's id so that `svc logs` and the console show it where the lines went missing.
//
// Pure but for the clock the caller passes in; memory is bounded by the workers and endpoints logging right now
// (a bucket that has refilled is forgotten: a new one starts full, which is the same).

import { DROPPED_LOG_STREAM, type LogRow } from "../store/types.js";

export interface LogLimits {
  /** Longest line kept, in UTF-8 bytes; a longer one is cut and says so. */
  maxLineBytes: number;
  /** Each worker's sustained rate: lines and bytes a second. */
  workerLinesPerS: number;
  workerBytesPerS: number;
  /** Each endpoint's, all its workers together. */
  endpointLinesPerS: number;
  endpointBytesPerS: number;
  /** Each bucket holds this many seconds of its rate: the burst a worker may print at once. */
  burstS: number;
  /** Lines older than this are deleted by the retention sweep. */
  retentionMs: number;
  /** An endpoint's lines beyond its newest this many bytes are deleted by the sweep. */
  endpointMaxBytes: number;
}

/**
 * Chosen so that a normal endpoint never meets them and a flood always does (docs/security.md, "Log quotas"): a busy
 * handler logging a few lines a job at hundreds of jobs a second stays under 1,000 lines/s; a model load printing
 * thousands of lines at start fits in the 10 s burst; a week of a line a second is about 60 MB of a 256 MiB
 * endpoint. A flood keeps at most the burst plus the rate (a few MiB a second) and never more than the endpoint's
 * size on disk.
 */
export const DEFAULT_LOG_LIMITS: LogLimits = {
  maxLineBytes: 64 * 1024,
  workerLinesPerS: 1_000,
  workerBytesPerS: 1024 * 1024,
  endpointLinesPerS: 2_000,
  endpointBytesPerS: 2 * 1024 * 1024,
  burstS: 10,
  retentionMs: 7 * 24 * 3600_000,
  endpointMaxBytes: 256 * 1024 * 1024,
};

/**
 * What a line costs against the byte limits and the endpoint's size: its text's UTF-8 bytes and this much more, about
 * what its row and index entries take in the store. So a flood of empty lines is not free.
 */
export const LOG_LINE_OVERHEAD_BYTES = 100;

/** The stream of the service's notice that lines were dropped (never a worker's own: stdout, stderr, log). */
export const DROPPED_STREAM = DROPPED_LOG_STREAM;

/** Lines written by the service itself under this worker id pass no quota: they are the service's, bounded by events. */
export const SERVICE_WORKER_ID = "svc";

export type DropReason = "worker_lines" | "worker_bytes" | "endpoint_lines" | "endpoint_bytes";

/** After this long without a dropped line a burst has ended: its notice is written. */
const BURST_QUIET_MS = 1_000;
/** A burst that goes on is told of this often, so that a never-ending flood is still visible. */
const NOTICE_EVERY_MS = 10_000;

/**
 * A token bucket: `rate` tokens a second, holding at most `capacity`; starts full. Kept in thousandths of a token, so
 * that integer rates over a millisecond clock refill exactly (no drift from adding fractions).
 */
export class TokenBucket {
  private milli: number;
  private at: number;

  constructor(
    readonly rate: number,
    readonly capacity: number,
    now: number,
  ) {
    this.milli = capacity * 1000;
    this.at = now;
  }

  /** The tokens now (refilled for the time since the last look). */
  available(now: number): number {
    if (now > this.at) {
      this.milli = Math.min(this.capacity * 1000, this.milli + (now - this.at) * this.rate);
      this.at = now;
    }
    return this.milli / 1000;
  }

  /** Take `n` (at most the capacity: a single cost larger than the bucket could never pass) if there are so many. */
  take(n: number, now: number): boolean {
    const cost = Math.min(n, this.capacity);
    if (this.available(now) < cost) return false;
    this.milli -= cost * 1000;
    return true;
  }

  /** Whether it has refilled (forgetting it changes nothing). */
  full(now: number): boolean {
    return this.available(now) >= this.capacity;
  }
}

interface Buckets {
  lines: TokenBucket;
  bytes: TokenBucket;
}

interface PendingDrops {
  endpointId: string;
  workerId: string;
  /** The job of the first dropped line, so that `svc logs --job` shows the notice too. */
  jobId: string | null;
  counts: Partial<Record<DropReason, number>>;
  first: number;
  last: number;
}

/** A line's size against the byte limits (LOG_LINE_OVERHEAD_BYTES). */
export function logLineBytes(text: string): number {
  return Buffer.byteLength(text) + LOG_LINE_OVERHEAD_BYTES;
}

/**
 * `text` cut to at most `maxBytes` UTF-8 bytes (never inside a character), saying so at its end; as it is when it
 * fits. Pure.
 */
export function capLine(text: string, maxBytes: number): string {
  // Most lines are short: no encoding for those that cannot be over (a UTF-16 unit is at most 3 UTF-8 bytes).
  if (text.length * 3 <= maxBytes) return text;
  const length = Buffer.byteLength(text);
  if (length <= maxBytes) return text;
  // Encode no more than the part kept (a line may be megabytes): maxBytes characters are at least maxBytes bytes.
  const bytes = Buffer.from(text.slice(0, maxBytes + 1));
  let cut = maxBytes;
  while (cut > 0 && (bytes[cut]! & 0xc0) === 0x80) cut--;
  return `${bytes.toString("utf8", 0, cut)} [svc: line cut at ${cut} of ${length} bytes]`;
}

/** How many lines a drop notice says were dropped; undefined for any other line. Pure. */
export function droppedCount(line: { stream: string; text: string }): number | undefined {
  if (line.stream !== DROPPED_STREAM) return undefined;
  const match = /^\[svc\] (\d+) log lines? dropped/.exec(line.text);
  return match ? Number(match[1]) : undefined;
}

/** The limit a reason names, as the notice writes it (with the setting that changes it). */
export function describeLimit(reason: DropReason, limits: LogLimits): string {
  switch (reason) {
    case "worker_lines":
      return `the worker's ${limits.workerLinesPerS} lines/s (SVC_LOG_WORKER_LINES_PER_S)`;
    case "worker_bytes":
      return `the worker's ${formatBytes(limits.workerBytesPerS)}/s (SVC_LOG_WORKER_BYTES_PER_S)`;
    case "endpoint_lines":
      return `the endpoint's ${limits.endpointLinesPerS} lines/s (SVC_LOG_ENDPOINT_LINES_PER_S)`;
    case "endpoint_bytes":
      return `the endpoint's ${formatBytes(limits.endpointBytesPerS)}/s (SVC_LOG_ENDPOINT_BYTES_PER_S)`;
  }
}

function formatBytes(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

/** The notice of one burst of dropped lines. Pure. */
export function dropNotice(p: PendingDrops, limits: LogLimits, now: number): LogRow {
  const entries = Object.entries(p.counts) as Array<[DropReason, number]>;
  const total = entries.reduce((sum, [, n]) => sum + n, 0);
  const which =
    entries.length === 1
      ? `over ${describeLimit(entries[0]![0], limits)}`
      : entries.map(([reason, n]) => `${n} over ${describeLimit(reason, limits)}`).join(", ");
  return {
    ts: now,
    endpointId: p.endpointId,
    workerId: p.workerId,
    jobId: p.jobId,
    stream: DROPPED_STREAM,
    text: `[svc] ${total} log line${total === 1 ? "" : "s"} dropped: ${which}`,
  };
}

export class LogQuota {
  private readonly workers = new Map<string, Buckets>();
  private readonly endpoints = new Map<string, Buckets>();
  private readonly pending = new Map<string, PendingDrops>();

  constructor(
    readonly limits: LogLimits,
    /** Lines dropped, by reason (metrics). */
    private readonly onDropped: (reason: DropReason, count: number) => void = () => undefined,
  ) {}

  /**
   * The lines to keep, in order: cut to the longest line, those beyond a bucket left out, and a notice of the
   * dropped ones placed before the worker's first line kept once they stopped for BURST_QUIET_MS (or every
   * NOTICE_EVERY_MS while they go on).
   */
  admit(lines: LogRow[], now: number): LogRow[] {
    const kept: LogRow[] = [];
    let dropped: Partial<Record<DropReason, number>> | undefined;
    for (const line of lines) {
      if (line.workerId === SERVICE_WORKER_ID) {
        kept.push(line);
        continue;
      }
      const text = capLine(line.text, this.limits.maxLineBytes);
      const reason = this.take(line.endpointId, line.workerId, logLineBytes(text), now);
      const pending = this.pending.get(line.workerId);
      if (reason === undefined) {
        // Lines a refilled bucket lets through in the middle of a flood do not end its burst: one notice, not one a line.
        if (pending && (now - pending.last >= BURST_QUIET_MS || now - pending.first >= NOTICE_EVERY_MS)) {
          kept.push(dropNotice(pending, this.limits, now));
          this.pending.delete(line.workerId);
        }
        kept.push(text === line.text ? line : { ...line, text });
        continue;
      }
      dropped ??= {};
      dropped[reason] = (dropped[reason] ?? 0) + 1;
      if (!pending) {
        this.pending.set(line.workerId, {
          endpointId: line.endpointId,
          workerId: line.workerId,
          jobId: line.jobId,
          counts: { [reason]: 1 },
          first: now,
          last: now,
        });
      } else {
        pending.counts[reason] = (pending.counts[reason] ?? 0) + 1;
        pending.last = now;
        if (now - pending.first >= NOTICE_EVERY_MS) {
          kept.push(dropNotice(pending, this.limits, now));
          this.pending.delete(line.workerId);
        }
      }
    }
    if (dropped) for (const [reason, n] of Object.entries(dropped)) this.onDropped(reason as DropReason, n);
    return kept;
  }

  /**
   * Notices of bursts that ended with no line kept after them (quiet for a second), or that go on; buckets that
   * have refilled are forgotten. Called on the engine's tick.
   */
  flush(now: number): LogRow[] {
    const notices: LogRow[] = [];
    for (const [workerId, p] of this.pending) {
      if (now - p.last < BURST_QUIET_MS && now - p.first < NOTICE_EVERY_MS) continue;
      notices.push(dropNotice(p, this.limits, now));
      this.pending.delete(workerId);
    }
    for (const map of [this.workers, this.endpoints]) {
      for (const [id, b] of map) if (b.lines.full(now) && b.bytes.full(now) && !this.pending.has(id)) map.delete(id);
    }
    return notices;
  }

  /** Take a line's cost from its worker's and endpoint's buckets, all or nothing; the first limit it is over, if any. */
  private take(endpointId: string, workerId: string, bytes: number, now: number): DropReason | undefined {
    const worker = this.bucketsOf(this.workers, workerId, this.limits.workerLinesPerS, this.limits.workerBytesPerS, now);
    const endpoint = this.bucketsOf(this.endpoints, endpointId, this.limits.endpointLinesPerS, this.limits.endpointBytesPerS, now);
    if (worker.lines.available(now) < 1) return "worker_lines";
    if (worker.bytes.available(now) < Math.min(bytes, worker.bytes.capacity)) return "worker_bytes";
    if (endpoint.lines.available(now) < 1) return "endpoint_lines";
    if (endpoint.bytes.available(now) < Math.min(bytes, endpoint.bytes.capacity)) return "endpoint_bytes";
    worker.lines.take(1, now);
    worker.bytes.take(bytes, now);
    endpoint.lines.take(1, now);
    endpoint.bytes.take(bytes, now);
    return undefined;
  }

  private bucketsOf(map: Map<string, Buckets>, id: string, linesPerS: number, bytesPerS: number, now: number): Buckets {
    let b = map.get(id);
    if (!b) {
      const burst = this.limits.burstS;
      b = { lines: new TokenBucket(linesPerS, linesPerS * burst, now), bytes: new TokenBucket(bytesPerS, bytesPerS * burst, now) };
      map.set(id, b);
    }
    return b;
  }
}
