// Pure decisions of the load-balanced proxy: which ready worker takes a request, and the demand the scaler sees.

export interface BalancedWorker {
  id: string;
  /** Whether it may take a request now (read by the default `isReady`). */
  ready?: boolean;
  inFlight: number;
}

/**
 * Least outstanding requests among ready workers; ties go to the worker after `lastPicked` in list order, so
 * equal workers take turns. undefined: no ready worker. One pass over `workers` (the pool's own records, as they
 * are: `isReady` says which may take a request), no arrays: this runs on every proxied request.
 */
export function pickWorker<W extends BalancedWorker>(
  workers: Iterable<W>,
  lastPicked?: string,
  isReady: (w: W) => boolean = (w) => w.ready === true,
): W | undefined {
  let least = Infinity;
  let first: W | undefined;
  let afterLast: W | undefined;
  // Whether `lastPicked` is among the least loaded seen so far (ties rotate only among the least loaded).
  let lastSeen = false;
  for (const w of workers) {
    if (w.inFlight > least || !isReady(w)) continue;
    if (w.inFlight < least) {
      least = w.inFlight;
      first = w;
      afterLast = undefined;
      lastSeen = w.id === lastPicked;
      continue;
    }
    if (lastSeen) afterLast ??= w;
    else if (w.id === lastPicked) lastSeen = true;
  }
  return afterLast ?? first;
}

/**
 * The load the scaler plans an LB endpoint with, in the terms of planScaling: requests waiting for a worker are
 * "queued", requests being served are "in progress" (its maxConcurrency is then the in-flight target per worker).
 */
export function lbDemand(waiting: number, inFlight: number): { queued: number; inProgress: number } {
  return { queued: waiting, inProgress: inFlight };
}
