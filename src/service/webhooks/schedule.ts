// When a failed delivery is tried again: exponential backoff with jitter, bounded in attempts. The nth retry
// waits between half and all of min(maxDelayMs, baseMs * factor^(n-1)) (so receivers that failed together do not
// all come back at the same instant); after `attempts` attempts the message is given up. Pure: the random draw
// is a parameter.

export interface RetryPolicy {
  /** Attempts in all, the first included (1..20). */
  attempts: number;
  /** The delay before the first retry, before jitter (ms). */
  baseMs: number;
  /** How much each delay grows over the one before. */
  factor: number;
  /** No delay is longer than this (ms). */
  maxDelayMs: number;
}

/** 5 attempts over about 1.5 to 3 minutes: retries after 2 s, 8 s, 32 s, 128 s (each 50-100% of that). */
export const DEFAULT_RETRY_POLICY: RetryPolicy = { attempts: 5, baseMs: 2_000, factor: 4, maxDelayMs: 5 * 60_000 };

/** The policy with `overrides`, or the reasons it is not one. Pure. */
export function retryPolicy(overrides: Partial<RetryPolicy> = {}): RetryPolicy {
  const p = { ...DEFAULT_RETRY_POLICY, ...overrides };
  const problems: string[] = [];
  if (!Number.isInteger(p.attempts) || p.attempts < 1 || p.attempts > 20) problems.push("attempts must be an integer from 1 to 20");
  if (!(p.baseMs >= 0)) problems.push("baseMs must be 0 or more");
  if (!(p.factor >= 1)) problems.push("factor must be 1 or more");
  if (!(p.maxDelayMs >= p.baseMs)) problems.push("maxDelayMs must be at least baseMs");
  if (problems.length > 0) throw new Error(`webhook retry policy: ${problems.join("; ")}`);
  return p;
}

/**
 * The wait after the `failed`th failed attempt (1: after the first), or undefined when no attempt is left.
 * `random` is a draw in [0, 1).
 */
export function retryDelay(policy: RetryPolicy, failed: number, random: number): number | undefined {
  if (failed >= policy.attempts) return undefined;
  const full = Math.min(policy.maxDelayMs, policy.baseMs * policy.factor ** (failed - 1));
  return Math.round(full / 2 + (full / 2) * random);
}

/** The longest the retries of one message can take, first attempt to last (jitter at its maximum). Pure. */
export function longestSchedule(policy: RetryPolicy): number {
  let total = 0;
  for (let failed = 1; failed < policy.attempts; failed++) total += retryDelay(policy, failed, 1)!;
  return total;
}
