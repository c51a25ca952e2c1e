// The endpoints the service serves, in memory: one place that inserts, replaces and removes them, keeping what
// the service counted (completed, failed, retried) when a deploy or an update replaces a row, and keeping the
// job engine's view in step. Readers see a ReadonlyMap; writers call upsert/remove; others subscribe.

import type { JobEngine } from "../engine/index.js";
import { engineEndpoint } from "./rows.js";
import type { EndpointRow } from "../store/types.js";

export type EndpointChange = { type: "upsert"; row: EndpointRow; before: EndpointRow | undefined } | { type: "remove"; row: EndpointRow };

export class EndpointRegistry implements ReadonlyMap<string, EndpointRow> {
  private readonly rows = new Map<string, EndpointRow>();
  private readonly listeners = new Set<(change: EndpointChange) => void>();

  constructor(private readonly engine: Pick<JobEngine, "endpoints">) {}

  /**
   * Insert or replace a row (as written to the store). A replaced row keeps the counters the service has kept
   * since it was loaded: the new row comes from a plan made before the latest jobs ended.
   */
  upsert(row: EndpointRow): EndpointRow {
    const before = this.rows.get(row.id);
    const kept = before ? { ...row, completed: before.completed, failed: before.failed, retried: before.retried } : row;
    this.rows.set(row.id, kept);
    this.engine.endpoints.set(row.id, engineEndpoint(kept));
    this.emit({ type: "upsert", row: kept, before });
    return kept;
  }

  /** Forget an endpoint (its jobs and logs are the engine's to drop). */
  remove(id: string): EndpointRow | undefined {
    const row = this.rows.get(id);
    if (!row) return undefined;
    this.rows.delete(id);
    this.emit({ type: "remove", row });
    return row;
  }

  onChange(listener: (change: EndpointChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(change: EndpointChange): void {
    for (const listener of this.listeners) listener(change);
  }

  get size(): number {
    return this.rows.size;
  }
  get(id: string): EndpointRow | undefined {
    return this.rows.get(id);
  }
  has(id: string): boolean {
    return this.rows.has(id);
  }
  keys(): MapIterator<string> {
    return this.rows.keys();
  }
  values(): MapIterator<EndpointRow> {
    return this.rows.values();
  }
  entries(): MapIterator<[string, EndpointRow]> {
    return this.rows.entries();
  }
  forEach(fn: (value: EndpointRow, key: string, map: ReadonlyMap<string, EndpointRow>) => void): void {
    for (const [key, value] of this.rows) fn(value, key, this);
  }
  [Symbol.iterator](): MapIterator<[string, EndpointRow]> {
    return this.rows.entries();
  }
}
