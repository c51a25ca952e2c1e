// An endpoint's scaling policy, as the provider documents it: how many workers its queue calls for now. Pure: the
// scaler passes the queue, the workers and the clock in, and applies the answer (src/service/scaler.ts).
//
//   QUEUE_DELAY, value s: a worker is added for queued jobs that have waited longer than `value` seconds (never
//     before); with no worker at all, the first job starts one at once (the provider's rule: a cold endpoint
//     does not also wait out the delay).
//   REQUEST_COUNT, value n: workers = ceil((queued + in progress) / n).
// Both stay within workersMin..workersMax. Low-priority jobs never call for a worker: they run on workers that
// exist. Scale-down is not the policy's: a worker idle for the endpoint's idleTimeout stops (planScaling).

import type { ScalingPolicy } from "svc/internal";

export type { ScalingPolicy };

/**
 * The policy of an endpoint that names none (a manifest built before policies existed, or an endpoint without
 * `scaler`): one worker per `maxConcurrency` jobs queued or running, the rule svc always had.
 */
export function defaultPolicy(maxConcurrency: number): ScalingPolicy {
  return { type: "REQUEST_COUNT", value: Math.max(1, maxConcurrency) };
}

export interface ScalingQueue {
  /** Normal-priority jobs waiting. */
  normal: number;
  /** Low-priority jobs waiting: they never start a worker. */
  low: number;
  /**
   * When each waiting normal-priority job began to wait (epoch ms), oldest first. The scaler may cut the list
   * short past what could matter (more than workersMax workers' worth).
   */
  waitingSince: readonly number[];
}

export interface DemandInput {
  policy: ScalingPolicy;
  workersMin: number;
  workersMax: number;
  maxConcurrency: number;
  queue: ScalingQueue;
  /** Jobs running now (any priority). */
  inProgress: number;
  /** The endpoint's live workers of its current revision, not draining; `starting` of them not ready yet. */
  workers: { live: number; starting: number };
  now: number;
}

/** How many workers the endpoint's policy wants now, within workersMin..workersMax. Pure. */
export function desiredWorkers(d: DemandInput): number {
  const wanted = d.policy.type === "REQUEST_COUNT" ? requestCount(d) : queueDelay(d);
  return Math.min(d.workersMax, Math.max(d.workersMin, wanted));
}

function requestCount(d: DemandInput): number {
  return Math.ceil((d.queue.normal + d.inProgress) / Math.max(1, d.policy.value));
}

function queueDelay(d: DemandInput): number {
  // From zero the first job starts a worker at once; waiting out the delay first would only add to a cold start.
  if (d.workers.live === 0) return d.queue.normal > 0 ? 1 : 0;
  const limit = d.now - d.policy.value * 1000;
  let overdue = 0;
  for (const since of d.queue.waitingSince) {
    if (since >= limit) break;
    overdue++;
  }
  // Workers still starting take the overdue jobs once up: only what they cannot take calls for more.
  const perWorker = Math.max(1, d.maxConcurrency);
  const ready = d.workers.live - d.workers.starting;
  return Math.max(d.workers.live, ready + Math.ceil(overdue / perWorker));
}
