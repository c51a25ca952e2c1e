// A process worker's output: each line of its stdout and stderr, marks read (runtime/output-marks.ts), to the log
// of the launch it serves. Apart from the driver (process.ts) because a pooled runtime's lines have no launch yet:
// the sink is filled in at its claim.

import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { readMarkedLine } from "../runtime/output-marks.js";
import type { WorkerLaunch } from "./types.js";

/** Where a child's output lines go: its launch's log once it is a worker (a pooled one has none before). */
export interface LogSink {
  onLog?: WorkerLaunch["onLog"];
}

/** Send each line `child` writes to `sink`, as it is now (a later onLog gets the later lines). */
export function readLines(child: ChildProcess, sink: LogSink): void {
  for (const [stream, name] of [
    [child.stdout, "stdout"],
    [child.stderr, "stderr"],
  ] as const) {
    if (!stream) continue;
    createInterface({ input: stream, crlfDelay: Infinity }).on("line", (text) => {
      try {
        sink.onLog?.({ ts: Date.now(), ...readMarkedLine(name, text) });
      } catch {
        // a failing log sink must not take the worker's pipes down
      }
    });
  }
}
