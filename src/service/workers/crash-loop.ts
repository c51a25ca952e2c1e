// An endpoint whose workers keep dying: each unexpected end counts, the next start waits longer each time
// (exponential, capped), and once `deaths` of them fall within `windowMs` the endpoint is crash-looping, which its
// health, its record and `svc doctor` show. A worker that stays up `stableMs`, or a job that completes, ends it.
// Pure: the scaler keeps one state per endpoint and calls these.

import type { WorkerExit } from "../../drivers/types.js";
import type { CrashLoopAnswer } from "../http/answers.js";

export interface CrashLoopPolicy {
  /** Deaths within windowMs that make an endpoint crash-looping. */
  deaths: number;
  windowMs: number;
  /** A worker that lived this long (or still lives) proves the endpoint's code runs: the count starts again. */
  stableMs: number;
  /** The wait before the start after the first death; doubled for each further one, up to backoffMaxMs. */
  backoffBaseMs: number;
  backoffMaxMs: number;
}

export const DEFAULT_CRASH_LOOP: CrashLoopPolicy = { deaths: 3, windowMs: 120_000, stableMs: 60_000, backoffBaseMs: 500, backoffMaxMs: 60_000 };

/** Why a worker died, as a bounded metric label: SIGKILL (the OOM killer, or killed from outside), another signal, a non-zero or zero exit, a failed start. */
export type DeathReason = CrashLoopAnswer["lastDeath"]["reason"];

export interface Death {
  at: number;
  reason: DeathReason;
  /** In words: "killed (SIGKILL: out of memory, or killed from outside)". */
  text: string;
}

export interface EndpointDeaths {
  /** Deaths since the endpoint last proved it runs (each one doubles the wait). */
  streak: number;
  /** The deaths of that streak within the window, oldest first. */
  recent: Death[];
  /** No worker starts before this time. */
  until: number;
}

/** What `/v2/{id}/health` (`crashLoop`) and the endpoint's record say of an endpoint whose workers keep dying. */
export type CrashLoop = CrashLoopAnswer;

export const NO_DEATHS: EndpointDeaths = { streak: 0, recent: [], until: 0 };

/** How a worker that ended unasked ended, in words a job's error can carry. Pure. */
export function deathOf(exit: WorkerExit): string {
  if (exit.signal === "SIGKILL" || exit.code === 137) return "killed (SIGKILL: out of memory, or killed from outside)";
  if (exit.signal) return `killed by ${exit.signal}`;
  return `exited with code ${exit.code}`;
}

/** The metric label of a death. Pure. */
export function deathReason(exit: WorkerExit | undefined): DeathReason {
  if (!exit) return "start_failed";
  if (exit.signal === "SIGKILL" || exit.code === 137) return "sigkill";
  if (exit.signal) return "signal";
  return exit.code === 0 ? "exit_zero" : "exit_error";
}

/**
 * The state after a worker died at `death.at`, having lived `livedMs` (undefined: never started). A worker that
 * lived `stableMs` ends the streak before its own death counts. Pure.
 */
export function afterDeath(state: EndpointDeaths, death: Death, livedMs: number | undefined, policy: CrashLoopPolicy = DEFAULT_CRASH_LOOP): EndpointDeaths {
  const base = livedMs !== undefined && livedMs >= policy.stableMs ? NO_DEATHS : state;
  const streak = base.streak + 1;
  const recent = [...base.recent.filter((d) => death.at - d.at < policy.windowMs), death];
  return { streak, recent, until: death.at + backoffMs(streak, policy) };
}

/** The wait before the next start after `streak` deaths in a row. Pure. */
export function backoffMs(streak: number, policy: CrashLoopPolicy = DEFAULT_CRASH_LOOP): number {
  if (streak <= 0) return 0;
  return Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** Math.min(streak - 1, 30));
}

/** The crash loop an endpoint is in at `now`, or undefined when it is in none. Pure. */
export function crashLoopOf(state: EndpointDeaths | undefined, now: number, policy: CrashLoopPolicy = DEFAULT_CRASH_LOOP): CrashLoop | undefined {
  if (!state) return undefined;
  const recent = state.recent.filter((d) => now - d.at < policy.windowMs);
  if (recent.length < policy.deaths) return undefined;
  const last = recent[recent.length - 1]!;
  return {
    deaths: recent.length,
    windowMs: policy.windowMs,
    since: recent[0]!.at,
    lastDeath: { at: last.at, reason: last.reason, message: last.text },
    nextStartAt: state.until > now ? state.until : null,
  };
}

/** "2 min", "90 s". Pure. */
function span(ms: number): string {
  const s = Math.round(ms / 1000);
  return s >= 60 && s % 60 === 0 ? `${s / 60} min` : `${s} s`;
}

/** "workers keep dying: 5 in 2 min, last: killed (SIGKILL: ...); next start in 40 s". Pure. */
export function crashLoopMessage(c: CrashLoop, now: number): string {
  const next = c.nextStartAt === null ? "the next worker may start now" : `next start in ${Math.max(1, Math.ceil((c.nextStartAt - now) / 1000))} s`;
  return `workers keep dying: ${c.deaths} in ${span(c.windowMs)}, last: ${c.lastDeath.message}; ${next}`;
}
