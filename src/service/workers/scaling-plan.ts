// What the scaler does to an endpoint's workers at each tick, decided from what it sees: how many to start (as
// the endpoint's scaling policy says, within workersMin and workersMax, after any crash backoff) and which to
// drain (an old revision's, and idle ones above the minimum after idleTimeout). Pure: Scaler applies it.

import { defaultPolicy, desiredWorkers, type ScalingPolicy } from "./scaling-policy.js";

export interface ScalingInput {
  workersMin: number;
  workersMax: number;
  maxConcurrency: number;
  idleTimeoutMs: number;
  /** Normal-priority jobs waiting. */
  queued: number;
  /** Low-priority jobs waiting: they start no worker, and keep the workers there are from idling out. */
  lowQueued?: number;
  /** When each waiting normal-priority job was queued, oldest first (QUEUE_DELAY); absent: none is known. */
  waitingSince?: readonly number[];
  inProgress: number;
  /** The endpoint's policy; absent: one worker per maxConcurrency jobs (defaultPolicy). */
  policy?: ScalingPolicy;
  revision: string;
  /** Live workers (not draining). */
  workers: Array<{ id: string; revision: string; state: "initializing" | "idle" | "running"; idleSince: number }>;
  now: number;
  /** No start before this time (backoff after crashes). */
  backoffUntil: number;
}

export interface ScalingPlan {
  start: number;
  drain: string[];
}

/** How many workers to start (as the endpoint's scaling policy says) and which to drain. Pure. */
export function planScaling(s: ScalingInput): ScalingPlan {
  const drain: string[] = [];
  // Old revision: drain the idle ones now, the busy ones once the new revision can take over.
  const current = s.workers.filter((w) => w.revision === s.revision);
  const old = s.workers.filter((w) => w.revision !== s.revision);
  for (const w of old) if (w.state !== "running") drain.push(w.id);
  const want = desiredWorkers({
    policy: s.policy ?? defaultPolicy(s.maxConcurrency),
    workersMin: s.workersMin,
    workersMax: s.workersMax,
    maxConcurrency: s.maxConcurrency,
    queue: { normal: s.queued, low: s.lowQueued ?? 0, waitingSince: s.waitingSince ?? [] },
    inProgress: s.inProgress,
    workers: { live: current.length, starting: current.filter((w) => w.state === "initializing").length },
    now: s.now,
  });
  let start = 0;
  if (current.length < want && s.now >= s.backoffUntil) start = want - current.length;
  // Busy old workers: drained once current workers exist to take their place.
  if (current.length + start > 0) for (const w of old) if (w.state === "running") drain.push(w.id);
  // Idle scale-down above the minimum (and what the running jobs need), and nothing waiting: the idle timeout
  // decides it, whatever the policy.
  if (s.queued === 0 && (s.lowQueued ?? 0) === 0) {
    let surplus = current.length - Math.max(s.workersMin, Math.ceil(s.inProgress / Math.max(1, s.maxConcurrency)));
    const idle = current.filter((w) => w.state === "idle" && s.now - w.idleSince >= s.idleTimeoutMs).sort((a, b) => a.idleSince - b.idleSince);
    for (const w of idle) {
      if (surplus <= 0) break;
      drain.push(w.id);
      surplus--;
    }
  }
  return { start, drain };
}
