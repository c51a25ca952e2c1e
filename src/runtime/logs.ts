// Handler output, attributed to the job that wrote it. Every job runs inside jobScope.run(jobId, ...), so a
// console.log deep in user code (after awaits, in timers it started) still knows its job. The process's own
// stdout/stderr keep receiving everything: drivers capture those raw streams too.

import { AsyncLocalStorage } from "node:async_hooks";
import type { LogLine } from "./api.js";
import { jobMark, markChunk } from "./output-marks.js";

export const jobScope = new AsyncLocalStorage<string>();

/** Longest text of one line we ship; the raw process output keeps the whole thing. */
const MAX_LINE = 16 * 1024;

export interface LogShipperOptions {
  post(lines: LogLine[]): Promise<void>;
  /** Ship at least this often while lines wait (ms). */
  intervalMs?: number;
  /** Ship at once when this many lines wait. */
  batchLines?: number;
  /** Lines kept while the service is unreachable; older ones are dropped beyond it. */
  maxBuffered?: number;
}

export class LogShipper {
  private buffer: LogLine[] = [];
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private failures = 0;
  private readonly intervalMs: number;
  private readonly batchLines: number;
  private readonly maxBuffered: number;

  constructor(private readonly options: LogShipperOptions) {
    this.intervalMs = options.intervalMs ?? 200;
    this.batchLines = options.batchLines ?? 500;
    this.maxBuffered = options.maxBuffered ?? 10_000;
  }

  add(stream: LogLine["stream"], text: string, jobId = jobScope.getStore()): void {
    const ts = Date.now();
    for (const raw of text.split("\n")) {
      if (raw === "") continue;
      const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
      this.buffer.push({ ts, stream, ...(jobId ? { jobId } : {}), text: line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line });
    }
    if (this.buffer.length > this.maxBuffered) {
      const excess = this.buffer.length - this.maxBuffered;
      this.buffer.splice(0, excess);
      this.dropped += excess;
    }
    if (this.buffer.length >= this.batchLines) setImmediate(() => void this.flush());
    else this.timer ??= setTimeout(() => void this.flush(), this.intervalMs);
  }

  /** Ship what waits now; resolves when it has been posted (or given up on). */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.inFlight) await this.inFlight;
    if (this.buffer.length === 0) return;
    const lines = this.buffer;
    this.buffer = [];
    if (this.dropped > 0) {
      lines.unshift({ ts: Date.now(), stream: "log", text: `[svc] ${this.dropped} log lines dropped while the service was unreachable` });
      this.dropped = 0;
    }
    this.inFlight = this.options.post(lines).then(
      () => {
        this.failures = 0;
      },
      () => {
        // Keep the lines for the next try; the buffer bound drops the oldest when the outage lasts.
        this.failures++;
        this.buffer = lines.concat(this.buffer);
        this.timer ??= setTimeout(() => void this.flush(), Math.min(5000, this.intervalMs * 2 ** this.failures));
      },
    );
    await this.inFlight;
    this.inFlight = undefined;
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

type Write = typeof process.stdout.write;

function chunkText(chunk: unknown): string {
  return typeof chunk === "string" ? chunk : Buffer.isBuffer(chunk) || chunk instanceof Uint8Array ? Buffer.from(chunk).toString("utf8") : String(chunk);
}

/**
 * Tee process.stdout/stderr into `shipper` (every write), or, when a driver captures this process's output
 * (`marked`), ship nothing and mark the lines a job writes instead (see output-marks.ts). Returns an undo function.
 */
export function captureProcessOutput(shipper: LogShipper, options: { marked?: boolean } = {}): () => void {
  const originals: Array<[NodeJS.WriteStream, Write]> = [];
  for (const [stream, name] of [
    [process.stdout, "stdout"],
    [process.stderr, "stderr"],
  ] as const) {
    const original = stream.write;
    originals.push([stream, original]);
    let atLineStart = true;
    stream.write = function (this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]) {
      try {
        const jobId = jobScope.getStore();
        if (!options.marked) {
          shipper.add(name, chunkText(chunk), jobId);
        } else {
          const marked = markChunk(chunkText(chunk), jobId ? jobMark(jobId) : "", atLineStart);
          atLineStart = marked.atLineStart;
          if (jobId) chunk = marked.text;
        }
      } catch {
        // logging must never break the handler's write
      }
      return (original as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
    } as Write;
  }
  return () => {
    for (const [stream, original] of originals) stream.write = original;
  };
}
