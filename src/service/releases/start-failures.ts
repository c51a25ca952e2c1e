// Workers that failed to start, per endpoint: what /health counts as `workers.unhealthy` and what an endpoint's
// record shows as its last start error. Kept in memory: after a restart, the next failure tells again.

/** A start failure counts in /health for this long. */
export const UNHEALTHY_WINDOW_MS = 5 * 60_000;

export interface StartError {
  message: string;
  at: number;
  workerId: string;
}

export class StartFailures {
  private readonly recentByEndpoint = new Map<string, StartError[]>();
  private readonly lastByEndpoint = new Map<string, StartError>();

  constructor(private readonly windowMs = UNHEALTHY_WINDOW_MS) {}

  /** One worker's failure counts once: its own report (fail-start) and its exit are the same failure. */
  record(endpointId: string, workerId: string, message: string, at = Date.now()): void {
    const list = this.prune(endpointId, at);
    if (list.some((f) => f.workerId === workerId)) return;
    const failure = { message, at, workerId };
    list.push(failure);
    this.recentByEndpoint.set(endpointId, list);
    this.lastByEndpoint.set(endpointId, failure);
  }

  /** Workers of the endpoint that failed to start within the window. */
  unhealthy(endpointId: string, now = Date.now()): number {
    return this.prune(endpointId, now).length;
  }

  last(endpointId: string): { message: string; at: number } | null {
    const f = this.lastByEndpoint.get(endpointId);
    return f ? { message: f.message, at: f.at } : null;
  }

  forget(endpointId: string): void {
    this.recentByEndpoint.delete(endpointId);
    this.lastByEndpoint.delete(endpointId);
  }

  private prune(endpointId: string, now: number): StartError[] {
    const list = (this.recentByEndpoint.get(endpointId) ?? []).filter((f) => now - f.at < this.windowMs);
    if (list.length === 0) this.recentByEndpoint.delete(endpointId);
    else this.recentByEndpoint.set(endpointId, list);
    return list;
  }
}
