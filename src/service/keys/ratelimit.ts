// Per-user rate limits in fixed windows (minute, hour, day by default). O(1) time and memory per request:
// one counter and one reset time per user and window, no per-request log. Answers carry the state as
// structured-field lists (RFC 9651), as draft-ietf-httpapi-ratelimit-headers describes:
//   RateLimit: "minute";r=59;t=42, "hour";r=999;t=3342, "day";r=9999;t=83342
//   RateLimit-Policy: "minute";q=60;w=60, "hour";q=1000;w=3600, "day";q=10000;w=86400

export interface RateWindow {
  /** Names the window in headers and in the 429 detail (e.g. "minute"). */
  name: string;
  /** Window length in seconds. */
  seconds: number;
  /** Requests allowed per window and user. */
  quota: number;
}

/**
 * Defaults are generous: one user driving the job API at the benchmark rate (thousands of /run per second)
 * must not be throttled on a self-hosted box. Operators lower them with `rateLimits`.
 */
export const DEFAULT_RATE_WINDOWS: RateWindow[] = [
  { name: "minute", seconds: 60, quota: 1_000_000 },
  { name: "hour", seconds: 3600, quota: 20_000_000 },
  { name: "day", seconds: 86_400, quota: 200_000_000 },
];

export interface RateDecision {
  allowed: boolean;
  /** The exceeded window (when not allowed): the one that resets last. */
  exceeded?: RateWindow;
  /** Whole seconds until the exceeded window resets (Retry-After). */
  retryAfter?: number;
  /** `RateLimit` header value. */
  rateLimit: string;
  /** `RateLimit-Policy` header value. */
  policy: string;
}

/** What the management API asks of a rate limiter (this file's, per replica; cluster/shared-rate-limiter.ts). */
export interface RateLimiting {
  readonly windows: RateWindow[];
  hit(userId: string, now?: number): RateDecision;
}

const policies = new WeakMap<RateWindow[], { policy: string; prefixes: string[] }>();

/** The decision and headers for counts already made in each window (resets: epoch ms). Pure but for a cache. */
export function rateHeaders(windows: RateWindow[], counts: readonly number[], resets: readonly number[], now: number): RateDecision {
  let texts = policies.get(windows);
  if (!texts) {
    texts = {
      policy: windows.map((w) => `${sfString(w.name)};q=${w.quota};w=${w.seconds}`).join(", "),
      prefixes: windows.map((w, i) => `${i > 0 ? ", " : ""}${sfString(w.name)};r=`),
    };
    policies.set(windows, texts);
  }
  let exceeded: number | undefined;
  let header = "";
  for (let i = 0; i < windows.length; i++) {
    const w = windows[i]!;
    if (counts[i]! >= w.quota && (exceeded === undefined || resets[i]! > resets[exceeded]!)) exceeded = i;
  }
  for (let i = 0; i < windows.length; i++) {
    // Remaining after this request, when it is admitted.
    const used = counts[i]! + (exceeded === undefined ? 1 : 0);
    header += `${texts.prefixes[i]}${Math.max(0, windows[i]!.quota - used)};t=${Math.max(0, Math.ceil((resets[i]! - now) / 1000))}`;
  }
  if (exceeded === undefined) return { allowed: true, rateLimit: header, policy: texts.policy };
  return {
    allowed: false,
    exceeded: windows[exceeded],
    retryAfter: Math.max(1, Math.ceil((resets[exceeded]! - now) / 1000)),
    rateLimit: header,
    policy: texts.policy,
  };
}

interface UserWindows {
  counts: number[];
  resets: number[];
}

/** A structured-field string: quotes and backslashes escaped (RFC 9651 sf-string). */
function sfString(s: string): string {
  return `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

export class RateLimiter implements RateLimiting {
  private readonly users = new Map<string, UserWindows>();
  /** `RateLimit-Policy`: the same on every answer. */
  readonly policy: string;

  constructor(readonly windows: RateWindow[] = DEFAULT_RATE_WINDOWS) {
    for (const w of windows) {
      if (!(w.seconds > 0) || !Number.isInteger(w.quota) || w.quota < 0 || !/^[a-z][a-z0-9_-]*$/.test(w.name)) {
        throw new Error(`invalid rate window ${JSON.stringify(w)}`);
      }
    }
    this.policy = rateHeaders(
      windows,
      windows.map(() => 0),
      windows.map(() => 0),
      0,
    ).policy;
  }

  /** Count one request of `userId` (unless refused) and say whether it may proceed. */
  hit(userId: string, now = Date.now()): RateDecision {
    let state = this.users.get(userId);
    if (!state) {
      state = { counts: this.windows.map(() => 0), resets: this.windows.map((w) => now + w.seconds * 1000) };
      this.users.set(userId, state);
    }
    for (let i = 0; i < this.windows.length; i++) {
      if (now >= state.resets[i]!) {
        state.counts[i] = 0;
        state.resets[i] = now + this.windows[i]!.seconds * 1000;
      }
    }
    const decision = rateHeaders(this.windows, state.counts, state.resets, now);
    // A refused request does not count: a client backing off as told gets its full quota after the reset.
    if (decision.allowed) for (let i = 0; i < this.windows.length; i++) state.counts[i]!++;
    return decision;
  }
}

/** Parse a `name=quota,name=quota` list (e.g. "minute=60,hour=1000") over the default windows. */
export function parseRateLimits(text: string): RateWindow[] {
  const windows = DEFAULT_RATE_WINDOWS.map((w) => ({ ...w }));
  for (const part of text
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([a-z]+)=(\d+)(?:\/(\d+)s)?$/.exec(part);
    const w = m && windows.find((x) => x.name === m[1]);
    if (!m || !w) throw new Error(`"${part}" is not <minute|hour|day>=<quota>[/<seconds>s]`);
    w.quota = Number(m[2]);
    if (m[3]) w.seconds = Number(m[3]);
  }
  return windows;
}
