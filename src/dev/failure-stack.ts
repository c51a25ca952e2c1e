// A failed job's stack in the `svc dev` terminal: the frames worth reading, under the failure's line.
//
// The worker prints "job <id> failed: ..." before its result reaches the service (the result goes with its next
// take), so the job's record is read once it is final (/status-sync), not at once: a /status read then often
// found the job still IN_PROGRESS, without a stack, and the terminal showed none.

import type { JobsClient } from "svc/internal";

/** How long a failed job's final record is waited for (a job retried waits for its last attempt). */
export const FAILURE_STACK_WAIT_MS = 15_000;

/** The frames of a job's stack worth reading in a terminal: the user's code and svc's SDK, not the runtime's loop or node's internals. Pure. */
export function stackBlock(stack: string, max = 8): string[] {
  return stack
    .split("\n")
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => l.startsWith("at ") && !/node:internal|\/dist\/runtime\/|\(node:/.test(l))
    .slice(0, max)
    .map((l) => `    ${l}`);
}

/** The stack block of a job once it is final (none when it has no stack, or is not final within `waitMs`). */
export async function failedJobStack(jobs: Pick<JobsClient, "statusSync">, jobId: string, waitMs = FAILURE_STACK_WAIT_MS): Promise<string[]> {
  const record = await jobs.statusSync(jobId, waitMs);
  return typeof record.errorStack === "string" ? stackBlock(record.errorStack) : [];
}
