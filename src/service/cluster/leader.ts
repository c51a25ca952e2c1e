// Duties that must run once for the whole cluster (scaling workers, retention, webhook delivery) run on the
// replica holding a lease row in the database. The lease is taken and renewed by one conditional upsert timed by
// the database's clock, so replicas whose clocks disagree still agree on who leads; a holder that stops renewing
// (killed, cut off) loses it `ttlMs` later, and another replica takes over at its next attempt.
//
// A leader steps down on its own before the database could hand the lease to someone else: when it has not
// renewed for `ttlMs - renewMs` of its own time (measured from when the last successful renewal was SENT, so a
// slow answer only makes it step down earlier), it stops leading even if the database cannot be reached to say so.

import type { Queryable } from "../store/queryable.js";

export interface LeaderLeaseOptions {
  db: Queryable;
  /** The duty, e.g. "scaler". */
  name: string;
  /** This replica. */
  holder: string;
  /** Where this replica answers, kept with the lease for the others to name. */
  address?: string;
  /** This replica adopts jobs other replicas hand off (engine/handoff.ts): said with the lease, by its name. */
  adoptsHandoffs?: boolean;
  /** How long a lease lasts without renewal (default 10 s). */
  ttlMs?: number;
  /** How often the holder renews and the others try to take it (default ttl / 3). */
  renewMs?: number;
  /** Leading began (true) or ended (false). */
  onChange?(leading: boolean): void;
  /** After each attempt that did not get the lease: who holds it now (undefined: nobody, or it could not be read). */
  onHolder?(holder: LeaseHolder | undefined): void;
  /** A renewal or takeover attempt failed (the database is unreachable...): said, not thrown. */
  onError?(err: unknown): void;
  now?(): number;
}

export interface LeaderLease {
  readonly leading: boolean;
  /** Try at once, then keep trying every `renewMs`. */
  start(): Promise<void>;
  /** Stop trying and give the lease up (another replica takes it at its next attempt, not a ttl later). */
  stop(): Promise<void>;
}

export function createLeaderLease(options: LeaderLeaseOptions): LeaderLease {
  const ttlMs = options.ttlMs ?? 10_000;
  const renewMs = options.renewMs ?? Math.max(100, Math.floor(ttlMs / 3));
  const now = options.now ?? (() => performance.now());
  let leading = false;
  let renewedAt = -Infinity;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let attempt: Promise<void> = Promise.resolve();

  const set = (next: boolean) => {
    if (next === leading) return;
    leading = next;
    options.onChange?.(next);
  };

  const tryOnce = async () => {
    const sentAt = now();
    try {
      const { rows } = await options.db.query<{ holder: string }>(
        `INSERT INTO svc_leases (name, holder, acquired_at, expires_at, address, adopting) VALUES ($1, $2, svc_now_ms(), svc_now_ms() + $3, $4, $5)
         ON CONFLICT (name) DO UPDATE
           SET holder = excluded.holder, expires_at = excluded.expires_at, address = excluded.address, adopting = excluded.adopting,
               acquired_at = CASE WHEN svc_leases.holder = excluded.holder THEN svc_leases.acquired_at ELSE excluded.acquired_at END
           WHERE svc_leases.holder = excluded.holder OR svc_leases.expires_at < svc_now_ms()
         RETURNING holder`,
        [options.name, options.holder, ttlMs, options.address ?? null, options.adoptsHandoffs ? options.holder : null],
      );
      if (stopped) return;
      if (rows.length === 1) {
        renewedAt = sentAt;
        set(true);
      } else {
        set(false);
        if (options.onHolder) options.onHolder(await leaseHolder(options.db, options.name));
      }
    } catch (err) {
      options.onError?.(err);
      // Cut off: keep leading only while the lease surely still holds in the database.
      if (leading && now() - renewedAt > ttlMs - renewMs) set(false);
    }
  };

  let inFlight = false;
  const attemptNow = () => {
    inFlight = true;
    attempt = tryOnce().finally(() => {
      inFlight = false;
    });
    return attempt;
  };
  // A tick every renewMs: step down if the lease may have lapsed (an attempt may hang on a dead connection
  // without failing), then try again unless the last attempt is still waiting for its answer.
  const tick = () => {
    if (leading && now() - renewedAt > ttlMs - renewMs) set(false);
    if (!inFlight) void attemptNow();
  };

  return {
    get leading() {
      return leading;
    },
    async start() {
      stopped = false;
      await attemptNow();
      timer = setInterval(tick, renewMs);
      timer.unref();
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      // An attempt stuck on a dead connection is not waited for beyond a renewal period.
      await Promise.race([attempt.catch(() => undefined /* its error was reported through onError */), new Promise((r) => setTimeout(r, renewMs).unref())]);
      if (!leading) return;
      set(false);
      try {
        await options.db.query("DELETE FROM svc_leases WHERE name = $1 AND holder = $2", [options.name, options.holder]);
      } catch (err) {
        // Unreachable: the lease lapses by itself a ttl later.
        options.onError?.(err);
      }
    },
  };
}

export interface LeaseHolder {
  holder: string;
  address: string | null;
  /** The holder adopts hand-offs: it said so with its own name (an older svc writes no such column). */
  adoptsHandoffs: boolean;
}

/** Who holds a lease now (an expired one counts as nobody's), for messages that name them. */
export async function leaseHolder(db: Queryable, name: string): Promise<LeaseHolder | undefined> {
  const { rows } = await db.query<{ holder: string; address: string | null; adopting: string | null }>(
    "SELECT holder, address, adopting FROM svc_leases WHERE name = $1 AND expires_at >= svc_now_ms()",
    [name],
  );
  const row = rows[0];
  return row && { holder: row.holder, address: row.address, adoptsHandoffs: row.adopting === row.holder };
}
