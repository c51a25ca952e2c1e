// Pure decisions of the load-balanced proxy: which ready worker takes a request, and the demand the scaler sees.

export interface BalancedWorker {
  id: string;
  ready: boolean;
  inFlight: number;
}

/**
 * Least outstanding requests among ready workers; ties go to the worker after `lastPicked` in list order, so
 * equal workers take turns. undefined: no ready worker.
 */
export function pickWorker(workers: readonly BalancedWorker[], lastPicked?: string): BalancedWorker | undefined {
  // Two passes, no arrays: this runs on every proxied request.
  let least = Infinity;
  for (const w of workers) if (w.ready && w.inFlight < least) least = w.inFlight;
  if (least === Infinity) return undefined;
  let first: BalancedWorker | undefined;
  let afterLast = false;
  for (const w of workers) {
    if (!w.ready || w.inFlight !== least) continue;
    if (afterLast) return w;
    first ??= w;
    if (w.id === lastPicked) afterLast = true;
  }
  return first;
}

/**
 * The load the scaler plans an LB endpoint with, in the terms of planScaling: requests waiting for a worker are
 * "queued", requests being served are "in progress" (its maxConcurrency is then the in-flight target per worker).
 */
export function lbDemand(waiting: number, inFlight: number): { queued: number; inProgress: number } {
  return { queued: waiting, inProgress: inFlight };
}
