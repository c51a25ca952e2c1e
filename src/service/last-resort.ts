// The service process's last resort against errors nobody handled. Every stream and promise on a request's
// path has its own handler; this is for the one that was missed. Exiting would stop every tenant's jobs because
// of one request, so the process logs the error and keeps serving. The state a request's handler owns is lost
// with its request; the durable state is in the store, which commits whole transactions or nothing.
//
// The same error repeated (a bug hit by every request) is logged once with its stack and then counted, a line
// a minute at most, so the log stays readable.

export interface LastResortStats {
  /** Errors caught since the handlers were installed. */
  caught: number;
}

export interface LastResort {
  stats: LastResortStats;
  uninstall(): void;
}

const REPEAT_LOG_INTERVAL_MS = 60_000;

/** What to log for each stray error: pure of process state, so the repeat rule is testable alone. */
export function strayErrorReporter(log: (message: string) => void, now: () => number = Date.now) {
  const stats: LastResortStats = { caught: 0 };
  const seen = new Map<string, { count: number; loggedAt: number; loggedCount: number }>();

  const report = (kind: string, reason: unknown) => {
    stats.caught++;
    const err = reason instanceof Error ? reason : new Error(String(reason));
    const key = `${kind}:${err.name}:${err.message}`;
    const entry = seen.get(key);
    const t = now();
    if (!entry) {
      // Bounded: a flood of distinct messages must not grow this map without limit.
      if (seen.size >= 1000) seen.clear();
      seen.set(key, { count: 1, loggedAt: t, loggedCount: 1 });
      log(`${kind} (the service keeps serving): ${err.stack ?? err.message}`);
      return;
    }
    entry.count++;
    if (t - entry.loggedAt >= REPEAT_LOG_INTERVAL_MS) {
      log(`${kind} (the service keeps serving): ${err.message} (${entry.count - entry.loggedCount} more times)`);
      entry.loggedAt = t;
      entry.loggedCount = entry.count;
    }
  };
  return { stats, report };
}

export function installLastResort(log: (message: string) => void): LastResort {
  const { stats, report } = strayErrorReporter(log);
  const onException = (err: unknown) => report("uncaught exception", err);
  const onRejection = (reason: unknown) => report("unhandled rejection", reason);
  process.on("uncaughtException", onException);
  process.on("unhandledRejection", onRejection);
  return {
    stats,
    uninstall() {
      process.off("uncaughtException", onException);
      process.off("unhandledRejection", onRejection);
    },
  };
}
