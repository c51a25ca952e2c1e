// A user's rate limit as one quota across replicas. Counting every request in the database would put a round
// trip on every request, so each replica decides locally from the cluster's count as of its last sync plus its
// own requests since, and syncs every `syncMs` (one statement for all active users: add what this replica
// counted, read back the cluster's window and count). As with one process's limiter, a user's window starts at
// their first request and the next one at their first request after it ended; the database keeps the window
// the first replica to report it started, and every replica adopts it.
//
// The quota can be passed by at most what the other replicas admit between two syncs (replicas x their rate x
// syncMs); a replica cut off from the database keeps deciding on what it last knew, so requests are neither
// refused nor admitted without limit because the database is slow.

import type { Queryable } from "../store/queryable.js";
import { rateHeaders, type RateDecision, type RateLimiting, type RateWindow } from "../keys/ratelimit.js";

interface WindowCount {
  startedAt: number;
  /** The cluster's count of this window at the last sync (this replica's synced requests included). */
  synced: number;
  /** This replica's requests not yet added in the database. */
  pending: number;
}

export interface SharedRateLimiterOptions {
  db: Queryable;
  syncMs?: number;
  /** A sync failed (said once until one succeeds again). */
  onError?(err: unknown): void;
}

export class SharedRateLimiter implements RateLimiting {
  private readonly users = new Map<string, { counts: WindowCount[]; lastHit: number }>();
  private readonly timer: NodeJS.Timeout;
  private readonly longestMs: number;
  private syncing?: Promise<void>;
  private lastCleanup = 0;
  private failing = false;

  constructor(
    readonly windows: RateWindow[],
    private readonly options: SharedRateLimiterOptions,
  ) {
    this.longestMs = Math.max(...windows.map((w) => w.seconds * 1000));
    this.timer = setInterval(() => void this.sync(), options.syncMs ?? 250);
    this.timer.unref();
  }

  hit(userId: string, now = Date.now()): RateDecision {
    let state = this.users.get(userId);
    if (!state) this.users.set(userId, (state = { counts: this.windows.map(() => ({ startedAt: now, synced: 0, pending: 0 })), lastHit: now }));
    state.lastHit = now;
    const counts: number[] = [];
    const resets: number[] = [];
    for (let i = 0; i < this.windows.length; i++) {
      const length = this.windows[i]!.seconds * 1000;
      let c = state.counts[i]!;
      if (now >= c.startedAt + length) state.counts[i] = c = { startedAt: now, synced: 0, pending: 0 };
      counts.push(c.synced + c.pending);
      resets.push(c.startedAt + length);
    }
    const decision = rateHeaders(this.windows, counts, resets, now);
    // A refused request does not count: a client backing off as told gets its full quota after the reset.
    if (decision.allowed) for (const c of state.counts) c.pending++;
    return decision;
  }

  /** Add this replica's counts in the database and learn the cluster's. One at a time. */
  sync(now = Date.now()): Promise<void> {
    this.syncing ??= this.syncOnce(now).finally(() => (this.syncing = undefined));
    return this.syncing;
  }

  private async syncOnce(now: number): Promise<void> {
    const rows = { users: [] as string[], names: [] as string[], starts: [] as number[], lengths: [] as number[], adds: [] as number[] };
    const sent = new Map<string, { count: WindowCount; add: number }>();
    for (const [userId, state] of this.users) {
      // A user idle for longer than the longest window has nothing left to count.
      if (now - state.lastHit > this.longestMs) {
        this.users.delete(userId);
        continue;
      }
      state.counts.forEach((c, i) => {
        const w = this.windows[i]!;
        rows.users.push(userId);
        rows.names.push(w.name);
        rows.starts.push(c.startedAt);
        rows.lengths.push(w.seconds * 1000);
        rows.adds.push(c.pending);
        sent.set(`${userId}\u0000${w.name}`, { count: c, add: c.pending });
      });
    }
    if (rows.users.length === 0) return;
    try {
      // A window that had ended when this replica's began is replaced by this replica's; else the counts add up.
      const { rows: totals } = await this.options.db.query<{ user_id: string; window_name: string; started_at: number; count: number }>(
        `INSERT INTO svc_rate_windows AS r (user_id, window_name, started_at, length_ms, count)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
         ON CONFLICT (user_id, window_name) DO UPDATE SET
           count = CASE WHEN r.started_at + r.length_ms <= excluded.started_at THEN excluded.count ELSE r.count + excluded.count END,
           started_at = CASE WHEN r.started_at + r.length_ms <= excluded.started_at THEN excluded.started_at ELSE r.started_at END,
           length_ms = excluded.length_ms
         RETURNING user_id, window_name, started_at, count`,
        [rows.users, rows.names, rows.starts, rows.lengths, rows.adds],
      );
      for (const total of totals) {
        const entry = sent.get(`${total.user_id}\u0000${total.window_name}`);
        if (!entry) continue;
        // The total includes what was just added; requests counted during the query stay pending.
        entry.count.pending -= entry.add;
        entry.count.synced = total.count;
        entry.count.startedAt = total.started_at;
      }
      if (now - this.lastCleanup > 60_000) {
        this.lastCleanup = now;
        await this.options.db.query("DELETE FROM svc_rate_windows WHERE started_at + length_ms < $1", [now - this.longestMs]);
      }
      this.failing = false;
    } catch (err) {
      // The counts stay pending and go with the next sync. Said once per outage, not every sync.
      if (!this.failing) this.options.onError?.(err);
      this.failing = true;
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sync();
  }
}
