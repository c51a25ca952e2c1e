// Wake-ups between replicas: a replica that changed something (a job finished, a key was revoked, an endpoint
// deployed) says so on one PostgreSQL channel; every replica listening wakes whoever waits on those ids. A
// wake-up is a hint, never data: the woken always read the database again. Notices are coalesced per tick (one
// NOTIFY per topic however many changes a tick made), and a payload too large for NOTIFY becomes "everything
// of this topic". When the listening connection drops, notices sent meanwhile are lost, so after every
// (re)connection subscribers are told to re-read all they wait on (`onResync`).

import pg from "pg";
import type { Queryable } from "../store/queryable.js";

export const CHANGE_CHANNEL = "svc_changes";
/** NOTIFY's payload limit is 8000 bytes; ids are listed up to about this, then the notice says "all". */
const MAX_PAYLOAD = 7_000;

export interface ChangeNotice {
  topic: string;
  /** The changed ids; undefined: anything of the topic may have changed. */
  ids?: string[];
}

export interface ChangeFeed {
  /** Say that these ids of `topic` changed (committed already); sent with the tick's other notices. */
  publish(topic: string, ids: readonly string[]): void;
  subscribe(topic: string, fn: (ids: string[] | undefined) => void): () => void;
  /** The listener (re)connected: notices may have been missed; re-read what you wait on. */
  onResync(fn: () => void): () => void;
  /** Resolves once the listener is connected (the first time). */
  ready(): Promise<void>;
  close(): Promise<void>;
}

export interface ChangeFeedOptions {
  url: string;
  /** Where notices are sent (the store's pool). */
  db: Queryable;
  onError?(err: unknown): void;
}

/** The NOTIFY payloads for a tick's changes: one per topic, ids listed while they fit. Pure. */
export function noticePayloads(pending: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const out: string[] = [];
  for (const [topic, ids] of pending) {
    const listed = JSON.stringify({ t: topic, ids: [...ids] });
    out.push(Buffer.byteLength(listed) <= MAX_PAYLOAD ? listed : JSON.stringify({ t: topic }));
  }
  return out;
}

/** A payload read back; undefined for one that is not svc's. Pure. */
export function parseNotice(payload: string | undefined): ChangeNotice | undefined {
  try {
    const value = JSON.parse(payload ?? "") as { t?: unknown; ids?: unknown };
    if (typeof value.t !== "string") return undefined;
    return { topic: value.t, ids: Array.isArray(value.ids) ? value.ids.map(String) : undefined };
  } catch {
    return undefined;
  }
}

export function createChangeFeed(options: ChangeFeedOptions): ChangeFeed {
  const subscribers = new Map<string, Set<(ids: string[] | undefined) => void>>();
  const resyncs = new Set<() => void>();
  let pending = new Map<string, Set<string>>();
  let sendScheduled = false;
  let closed = false;
  let client: pg.Client | undefined;
  let retryMs = 100;
  let retryTimer: NodeJS.Timeout | undefined;
  let firstConnected: () => void;
  const connectedOnce = new Promise<void>((resolve) => (firstConnected = resolve));

  const deliver = (notice: ChangeNotice) => {
    for (const fn of subscribers.get(notice.topic) ?? []) fn(notice.ids);
  };

  const send = async () => {
    sendScheduled = false;
    const payloads = noticePayloads(pending);
    pending = new Map();
    for (const payload of payloads) {
      try {
        await options.db.query("SELECT pg_notify($1, $2)", [CHANGE_CHANNEL, payload]);
      } catch (err) {
        // The others miss this wake-up; they re-read on their polling fallback (and after any reconnection).
        options.onError?.(err);
      }
    }
  };

  const connect = async () => {
    if (closed) return;
    const next = new pg.Client({ connectionString: options.url, keepAlive: true, application_name: "svc-listen" });
    next.on("notification", (message) => {
      const notice = parseNotice(message.payload);
      if (notice) deliver(notice);
    });
    next.on("error", (err) => {
      options.onError?.(err);
      reconnect(next);
    });
    next.on("end", () => reconnect(next));
    try {
      await next.connect();
      await next.query(`LISTEN ${CHANGE_CHANNEL}`);
    } catch (err) {
      options.onError?.(err);
      reconnect(next);
      return;
    }
    if (closed) {
      await next.end();
      return;
    }
    client = next;
    retryMs = 100;
    firstConnected();
    for (const fn of resyncs) fn();
  };

  const reconnect = (broken: pg.Client) => {
    if (closed || retryTimer || (client !== undefined && client !== broken)) return;
    client = undefined;
    broken.end().catch(() => undefined /* already broken: nothing to close cleanly */);
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect();
    }, retryMs);
    retryTimer.unref();
    retryMs = Math.min(retryMs * 2, 2_000);
  };

  void connect();

  return {
    publish(topic, ids) {
      let set = pending.get(topic);
      if (!set) pending.set(topic, (set = new Set()));
      for (const id of ids) set.add(id);
      if (!sendScheduled) {
        sendScheduled = true;
        setImmediate(() => void send());
      }
    },
    subscribe(topic, fn) {
      let set = subscribers.get(topic);
      if (!set) subscribers.set(topic, (set = new Set()));
      set.add(fn);
      return () => set!.delete(fn);
    },
    onResync(fn) {
      resyncs.add(fn);
      return () => resyncs.delete(fn);
    },
    ready: () => connectedOnce,
    async close() {
      closed = true;
      if (retryTimer) clearTimeout(retryTimer);
      const current = client;
      client = undefined;
      await current?.end().catch(() => undefined /* closing: nothing left to do with it */);
    },
  };
}
