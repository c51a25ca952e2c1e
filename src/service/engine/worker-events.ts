// The life of a worker as the service sees it, as typed events. The worker registry (workers.ts) is the one owner
// of a worker's state and the one source of these events; the scaler, the load balancer's pool and the release
// manager subscribe instead of telling each other.
//
//   known ─▶ addressed* ─▶ registered ─▶ ready ─▶ (promoted) ─▶ draining ─▶ gone
//
// `addressed` may come before or after `registered`; a worker may be `gone` from any point.

import type { WorkerEntry } from "./types.js";

/**
 * How a worker showed it has connected: svc's register route, a take before any register (a worker that outlived
 * a restart of the service), the first call of a provider worker (the SDK never registers), or the service itself
 * for a prebuilt image that cannot register (its /ping decides the rest).
 */
export type RegisteredHow = "register" | "take" | "provider-call" | "image";

/** How a worker showed it can take work: registered (a queue endpoint's), or a first /ping 200 (a load-balanced one's). */
export type ReadyHow = RegisteredHow | "ping";

export interface WorkerEventMap {
  /** First known to the service: started or adopted by the scaler, or first seen calling with a valid token. */
  known: { worker: WorkerEntry };
  /** Its driver said where it is reachable (`worker.reach`). */
  addressed: { worker: WorkerEntry };
  /** It connected (again: a worker may register twice); `worker.serves` holds a load-balanced worker's server. */
  registered: { worker: WorkerEntry; how: RegisteredHow };
  /** It can take work, once per worker: a release's probe has come up. */
  ready: { worker: WorkerEntry; how: ReadyHow };
  /** A release switched: the probe takes work from now on. */
  promoted: { worker: WorkerEntry };
  /** It takes no more work and is being stopped. */
  draining: { worker: WorkerEntry };
  /** It ended; `died`: how, in words, when it ended unasked. Its jobs are back in the queue. */
  gone: { worker: WorkerEntry; died?: string };
}

export type WorkerEventName = keyof WorkerEventMap;
type Listener<K extends WorkerEventName> = (event: WorkerEventMap[K]) => void;

/**
 * Synchronous, in order of subscription. A listener runs inside the registry's change, so it must not throw: one
 * that does is reported through `onListenerError` and the others still run.
 */
export class WorkerEvents {
  private readonly listeners: { [K in WorkerEventName]?: Listener<K>[] } = {};

  constructor(
    private readonly onListenerError: (event: WorkerEventName, err: unknown) => void = (event, err) =>
      console.error(`a listener of the worker event "${event}" failed:`, err),
  ) {}

  /** Subscribe; the function returned unsubscribes. */
  on<K extends WorkerEventName>(event: K, listener: Listener<K>): () => void {
    const list = (this.listeners[event] ??= []) as Listener<K>[];
    list.push(listener);
    return () => {
      const i = list.indexOf(listener);
      if (i >= 0) list.splice(i, 1);
    };
  }

  emit<K extends WorkerEventName>(event: K, payload: WorkerEventMap[K]): void {
    const list = this.listeners[event] as Listener<K>[] | undefined;
    if (!list) return;
    for (const listener of [...list]) {
      try {
        listener(payload);
      } catch (err) {
        this.onListenerError(event, err);
      }
    }
  }
}
