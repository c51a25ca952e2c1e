// When a failed job runs again: exponential backoff with full jitter, bounded, per endpoint; and which failures
// are not retried at all. Pure: the engine asks, the caller's clock and random numbers decide.
//
// Full jitter (a delay drawn uniformly from zero to the exponential ceiling) rather than the bare exponential:
// jobs that failed together (a model server that went away, a bad deploy) would otherwise come back together,
// in the same lockstep, at every attempt.

/** A retry's backoff: the n-th retry waits a random time in [0, min(maxMs, baseMs * factor^(n-1))]. */
export interface BackoffPolicy {
  baseMs: number;
  factor: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 1000, factor: 2, maxMs: 60_000 };

/** The longest the `retry`-th retry (1 for the first) may wait. Pure. */
export function backoffCeilingMs(policy: BackoffPolicy, retry: number): number {
  const exponent = Math.max(0, retry - 1);
  // Capped before it overflows: factor^exponent grows past any max within a few dozen retries.
  const ceiling = policy.baseMs * Math.pow(policy.factor, Math.min(exponent, 64));
  return Math.max(0, Math.min(policy.maxMs, Number.isFinite(ceiling) ? ceiling : policy.maxMs));
}

/** How long the `retry`-th retry waits: uniform in [0, ceiling], whole ms. `random` is in [0, 1). Pure. */
export function retryDelayMs(policy: BackoffPolicy, retry: number, random: () => number = Math.random): number {
  return Math.floor(random() * (backoffCeilingMs(policy, retry) + 1));
}

/**
 * Whether a failure may be retried: the handler threw an error marked `retryable: false` (the SDK's
 * NonRetryableError, or any error given that property), carried by the worker protocol's result. Pure.
 */
export function isRetryable(error: { retryable?: unknown } | undefined): boolean {
  return error?.retryable !== false;
}
