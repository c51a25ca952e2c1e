// Time as the engine sees it. Every deadline the engine keeps (leases, execution timeouts, retention, long
// polls, storage recovery) reads and waits on one clock, so a test can move time instead of sleeping.

/** A pending timer of a clock (what its setTimeout returned). */
export type TimerHandle = unknown;

export interface Clock {
  /** Epoch ms. */
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(timer: TimerHandle): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout),
};
