// What one slow client may cost the service: how long an unread answer is kept, how many log followers a user
// and the service hold, how far a follower may fall behind, and one shared Buffer per large job output (60
// readers of one 8 MB output hold 8 MB, not 480 MB). docs/service.md ("Slow clients") describes them.

import { HttpProblem } from "./problems.js";

export interface ClientLimits {
  /** An answer whose client reads nothing for this long (its socket stays full) is dropped: the connection closes. */
  sendStallMs: number;
  /** Concurrent log followers (logs?follow=1) of one user; beyond it 429. */
  followersPerUser: number;
  /** Concurrent log followers in total; beyond it 503. */
  followersTotal: number;
  /** A follower with more than this many bytes queued and unread is dropped. */
  followerQueueBytes: number;
  /** Bytes of job outputs held for answers still being sent; a new large output beyond it is 503. */
  pinnedOutputBytes: number;
}

export const DEFAULT_CLIENT_LIMITS: ClientLimits = {
  sendStallMs: 30_000,
  followersPerUser: 10,
  followersTotal: 200,
  followerQueueBytes: 1024 * 1024,
  pinnedOutputBytes: 256 * 1024 * 1024,
};

/** Seconds a refused follower is told to wait (Retry-After). */
const FOLLOWER_RETRY_S = 5;

/** Counts log followers per user and in total; `admit` throws the 429/503 a follower beyond a cap gets. */
export class FollowerGate {
  private readonly perUser = new Map<string, number>();
  private total = 0;

  constructor(private readonly limits: ClientLimits) {}

  /** Take a follower slot; the returned function gives it back (once). */
  admit(userId: string): () => void {
    const mine = this.perUser.get(userId) ?? 0;
    const retry = { "retry-after": String(FOLLOWER_RETRY_S) };
    if (mine >= this.limits.followersPerUser) {
      throw new HttpProblem(429, `This user already follows ${mine} log streams (at most ${this.limits.followersPerUser} at once); close one or retry later`, {
        headers: retry,
      });
    }
    if (this.total >= this.limits.followersTotal) {
      throw new HttpProblem(503, `The service already serves ${this.total} log followers (its limit); retry later`, { headers: retry });
    }
    this.perUser.set(userId, mine + 1);
    this.total++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.perUser.get(userId) ?? 1) - 1;
      if (left > 0) this.perUser.set(userId, left);
      else this.perUser.delete(userId);
    };
  }
}

/** Outputs shorter than this are sent as they are: sharing pays off only for large ones. */
export const SHARED_OUTPUT_MIN = 64 * 1024;
/** A shared output stays this long after its last reader finished, for the next poll of the same job. */
const SHARED_OUTPUT_LINGER_MS = 5_000;

interface SharedEntry {
  bytes: Promise<Buffer>;
  size: number;
  readers: number;
  linger?: NodeJS.Timeout;
}

/**
 * One immutable Buffer per (job, completion) while answers send it: concurrent readers of the same output share
 * one read instead of each building its own copy. An entry goes away shortly after its last reader: nothing is
 * held for good. The bytes held are capped (ClientLimits.pinnedOutputBytes).
 */
export class SharedOutputs {
  private readonly entries = new Map<string, SharedEntry>();
  private bytes = 0;

  constructor(private readonly limits: ClientLimits) {}

  /** Bytes held now. */
  get heldBytes(): number {
    return this.bytes;
  }

  /**
   * The shared bytes under `key` (a job id and its completion time: a final output never changes), `size` bytes
   * long, read by `load` when no answer holds them yet; call `release` once the answer is sent or dropped. 503 when
   * holding a new output would pass the cap.
   */
  async acquire(key: string, size: number, load: () => Promise<Buffer | undefined>): Promise<{ buffer: Buffer; release: () => void }> {
    let entry = this.entries.get(key);
    if (!entry) {
      if (this.bytes + size > this.limits.pinnedOutputBytes) {
        throw new HttpProblem(503, "The service is sending too many large job outputs to slow clients right now; retry later", {
          headers: { "retry-after": "5" },
        });
      }
      entry = { bytes: load().then((b) => b ?? Buffer.alloc(0)), size, readers: 0 };
      this.entries.set(key, entry);
      this.bytes += size;
    }
    if (entry.linger) {
      clearTimeout(entry.linger);
      entry.linger = undefined;
    }
    entry.readers++;
    const held = entry;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      if (--held.readers > 0) return;
      held.linger = setTimeout(() => {
        if (held.readers > 0 || this.entries.get(key) !== held) return;
        this.entries.delete(key);
        this.bytes -= held.size;
      }, SHARED_OUTPUT_LINGER_MS);
      held.linger.unref();
    };
    try {
      return { buffer: await held.bytes, release };
    } catch (err) {
      release();
      if (this.entries.get(key) === held) {
        // A failed read is not kept: the next reader tries again.
        this.entries.delete(key);
        this.bytes -= held.size;
      }
      throw err;
    }
  }
}

/** The limits and the state enforcing them, one set per service. */
export interface ClientGuards {
  limits: ClientLimits;
  followers: FollowerGate;
  outputs: SharedOutputs;
}

export function clientGuards(limits: ClientLimits): ClientGuards {
  return { limits, followers: new FollowerGate(limits), outputs: new SharedOutputs(limits) };
}
