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
  const ready = workers.filter((w) => w.ready);
  if (ready.length === 0) return undefined;
  const least = Math.min(...ready.map((w) => w.inFlight));
  const candidates = ready.filter((w) => w.inFlight === least);
  const after = candidates.findIndex((w) => w.id === lastPicked);
  return candidates[(after + 1) % candidates.length];
}

/**
 * The load the scaler plans an LB endpoint with, in the terms of planScaling: requests waiting for a worker are
 * "queued", requests being served are "in progress" (its maxConcurrency is then the in-flight target per worker).
 */
export function lbDemand(waiting: number, inFlight: number): { queued: number; inProgress: number } {
  return { queued: waiting, inProgress: inFlight };
}
