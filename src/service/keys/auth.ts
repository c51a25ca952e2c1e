// API keys: stored as sha256 hashes, looked up by hash and compared in constant time. A key belongs to a user
// and carries scopes:
//   "admin"               everything the user owns
//   "jobs:*"              the job API of every endpoint of the user
//   "jobs:<endpointId>"   the job API of one endpoint
//   "metrics"             Prometheus' /metrics (a key of the operator's user), endpoints' recent series, usage
//   "worker:<endpointId>" a worker token: only /_worker/v1 routes, bound to one worker (the key id) and endpoint
// Rate limits and finer scopes can be added as further scope strings without a schema change.

import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { KeyRow, Store } from "../store/types.js";

export const DEFAULT_USER = "default";

export interface Principal {
  keyId: string;
  userId: string;
  scopes: string[];
  /** Set for worker tokens. */
  worker?: { workerId: string; endpointId: string };
  /** Epoch ms after which the key is refused (checked on every request, cache or not). */
  expiresAt?: number;
}

export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

export function newKey(prefix: "svc" | "svcw"): string {
  return `${prefix}_${randomBytes(24).toString("base64url")}`;
}

// Ids and leases are made thousands of times a second on the job API's hot path: they are cut from a pool of
// random bytes refilled 4 KB at a time (one getrandom call instead of one per id; the bytes are the same CSPRNG's).
const RANDOM_POOL_SIZE = 4096;
let randomPool = Buffer.alloc(0);
let randomOffset = 0;

/** `bytes` fresh random bytes (a view into the pool: use at once, do not keep). */
function poolBytes(bytes: number): Buffer {
  if (bytes > RANDOM_POOL_SIZE) return randomBytes(bytes);
  if (randomOffset + bytes > randomPool.length) {
    randomPool = randomBytes(RANDOM_POOL_SIZE);
    randomOffset = 0;
  }
  const view = randomPool.subarray(randomOffset, randomOffset + bytes);
  randomOffset += bytes;
  return view;
}

export function newId(bytes = 8): string {
  // Lowercase letters and digits only: ids appear in URLs and match the CLI's id pattern.
  return poolBytes(bytes).toString("hex");
}

/** A random token for URLs and headers (base64url), e.g. a job's lease. */
export function newToken(bytes = 12): string {
  return poolBytes(bytes).toString("base64url");
}

export function principalOf(row: KeyRow): Principal {
  const workerScope = row.scopes.find((s) => s.startsWith("worker:"));
  return {
    keyId: row.id,
    userId: row.userId,
    scopes: row.scopes,
    worker: workerScope ? { workerId: row.id, endpointId: workerScope.slice("worker:".length) } : undefined,
    expiresAt: row.expiresAt ?? undefined,
  };
}

export function canUseJobs(p: Principal, endpointId: string): boolean {
  if (p.worker) return false;
  return p.scopes.includes("admin") || p.scopes.includes("jobs:*") || p.scopes.includes(`jobs:${endpointId}`);
}

export function isAdmin(p: Principal): boolean {
  return !p.worker && p.scopes.includes("admin");
}

function expired(p: Principal): boolean {
  return p.expiresAt !== undefined && Date.now() >= p.expiresAt;
}

export class KeyRing {
  // Answers by key string: a hit costs a map lookup, no hash (every request of the job API and the LB proxy
  // authenticates). Keys are already held in memory while their requests are served.
  private readonly cache = new Map<string, { principal: Principal | null; checkedAt: number }>();

  /**
   * `recheckMs`: how long an answer is trusted before the store is asked again. One service revokes through
   * itself and forgets at once (Infinity); replicas sharing a database learn of another's revocation by asking
   * again, so that is how long a revoked key may still pass on them.
   */
  constructor(
    private readonly store: Store,
    private readonly recheckMs = Infinity,
  ) {}

  /** The principal of a key, or undefined when the key is unknown or revoked. */
  async authenticate(key: string): Promise<Principal | undefined> {
    const cached = this.cache.get(key);
    const checkedAt = Date.now();
    // One reading of the clock decides: asking known() here read it again, and a request at the last millisecond
    // of the answer's life was refused with 401 when the clock ticked between the two readings.
    if (cached && checkedAt - cached.checkedAt < this.recheckMs) return this.knownEvenIfStale(key);
    const hash = hashKey(key);
    let row: Awaited<ReturnType<Store["keyByHash"]>>;
    try {
      row = await this.store.keyByHash(hash);
    } catch (err) {
      // The database cannot be asked again (an outage): a key it accepted before keeps its answer meanwhile.
      // Nothing can be revoked while it is down either, so this admits nothing the database would refuse.
      if (cached) return this.knownEvenIfStale(key);
      throw err;
    }
    const valid = row !== undefined && row.revokedAt === null && timingSafeEqual(Buffer.from(row.hash, "hex"), Buffer.from(hash, "hex"));
    const principal = valid ? principalOf(row!) : null;
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(key, { principal, checkedAt });
    return principal && !expired(principal) ? principal : undefined;
  }

  private knownEvenIfStale(key: string): Principal | undefined {
    const cached = this.cache.get(key);
    return cached?.principal && !expired(cached.principal) ? cached.principal : undefined;
  }

  /** The principal of a key already known to be valid (no store lookup): the LB front's fast path. */
  known(key: string): Principal | undefined {
    if (this.recheckMs !== Infinity && !(Date.now() - (this.cache.get(key)?.checkedAt ?? -Infinity) < this.recheckMs)) return undefined;
    return this.knownEvenIfStale(key);
  }

  /** Forget cached answers (after a key was revoked or deleted). */
  forget(): void {
    this.cache.clear();
  }
}
