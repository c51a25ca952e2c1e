// What a job's result carries: its JSON, serialised as the job ends (a bad output fails that job alone), and for a
// failed job the error's type, message, retryability and stack (the project's frames, relative to it). Apart from
// the loop (loop.ts), which only queues and sends results, so that the stack and failure rules are tested alone.

import { fileURLToPath } from "node:url";
import { errorMessage } from "../errors.js";
import { projectRelativeStack, userStack } from "../build/source-paths.js";
import type { JobResult } from "./api.js";

/** One result's JSON, serialised as the job ends so a bad output fails that job alone. */
export function serialiseResult(result: JobResult): string {
  try {
    return JSON.stringify(result);
  } catch (err) {
    return JSON.stringify({
      jobId: result.jobId,
      lease: result.lease,
      status: "FAILED",
      error: { message: `The job's output is not JSON-serialisable: ${errorMessage(err)}`, type: "TypeError" },
    } satisfies JobResult);
  }
}

/** svc's own files in a worker: this package (its runtime, and the SDK when a checkout links it). */
const SVC_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The stack a job's record carries: the project's files as paths relative to it (src/build/source-paths.ts), and
 * only the user's frames unless the endpoint's environment sets SVC_FULL_STACKS=1 (read per job: a pooled runtime
 * gets its environment after it loaded).
 */
export function jobStack(stack: string, env: NodeJS.ProcessEnv = process.env): string {
  const relative = projectRelativeStack(stack);
  return env.SVC_FULL_STACKS === "1" ? relative : userStack(relative, [SVC_ROOT]);
}

export function errorOf(err: unknown): NonNullable<JobResult["error"]> {
  if (err instanceof Error) {
    // The SDK's NonRetryableError, or any error so marked: the job fails without an automatic retry.
    const final = (err as { retryable?: unknown }).retryable === false;
    return { message: err.message, type: err.name, ...(err.stack ? { stack: jobStack(err.stack) } : {}), ...(final ? { retryable: false } : {}) };
  }
  return { message: typeof err === "string" ? err : safeString(err), type: typeof err };
}

/** "TypeError: message (at file:line:col)": the error and where it was thrown, on one line. Pure. */
export function failureLine(error: NonNullable<JobResult["error"]>): string {
  const where = error.stack
    ?.split("\n")
    .find((line) => /^\s+at /.test(line))
    ?.trim()
    .replace(/^at /, "");
  const message = error.message ?? "";
  const head = error.type && error.type !== "string" ? `${error.type}: ${message}` : message;
  return where ? `${head} (at ${where})` : head;
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
