// Replicas on one database each keep the endpoints, management records and secrets in memory (they are read on
// every request). What another replica changed (a deploy, an endpoint update or deletion, a template, a secret)
// is read again when the change feed says something changed (`round()`, at the change's commit) and, as the
// fallback for a notice lost while the listener reconnected, every `intervalMs`. Keys are not in this loop: the
// key ring forgets its answers on the feed's "keys" notices and asks the database again after its recheck period.
//
// Planning the endpoint changes is a pure diff of the registry against the stored rows; a round in which this
// replica changed its own registry while the rows were being read is skipped (the read may predate that change).
// A local change made before the round began may not have committed yet (the registry drops an endpoint, then its
// deletion joins the next batch): the round waits for what this replica wrote so far before it reads, or it would
// read the row still there and bring the deleted endpoint back.

import type { EndpointRegistry } from "../endpoints/registry.js";
import type { EndpointRow } from "../store/types.js";

export interface EndpointSyncPlan {
  upsert: EndpointRow[];
  remove: string[];
}

/** What makes the registry match the stored rows: new or changed rows, and rows the store no longer has. Pure. */
export function planEndpointSync(current: ReadonlyMap<string, EndpointRow>, stored: readonly EndpointRow[]): EndpointSyncPlan {
  const upsert: EndpointRow[] = [];
  const seen = new Set<string>();
  for (const row of stored) {
    seen.add(row.id);
    const have = current.get(row.id);
    if (!have || have.revision !== row.revision || have.updatedAt !== row.updatedAt || have.name !== row.name) upsert.push(row);
  }
  const remove = [...current.keys()].filter((id) => !seen.has(id));
  return { upsert, remove };
}

export interface ConfigSyncOptions {
  endpoints: EndpointRegistry;
  storedEndpoints(): Promise<EndpointRow[]>;
  /** Read the management records and secrets again. */
  reload(): Promise<void>;
  /** An endpoint another replica deleted: drop what this one holds of it (its queue, waiters, workers' view). */
  dropped(id: string): Promise<void>;
  /** Resolves once every change this replica wrote so far has committed (the engine's group commit). */
  localWritesSettled(): Promise<void>;
  intervalMs?: number;
  /** A round failed (the database is unreachable...): said once until one succeeds. */
  onError?(err: unknown): void;
}

export function startConfigSync(options: ConfigSyncOptions): { stop(): Promise<void>; round(): Promise<void> } {
  let localChanges = 0;
  const unsubscribe = options.endpoints.onChange(() => localChanges++);
  let failing = false;
  let running: Promise<void> | undefined;

  const roundOnce = async () => {
    const before = localChanges;
    try {
      await options.localWritesSettled();
      const [stored] = await Promise.all([options.storedEndpoints(), options.reload()]);
      if (localChanges !== before) return;
      const plan = planEndpointSync(options.endpoints, stored);
      for (const row of plan.upsert) options.endpoints.upsert(row);
      for (const id of plan.remove) options.endpoints.remove(id);
      // The registry's changes made by this round are not this replica's own.
      localChanges = before;
      for (const id of plan.remove) await options.dropped(id);
      failing = false;
    } catch (err) {
      if (!failing) options.onError?.(err);
      failing = true;
    }
  };
  // A round asked for while one runs goes after it: the running one may have read before the change it is told of.
  let again = false;
  let stopped = false;
  const round = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    if (running) {
      again = true;
      return running;
    }
    running = roundOnce().finally(() => {
      running = undefined;
      if (again) {
        again = false;
        void round();
      }
    });
    return running;
  };
  const timer = setInterval(() => void round(), options.intervalMs ?? 500);
  timer.unref();
  return {
    round,
    async stop() {
      stopped = true;
      clearInterval(timer);
      unsubscribe();
      await running;
    },
  };
}
