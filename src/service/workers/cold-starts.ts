// Cold starts: a worker started for jobs waiting on an endpoint that had none, timed from then until its first
// job is taken. Counted per endpoint for /health and the metrics.

export class ColdStarts {
  /** Per endpoint: how many, and the last one's ms. */
  readonly counts = new Map<string, { count: number; lastMs: number | null }>();
  /** Endpoints whose cold start is under way: since when. */
  private readonly pending = new Map<string, number>();

  /** A worker starts for jobs waiting on an endpoint with none (the first such start counts). */
  began(endpointId: string, now: number): void {
    if (!this.pending.has(endpointId)) this.pending.set(endpointId, now);
  }

  /** A job of the endpoint was taken: the cold start's ms when one was under way, else undefined. */
  taken(endpointId: string, now: number): number | undefined {
    const since = this.pending.get(endpointId);
    if (since === undefined) return undefined;
    this.pending.delete(endpointId);
    const entry = this.counts.get(endpointId) ?? { count: 0, lastMs: null };
    entry.count++;
    entry.lastMs = now - since;
    this.counts.set(endpointId, entry);
    return entry.lastMs;
  }
}
