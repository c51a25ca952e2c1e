// A Swarm worker's output, followed through the manager (GET /services/{id}/logs?follow=1, which reaches the task
// on whichever node runs it) and handed to the launch's onLog line by line, with the runtime's output marks read
// back as the other drivers read them (the worker runs with SVC_OUTPUT_CAPTURED=1: its job lines reach the service
// only here).
//
// The answer is Docker's multiplexed stream (8-byte frame headers: stdout and stderr kept apart), one log line per
// frame, read with timestamps. A follow never ends by itself, not even when the task ends or the service is
// removed: the driver ends it. When the task has ended, one last plain read of the service's log (it ends) picks up
// what the follow had not delivered yet (a crash's stack), each stream's lines deduplicated by their timestamps,
// before the driver removes the service and its log with it.

import type Docker from "dockerode";
import { readMarkedLine } from "../runtime/output-marks.js";
import { dockerMessage } from "./docker-engine.js";
import { LineDeduper, splitTimestamp, timeKey } from "./kubernetes-logs.js";
import type { WorkerLogLine } from "./types.js";
import { errorMessage } from "../errors.js";

type Stream = "stdout" | "stderr";

export interface Frame {
  stream: Stream;
  payload: string;
}

/** Splits Docker's multiplexed log stream into frames, across chunk boundaries. */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const frames: Frame[] = [];
    while (this.pending.length >= 8) {
      const size = this.pending.readUInt32BE(4);
      if (this.pending.length < 8 + size) break;
      const type = this.pending[0];
      const payload = this.pending.subarray(8, 8 + size).toString("utf8");
      this.pending = this.pending.subarray(8 + size);
      // 0 (stdin) never comes from a log; 1 stdout, 2 stderr.
      frames.push({ stream: type === 2 ? "stderr" : "stdout", payload });
    }
    return frames;
  }
}

/**
 * One stream's lines out of its frames ("<RFC3339Nano> <text>", a line per frame; the engine splits a line longer
 * than 16 KiB into frames that do not end it): each whole line once, in order, from `floor` on.
 */
class StreamLines {
  private dedupe: LineDeduper;
  private partial: { key: string; ms: number; text: string } | undefined;

  constructor(
    private readonly stream: Stream,
    floor: string,
    private readonly emit: (line: WorkerLogLine) => void,
  ) {
    this.dedupe = new LineDeduper(floor);
  }

  frame(payload: string): void {
    const timed = splitTimestamp(payload);
    const piece = timed?.text ?? payload;
    const start = this.partial ?? (timed ? { key: timed.key, ms: timed.ms, text: "" } : { key: "", ms: Date.now(), text: "" });
    start.text += piece;
    if (!start.text.endsWith("\n")) {
      this.partial = start;
      return;
    }
    this.partial = undefined;
    this.line(start.key, start.ms, start.text.slice(0, -1));
  }

  /** The read ended: a last line with no newline is whole. */
  flush(): void {
    const rest = this.partial;
    this.partial = undefined;
    if (rest) this.line(rest.key, rest.ms, rest.text);
  }

  /** A new read starts, from the second since() names: its lines at the last delivered time come first. */
  resume(): void {
    this.partial = undefined;
    this.dedupe.resume();
  }

  since(): string | undefined {
    return this.dedupe.since();
  }

  private line(key: string, ms: number, text: string) {
    if (key && !this.dedupe.take(key)) return;
    this.emit({ ts: ms, ...readMarkedLine(this.stream, text.endsWith("\r") ? text.slice(0, -1) : text) });
  }
}

export interface ServiceLogOptions {
  docker: () => Promise<Docker>;
  serviceId: string;
  onLog(line: WorkerLogLine): void;
  /** Only lines from this time on (RFC3339): an adopted service's earlier lines were the earlier process's. */
  sinceTime?: string;
  log(message: string): void;
}

