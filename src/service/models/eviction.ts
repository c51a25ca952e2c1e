// Which models leave the host's model cache when it grows past the size the operator set: the least recently
// used first, never one a running worker uses or one being fetched for a worker about to start. Pure.

export interface CachedModel {
  /** "org/name@revision". */
  key: string;
  bytes: number;
  /** When a worker last started with it (or it was fetched), ms. */
  lastUsed: number;
}

export interface EvictionPlan {
  /** The models to remove, least recently used first. */
  evict: string[];
  /** The cache's size once they are gone. */
  bytesAfter: number;
  /** Still past the limit after evicting all it may (what is left is in use): said to the operator. */
  overLimit: boolean;
}

/** The models to evict so the cache holds at most `limitBytes`, keeping every model in `keep`. Pure. */
export function planEviction(models: readonly CachedModel[], limitBytes: number, keep: ReadonlySet<string>): EvictionPlan {
  let total = models.reduce((sum, m) => sum + m.bytes, 0);
  const evict: string[] = [];
  const candidates = models.filter((m) => !keep.has(m.key)).sort((a, b) => a.lastUsed - b.lastUsed || a.key.localeCompare(b.key));
  for (const m of candidates) {
    if (total <= limitBytes) break;
    evict.push(m.key);
    total -= m.bytes;
  }
  return { evict, bytesAfter: total, overLimit: total > limitBytes };
}
