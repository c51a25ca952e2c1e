// A worker container's output: the engine's multiplexed attach stream (no TTY) split into stdout and stderr,
// then into lines for the worker's log. Both the driver's own containers and pre-booted ones are read this way.

import { PassThrough } from "node:stream";
import { createInterface } from "node:readline";
import type Docker from "dockerode";
import { readMarkedLine } from "../runtime/output-marks.js";
import type { WorkerLogLine } from "./types.js";

/** Demultiplex a container's attach stream into line-by-line onLog calls; resolves when both streams end. */
export function pipeLogs(docker: Docker, attached: NodeJS.ReadableStream, onLog: (line: WorkerLogLine) => void): Promise<void> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  docker.modem.demuxStream(attached, stdout, stderr);
  const ended = new Promise<void>((resolve) => {
    const end = () => {
      stdout.end();
      stderr.end();
      resolve();
    };
    attached.on("end", end);
    attached.on("close", end);
    attached.on("error", end);
  });
  const lines = (["stdout", "stderr"] as const).map(
    (name) =>
      new Promise<void>((resolve) => {
        const reader = createInterface({ input: name === "stdout" ? stdout : stderr, crlfDelay: Infinity });
        reader.on("line", (text) => {
          try {
            onLog({ ts: Date.now(), ...readMarkedLine(name, text) });
          } catch {
            // a failing log sink must not take the log stream down
          }
        });
        reader.on("close", () => resolve());
      }),
  );
  return ended.then(() => Promise.all(lines)).then(() => undefined);
}