export interface ServiceLogs {
  /** Follow the service's log from now (a no-op when following already, or ended). */
  follow(): void;
  /**
   * The task has ended: stop following, read the log once more for the lines the follow had not delivered (bounded
   * by `timeoutMs`), then resolve. The service must still exist.
   */
  finish(timeoutMs: number): Promise<void>;
  /** Stop at once (the service is gone, or the driver closes): the open request is aborted. */
  stop(): void;
}

/** One service's output, to onLog: followed while its task runs, and its last lines read once it ended. */
export function serviceLogs(options: ServiceLogOptions): ServiceLogs {
  const { serviceId } = options;
  const floor = options.sinceTime ? timeKey(options.sinceTime) : "";
  const deliver = (line: WorkerLogLine) => {
    try {
      options.onLog(line);
    } catch (err) {
      // A failing log sink must not end the follow: the next lines may well be stored.
      options.log(`could not hand on a line of Swarm service ${serviceId}'s log: ${errorMessage(err)}`);
    }
  };
  const streams = { stdout: new StreamLines("stdout", floor, deliver), stderr: new StreamLines("stderr", floor, deliver) };
  let following: AbortController | undefined;
  let ended = false;

  const take = (reader: FrameReader, chunk: Buffer) => {
    for (const frame of reader.push(chunk)) streams[frame.stream].frame(frame.payload);
  };

  /** Where a read that must not miss a line starts: the earliest second either stream has not finished. */
  const resumeAt = (): string | undefined => {
    const out = streams.stdout.since();
    const err = streams.stderr.since();
    if (out && err) return out < err ? out : err;
    return options.sinceTime;
  };

  const unixSeconds = (rfc3339: string) => String(Math.floor(Date.parse(rfc3339) / 1000));

  return {
    follow() {
      if (following || ended) return;
      const controller = new AbortController();
      following = controller;
      const since = resumeAt();
      void (async () => {
        const d = await options.docker();
        const body = (await d.getService(serviceId).logs({
          follow: true,
          stdout: true,
          stderr: true,
          timestamps: true,
          abortSignal: controller.signal,
          ...(since ? { since: unixSeconds(since) } : {}),
        } as Docker.ContainerLogsOptions & { follow: true })) as NodeJS.ReadableStream;
        if (controller.signal.aborted) {
          (body as unknown as { destroy?: () => void }).destroy?.();
          return;
        }
        const reader = new FrameReader();
        body.on("data", (chunk: Buffer) => take(reader, chunk));
        // The follow ends only when aborted (or the engine went away): finish() reads what it missed.
        body.on("error", () => undefined);
        controller.signal.addEventListener("abort", () => (body as unknown as { destroy?: () => void }).destroy?.(), { once: true });
      })().catch((err: unknown) => {
        if (!controller.signal.aborted) options.log(`could not follow the log of Swarm service ${serviceId}: ${dockerMessage(err)}`);
      });
    },

    async finish(timeoutMs) {
      if (ended) return;
      following?.abort();
      following = undefined;
      ended = true;
      // A line the follow had only part of is read again whole (it was not delivered: its time is not taken).
      const since = resumeAt();
      for (const s of Object.values(streams)) s.resume();
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), timeoutMs);
      timer.unref();
      try {
        const d = await options.docker();
        const all = (await d.getService(serviceId).logs({
          follow: false,
          stdout: true,
          stderr: true,
          timestamps: true,
          abortSignal: controller.signal,
          ...(since ? { since: unixSeconds(since) } : {}),
        } as Docker.ContainerLogsOptions)) as unknown as Buffer;
        take(new FrameReader(), all);
        for (const s of Object.values(streams)) s.flush();
      } catch (err) {
        // The worker's last lines are lost, not its exit: say so, and go on removing it.
        options.log(`could not read the last lines of Swarm service ${serviceId}: ${dockerMessage(err)}`);
      } finally {
        clearTimeout(timer);
      }
    },

    stop() {
      ended = true;
      following?.abort();
      following = undefined;
      for (const s of Object.values(streams)) s.flush();
    },
  };
}
