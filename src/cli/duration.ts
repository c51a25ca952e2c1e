// Human durations and times for flags: `--since 10m`, `--ttl 1h`, `--idle-timeout 90s`. A bare number keeps the
// unit the flag always had (seconds or milliseconds), so scripts written before still work. Pure.

import { UsageError } from "../errors.js";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/gy;

/** Milliseconds of "90s", "10m", "1h30m", "2d", "250ms"; undefined when the text is not such a duration. */
export function parseDuration(text: string): number | undefined {
  const t = text.trim().toLowerCase();
  if (t === "") return undefined;
  PART.lastIndex = 0;
  let total = 0;
  let end = 0;
  for (let m = PART.exec(t); m !== null; m = PART.exec(t)) {
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    end = PART.lastIndex;
  }
  return end === t.length ? Math.round(total) : undefined;
}

/** A flag parser: a duration ("10m") or a bare number in `bareUnit`; the value in `bareUnit`. */
export function durationFlag(name: string, bareUnit: "ms" | "s") {
  return (value: string): number => {
    if (/^\d+$/.test(value.trim())) return Number(value);
    const ms = parseDuration(value);
    if (ms === undefined) {
      throw new UsageError(
        `${name} must be a duration like 90s, 10m, 1h30m or 2d (a bare number is ${bareUnit === "s" ? "seconds" : "milliseconds"}), not "${value}"`,
      );
    }
    return bareUnit === "s" ? Math.round(ms / 1000) : ms;
  };
}

/**
 * A point in time for `--since` (or `flag`): a duration back from `now` ("10m"), an ISO date/time ("2026-11-24T10:00Z"), or
 * epoch milliseconds (what the flag took before). Epoch milliseconds out.
 */
export function parseSince(value: string, now: number = Date.now(), flag = "--since"): number {
  const v = value.trim();
  if (/^\d{10,}$/.test(v)) return Number(v);
  const ms = parseDuration(v);
  if (ms !== undefined) return now - ms;
  if (/^\d{4}-\d{2}-\d{2}/.test(v)) {
    const t = Date.parse(v);
    if (!Number.isNaN(t)) return t;
  }
  throw new UsageError(`${flag} must be a duration back from now (10m, 2h, 1d), an ISO time or epoch milliseconds, not "${value}"`);
}

/** How long ago `at` was, as a person reads it in a table: `just now`, `45s ago`, `3m ago`, `2h ago`, `4d ago`. Pure. */
/** A time before or after now as people say it: "3m ago", "in 2d" (a table's column; --json keeps the exact one). Pure. */
export function timeFromNow(at: number, now = Date.now()): string {
  if (at <= now + 4_000) return timeAgo(at, now);
  return `in ${timeAgo(now, at).replace(/ ago$/, "")}`;
}

export function timeAgo(at: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 5) return "just now";
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}
