// A job's trace inside the worker: the traceparent the take handed over, as the handler's `ctx.trace`, and the
// job's span made the active one while the handler runs when the user's code uses OpenTelemetry.
//
// The runtime carries no OpenTelemetry package of its own: the user's bundle has its own copy of
// @opentelemetry/api, which keeps its registered parts (the context manager) on a global under a documented
// Symbol.for key, the same for every 1.x copy. The runtime reads that global: with no context manager registered
// there, nothing changes.

import type { JobTrace } from "svc/internal";

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The API's global registry (`@opentelemetry/api` src/internal/global-utils.ts) and its span's context key. */
const OTEL_API = Symbol.for("opentelemetry.js.api.1");
const SPAN_KEY = Symbol.for("OpenTelemetry Context Key SPAN");

/** A traceparent header's parts, or undefined for one that is not version 00 or not valid (all-zero ids). Pure. */
export function parseTraceparent(traceparent: string | undefined): JobTrace | undefined {
  const m = traceparent === undefined ? null : TRACEPARENT.exec(traceparent);
  if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return undefined;
  return { traceparent: traceparent!, traceId: m[1]!, spanId: m[2]!, sampled: (parseInt(m[3]!, 16) & 1) === 1 };
}

/** The trace context of a span made under `t` (same trace and sampling, `spanId` its own). Pure. */
export function childTrace(t: JobTrace, spanId: string): JobTrace {
  return { ...t, spanId, traceparent: `00-${t.traceId}-${spanId}-${t.sampled ? "01" : "00"}` };
}

interface OtelContext {
  setValue(key: symbol, value: unknown): OtelContext;
}

interface ContextManager {
  active(): OtelContext;
  with<R>(context: OtelContext, fn: () => R): R;
}

/** The job's span as the API's NonRecordingSpan is: a remote parent that records nothing itself. */
function remoteSpan(t: JobTrace): object {
  const spanContext = { traceId: t.traceId, spanId: t.spanId, traceFlags: t.sampled ? 1 : 0, isRemote: true };
  const span = {
    spanContext: () => spanContext,
    setAttribute: () => span,
    setAttributes: () => span,
    addEvent: () => span,
    addLink: () => span,
    addLinks: () => span,
    setStatus: () => span,
    updateName: () => span,
    end: () => undefined,
    isRecording: () => false,
    recordException: () => undefined,
  };
  return span;
}

/** The context manager the user's OpenTelemetry registered in this process, if any. */
function registeredContextManager(): ContextManager | undefined {
  const api = (globalThis as Record<symbol, { context?: Partial<ContextManager> } | undefined>)[OTEL_API];
  const manager = api?.context;
  return typeof manager?.with === "function" && typeof manager.active === "function" ? (manager as ContextManager) : undefined;
}

/** Run `fn` (the handler's call) with the job's span active for the user's OpenTelemetry, where it has a context manager. */
export function runInTrace<R>(t: JobTrace | undefined, fn: () => R): R {
  const manager = t && registeredContextManager();
  if (!t || !manager) return fn();
  return manager.with(manager.active().setValue(SPAN_KEY, remoteSpan(t)), fn);
}
