// One channel for a driver-run worker's output. A driver already captures the worker's raw stdout/stderr (it must:
// a crash before the runtime starts, or node's own last words, only appear there), so the runtime does not also
// ship those lines over the worker protocol, which stored every line twice. Instead it marks the lines a job
// wrote, and its own notes, in band with an OSC escape sequence that terminals ignore (`docker logs` and a
// preview's console show clean text), and the driver reads the marks back.
//
//   ESC ] svc;job=<job id> BEL <text>        a line written while the job was running
//   ESC ] svc;note BEL <text>                a note of the runtime itself (stream "log")
//   ESC ] svc;note;job=<job id> BEL <text>   a note about a job (its stray error)
//
// Workers that no driver watches (remote machines) keep shipping their output over the protocol.

export const OUTPUT_CAPTURED_ENV = "SVC_OUTPUT_CAPTURED";

const JOB_ID = /^[A-Za-z0-9_.:-]{1,128}$/;
const MARK = /^\x1b\]svc;(note)?;?(?:job=([A-Za-z0-9_.:-]{1,128}))?\x07/;

export function jobMark(jobId: string): string {
  return JOB_ID.test(jobId) ? `\x1b]svc;job=${jobId}\x07` : "";
}

export function noteMark(jobId?: string): string {
  return jobId && JOB_ID.test(jobId) ? `\x1b]svc;note;job=${jobId}\x07` : "\x1b]svc;note\x07";
}

export interface MarkedLine {
  stream: "stdout" | "stderr" | "log";
  text: string;
  jobId?: string;
}

/** Read a raw output line back: its job, or "log" for a runtime note, and the text without the mark. Pure. */
export function readMarkedLine(stream: "stdout" | "stderr", raw: string): MarkedLine {
  const match = MARK.exec(raw);
  if (!match) return { stream, text: raw };
  const text = raw.slice(match[0].length);
  return { stream: match[1] ? "log" : stream, text, ...(match[2] ? { jobId: match[2] } : {}) };
}

/**
 * Prefix every line start in `chunk` with `mark`. `atLineStart` says whether the stream's last write ended a line;
 * returns the marked text and whether this one did. Pure.
 */
export function markChunk(chunk: string, mark: string, atLineStart: boolean): { text: string; atLineStart: boolean } {
  if (chunk === "") return { text: chunk, atLineStart };
  let text = "";
  let start = 0;
  let lineStart = atLineStart;
  while (start < chunk.length) {
    const end = chunk.indexOf("\n", start);
    const piece = end === -1 ? chunk.slice(start) : chunk.slice(start, end + 1);
    text += (lineStart ? mark : "") + piece;
    lineStart = end !== -1;
    start = end === -1 ? chunk.length : end + 1;
  }
  return { text, atLineStart: lineStart };
}
