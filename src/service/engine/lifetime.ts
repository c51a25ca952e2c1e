// A job's ttl (`policy.ttl`) is its whole life, counted from submission, queue included, as the provider
// documents it: a job still queued when it runs out is never started, and a running one is stopped. Either way
// it ends TIMED_OUT, with an error that says so (docs/job-api.md, "TTL": why not the provider's deletion).
// Retention after the end is another matter (the /status `ttl` query and the defaults, JobRow.ttlMs).

import type { JobRow } from "../store/types.js";
import { isFinal } from "./types.js";

/** A job's ttl when its submission names none: the provider's default, 24 hours. */
export const DEFAULT_LIFETIME_MS = 24 * 3600_000;

/** When a job submitted at `createdAt` with `policy.ttl` = `lifetimeMs` (or none) must have ended. Pure. */
export function deadlineOf(createdAt: number, lifetimeMs: number | undefined): number {
  return createdAt + (lifetimeMs ?? DEFAULT_LIFETIME_MS);
}

/** Whether the job's ttl ran out at `now` before it ended. Pure. */
export function lifetimeOver(row: Pick<JobRow, "status" | "deadlineAt">, now: number): boolean {
  return row.deadlineAt !== undefined && row.deadlineAt !== null && now >= row.deadlineAt && !isFinal(row.status);
}

/** The error a job whose ttl ran out ends with: what ran out, and whether it had started. Pure. */
export function lifetimeError(row: Pick<JobRow, "status" | "createdAt" | "deadlineAt">): { message: string; type: string } {
  const ttl = (row.deadlineAt ?? row.createdAt) - row.createdAt;
  const where = row.status === "IN_PROGRESS" ? "while it ran; it was stopped" : "while it waited in the queue; it never started";
  return { message: `The job's ttl of ${ttl} ms (policy.ttl, counted from submission) ran out ${where}`, type: "TtlExpired" };
}
