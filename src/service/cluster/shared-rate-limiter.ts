// A user's rate limit as one quota across replicas. Counting every request in the database would put a round
// trip on every request, so each replica decides locally from the cluster's count as of its last sync plus its
// own requests since, and syncs every `syncMs` (one statement for all active users: add what this replica
// counted, read back the total). Windows are aligned to the clock (a minute window is a calendar minute) so that
// every replica counts into the same bucket.
//
// The quota can be passed by at most what the other replicas admit between two syncs (replicas x their rate x
// syncMs); a replica cut off from the database keeps deciding on what it last knew, so requests are never
// refused or admitted without limit because the database is slow.

import type { Queryable } from "../store/postgres/index.js";
import { rateHeaders, type RateDecision, type RateLimiting, type RateWindow } from "../ratelimit.js";

interface WindowCount {
  bucket: number;
  /** The cluster's count of this bucket at the last sync (this replica's synced requests included). */
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
  private syncing?: Promise<void>;
  private lastCleanup = 0;
  private failing = false;

  constructor(
    readonly windows: RateWindow[],
    private readonly options: SharedRateLimiterOptions,
  ) {
    this.timer = setInterval(() => void this.sync(), options.syncMs ?? 250);
    this.timer.unref();
  }

  private bucketOf(w: RateWindow, now: number): number {
    const ms = w.seconds * 1000;
    return Math.floor(now / ms) * ms;
  }

  hit(userId: string, now = Date.now()): RateDecision {
    let state = this.users.get(userId);
    if (!state) this.users.set(userId, (state = { counts: this.windows.map((w) => ({ bucket: this.bucketOf(w, now), synced: 0, pending: 0 })), lastHit: now }));
    state.lastHit = now;
    const counts: number[] = [];
    const resets: number[] = [];
    for (let i = 0; i < this.windows.length; i++) {
      const w = this.windows[i]!;
      const c = state.counts[i]!;
      const bucket = this.bucketOf(w, now);
      if (bucket !== c.bucket) state.counts[i] = { bucket, synced: 0, pending: 0 };
      counts.push(state.counts[i]!.synced + state.counts[i]!.pending);
      resets.push(bucket + w.seconds * 1000);
    }
    const decision = rateHeaders(this.windows, counts, resets, now);
    if (decision.allowed) for (const c of state.counts) c.pending++;
    return decision;
  }

  /** Add this replica's counts in the database and learn the cluster's. One at a time. */
  sync(now = Date.now()): Promise<void> {
    this.syncing ??= this.syncOnce(now).finally(() => (this.syncing = undefined));
    return this.syncing;
  }

  private async syncOnce(now: number): Promise<void> {
    const users: string[] = [];
    const names: string[] = [];
    const buckets: number[] = [];
    const adds: number[] = [];
    const sent = new Map<string, { count: WindowCount; add: number }>();
    for (const [userId, state] of this.users) {
      // Users idle for longer than the longest window are forgotten here (their buckets ended).
      if (now - state.lastHit > Math.max(...this.windows.map((w) => w.seconds * 1000))) {
        this.users.delete(userId);
        continue;
      }
      state.counts.forEach((c, i) => {
        users.push(userId);
        names.push(this.windows[i]!.name);
        buckets.push(c.bucket);
        adds.push(c.pending);
        sent.set(`${userId}\u0000${this.windows[i]!.name}\u0000${c.bucket}`, { count: c, add: c.pending });
      });
    }
    if (users.length === 0) return;
    try {
      const { rows } = await this.options.db.query<{ user_id: string; window_name: string; bucket: number; n: number }>(
        `INSERT INTO svc_rate_counts AS r (user_id, window_name, bucket, count)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
         ON CONFLICT (user_id, window_name, bucket) DO UPDATE SET count = r.count + excluded.count
         RETURNING user_id, window_name, bucket, count AS n`,
        [users, names, buckets, adds],
      );
      for (const row of rows) {
        const entry = sent.get(`${row.user_id}\u0000${row.window_name}\u0000${row.bucket}`);
        if (!entry) continue;
        // The total includes what was just added; requests counted during the query stay pending.
        entry.count.pending -= entry.add;
        entry.count.synced = row.n;
      }
      if (now - this.lastCleanup > 60_000) {
        this.lastCleanup = now;
        const longest = Math.max(...this.windows.map((w) => w.seconds * 1000));
        await this.options.db.query("DELETE FROM svc_rate_counts WHERE bucket < $1", [now - 2 * longest]);
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
