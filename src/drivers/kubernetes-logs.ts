// A worker Pod's output, followed through the API server (GET .../pods/{name}/log?follow=true, the official
// client's `Log`) and handed to the launch's onLog line by line, with the runtime's output marks read back as the
// other drivers read them (the worker runs with SVC_OUTPUT_CAPTURED=1: its job lines reach the service only here).
//
// The kubelet's log mixes stdout and stderr into one stream: every line arrives as "stdout" (a job's lines keep
// their job from the marks). Lines are read with timestamps, so that a follow cut short (the API server closed it,
// the connection dropped) resumes from the last line's second without repeating a line.

import { PassThrough, type Readable } from "node:stream";
import { createInterface } from "node:readline";
import { Log, type CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { readMarkedLine } from "../runtime/output-marks.js";
import { apiErrorMessage, exitOfPod, statusOf } from "./kubernetes-pod.js";
import type { WorkerLogLine } from "./types.js";
import { errorMessage } from "../errors.js";

export interface TimedLine {
  /** Second, then nanoseconds (fixed width): compares as text. */
  key: string;
  ms: number;
  text: string;
}

/** A line of a log read with timestamps=true ("<RFC3339Nano> <text>"); undefined when it carries none. Pure. */
export function splitTimestamp(raw: string): TimedLine | undefined {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z (.*)$/s.exec(raw);
  if (!m) return undefined;
  const nanos = (m[2] ?? "").padEnd(9, "0");
  return { key: `${m[1]}.${nanos}`, ms: Date.parse(`${m[1]}.${nanos.slice(0, 3)}Z`), text: m[3]! };
}

/** The comparable key (as TimedLine's) of an RFC3339 time, e.g. new Date().toISOString(); "" if it is none. Pure. */
export function timeKey(rfc3339: string): string {
  return splitTimestamp(`${rfc3339} `)?.key ?? "";
}

/**
 * Which lines of a resumed read were delivered already: those before the last delivered line's time, and as many
 * at that very time as were delivered then. Lines with the same time are told apart by their order only.
 */
export class LineDeduper {
  private last: { key: string; count: number } | undefined;
  private skip = 0;

  /** `floor`: no line before this key (a time from timeKey) is delivered. */
  constructor(private readonly floor = "") {}

  /** A new read starts (from the last line's second): the lines at the last time are delivered ones, first. */
  resume(): void {
    this.skip = this.last?.count ?? 0;
  }

  /** Whether to deliver this line (and count it delivered). */
  take(key: string): boolean {
    if (key < this.floor) return false;
    if (!this.last || key > this.last.key) {
      this.last = { key, count: 1 };
      this.skip = 0;
      return true;
    }
    if (key < this.last.key) return false;
    if (this.skip > 0) {
      this.skip--;
      return false;
    }
    this.last.count++;
    return true;
  }

  /** Where a resumed read starts: the second of the last delivered line (RFC3339). */
  since(): string | undefined {
    return this.last ? `${this.last.key.slice(0, 19)}Z` : undefined;
  }
}

export interface LogFollow {
  /** Resolves when following has ended: the container ended and its last line was read, the Pod is gone, or stop(). */
  readonly done: Promise<void>;
  /** Stop following now: the open request is aborted. */
  stop(): void;
}

export interface FollowOptions {
  kc: KubeConfig;
  api: CoreV1Api;
  namespace: string;
  pod: string;
  container: string;
  onLog(line: WorkerLogLine): void;
  /** Only lines from this time on (RFC3339): an adopted Pod's earlier lines were the earlier service's. */
  sinceTime?: string;
  /** Wait between reads (a container not started yet, a follow cut short). */
  retryMs?: number;
  log(message: string): void;
}

/** Follow one Pod's log until its container ends (and its last lines are read), the Pod is gone, or stop(). */
export function followPodLog(options: FollowOptions): LogFollow {
  const { kc, api, namespace, pod, container } = options;
  const retryMs = options.retryMs ?? 1000;
  // The API takes sinceTime in whole seconds: lines of that second before it are dropped here.
  const dedupe = new LineDeduper(options.sinceTime ? timeKey(options.sinceTime) : "");
  let stopped = false;
  let current: AbortController | undefined;
  let wake: () => void = () => undefined;
  const stoppedNow = new Promise<void>((resolve) => (wake = resolve));
  const pause = (ms: number) => Promise.race([stoppedNow, new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]);

  const deliver = (raw: string) => {
    const timed = splitTimestamp(raw);
    if (timed && !dedupe.take(timed.key)) return;
    try {
      options.onLog({ ts: timed?.ms ?? Date.now(), ...readMarkedLine("stdout", timed?.text ?? raw) });
    } catch (err) {
      // A failing log sink must not end the follow: the next lines may well be stored.
      options.log(`could not hand on a line of Pod ${pod}'s log: ${errorMessage(err)}`);
    }
  };

  /** One request: resolves when its body ended, cleanly or not ("cut": aborted, or the connection dropped). */
  const readOnce = (sinceTime: string | undefined) =>
    new Promise<"ended" | "cut">((resolve, reject) => {
      const sink = new PassThrough();
      let cut = false;
      // `Log` pipes the response body into `sink`. On abort, or a dropped connection, node-fetch closes the socket
      // and emits 'error' on the body (its own listener keeps that from being uncaught), which a pipe does not pass
      // on: `sink` would never end and the follow would hang. The body announces itself to its destination
      // ('pipe'): take its errors here and end the lines.
      sink.on("pipe", (body: Readable) => {
        body.on("error", () => {
          cut = true;
          body.unpipe(sink);
          sink.end();
        });
      });
      const lines = createInterface({ input: sink, crlfDelay: Infinity });
      lines.on("line", deliver);
      lines.on("close", () => resolve(cut ? "cut" : "ended"));
      new Log(kc)
        .log(namespace, pod, container, sink, { follow: true, timestamps: true, ...(sinceTime ? { sinceTime } : {}) })
        .then((controller) => {
          current = controller;
          if (stopped) controller.abort();
        })
        .catch((err: unknown) => {
          reject(err);
          sink.end();
        });
    });

  let failures = 0;
  let lastNote = "";
  /** After a failed call: wait longer each time (up to 30 s), and say so once per distinct failure. */
  const failed = async (note: string) => {
    if (note !== lastNote) options.log(note);
    lastNote = note;
    await pause(Math.min(30_000, retryMs * 2 ** Math.min(failures++, 10)));
  };

  const done = (async () => {
    let since = options.sinceTime;
    let lastRead = false;
    while (!stopped) {
      let outcome: "ended" | "cut";
      try {
        outcome = await readOnce(since);
      } catch (err) {
        const code = statusOf(err);
        // 404: the Pod is gone, and its log with it.
        if (code === 404) return;
        // 400: its container is not running yet ("waiting to start"), for moments: read again soon. Anything
        // else (the API server unreachable, no right to pods/log) is worth a note, and a longer wait each time.
        if (code === 400) await pause(retryMs);
        else await failed(`could not read the log of Pod ${pod}: ${apiErrorMessage(err)}`);
        continue;
      } finally {
        current = undefined;
      }
      failures = 0;
      if (stopped) return;
      since = dedupe.since() ?? since;
      dedupe.resume();
      // The body ended: the container ended, or the read was cut. Only the Pod says which.
      let exited: boolean;
      try {
        exited = exitOfPod(await api.readNamespacedPod({ name: pod, namespace })) !== undefined;
      } catch (err) {
        if (statusOf(err) === 404) return;
        await failed(`could not read Pod ${pod}: ${apiErrorMessage(err)}`);
        continue;
      }
      // Ended cleanly with the container: all read. Cut short around its end: one more read for the last lines.
      if (exited && (outcome === "ended" || lastRead)) return;
      if (exited) lastRead = true;
      else await pause(retryMs);
    }
  })();

  return {
    done,
    stop() {
      if (stopped) return;
      stopped = true;
      wake();
      current?.abort();
    },
  };
}
