// Idempotent submits: a `/run` or `/runsync` carrying an `Idempotency-Key` header makes at most one job per
// (user, endpoint, key) for as long as that job's result is kept. The key is claimed in the store before the job
// is made (the store's primary key decides between racing requests, on any replica), so every repeat finds the
// first job; a repeat with another body is refused. HTTP-free: the job routes map the outcome to answers.
//
// A claim whose job never appears (the process that claimed it died before writing the job, whose request was
// therefore never answered) is taken over by a repeat once it is older than `settleMs`: a live claimer writes its
// job within milliseconds of its claim. A claim whose job's result expired is taken over the same way, so the key
// is free again once the result is gone, as the first job's answer is.

import { createHash } from "node:crypto";
import type { JobRow } from "../store/types.js";
import type { IdempotencyRow, IdempotencyStore } from "./store.js";

/** Longest key accepted (Stripe's and the IETF draft's examples are UUIDs; 255 leaves room for any scheme). */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
/** How long a claim may wait for its job before a repeat takes it over. */
export const CLAIM_SETTLE_MS = 10_000;
/** How often a repeat looks for the first request's job while that request is still writing it. */
const POLL_MS = 20;
/** Keys whose job is gone are deleted once this old (a job's result outlives its key by at most this). */
export const SWEEP_AFTER_MS = 3600_000;

export type IdempotentOutcome =
  | { kind: "created"; row: JobRow }
  | { kind: "replayed"; row: JobRow }
  /** The key was first used with another request body. */
  | { kind: "mismatch"; jobId: string };

export interface IdempotentRequest {
  userId: string;
  endpointId: string;
  key: string;
  /** requestHash() of the submission as validated. */
  requestHash: string;
}

/** Why a header value is not a usable key, or undefined when it is. Pure. */
export function invalidIdempotencyKey(value: string): string | undefined {
  if (value.length === 0 || value.length > MAX_IDEMPOTENCY_KEY_LENGTH) return `must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return "must be printable ASCII without spaces";
  }
  return undefined;
}

/** A digest of a submission that is the same whatever the order of its objects' keys. Pure. */
export function requestHash(submission: unknown): string {
  return createHash("sha256").update(canonicalJson(submission)).digest("hex");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export interface IdempotencyDeps {
  store: IdempotencyStore;
  now(): number;
  sleep?(ms: number): Promise<void>;
  settleMs?: number;
}

export class IdempotentSubmits {
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly settleMs: number;

  constructor(private readonly deps: IdempotencyDeps) {
    this.sleep = deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.settleMs = deps.settleMs ?? CLAIM_SETTLE_MS;
  }

  /**
   * The job for this key: made by `create` under `jobId` when the key is new (or free again), else the one the
   * first request made, found by `find` (which answers only jobs that are written: see the job routes).
   */
  async submit(
    request: IdempotentRequest,
    jobId: string,
    create: (jobId: string) => Promise<JobRow>,
    find: (jobId: string) => Promise<JobRow | undefined>,
  ): Promise<IdempotentOutcome> {
    const mine: IdempotencyRow = { ...request, jobId, createdAt: this.deps.now() };
    let current = await this.deps.store.claim(mine);
    for (;;) {
      if (current.jobId === jobId) return { kind: "created", row: await create(jobId) };
      const row = await find(current.jobId);
      if (row) return current.requestHash === request.requestHash ? { kind: "replayed", row } : { kind: "mismatch", jobId: current.jobId };
      if (this.deps.now() - current.createdAt < this.settleMs) {
        // The first request is still writing its job: another body is refused now, the same one waits for it.
        if (current.requestHash !== request.requestHash) return { kind: "mismatch", jobId: current.jobId };
        await this.sleep(POLL_MS);
        continue;
      }
      mine.createdAt = this.deps.now();
      if (await this.deps.store.takeOver(mine, current.jobId)) current = mine;
      else current = await this.deps.store.claim(mine);
    }
  }

  /** Forget keys whose job is gone; called now and then. */
  sweep(): Promise<number> {
    return this.deps.store.sweep(this.deps.now() - SWEEP_AFTER_MS);
  }
}
