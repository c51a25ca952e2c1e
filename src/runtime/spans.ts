// The runtime's own span of each handler's run, sent to the collector the service traces to: a trace then shows the
// worker side (how long the user's code ran, whether it failed, on which worker) without any OpenTelemetry in the
// user's code. The service tells the worker where (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT
// with /v1/traces, and OTEL_EXPORTER_OTLP_HEADERS); the spans go as OTLP/HTTP JSON, batched, written here rather
// than by OpenTelemetry's SDK (the runtime carries no dependency of the kind, trace.ts says why).

import { randomBytes } from "node:crypto";

/** One handler's run: a child of the job's run span (the traceparent its take handed over). */
export interface HandlerSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  startMs: number;
  endMs: number;
  ok: boolean;
  message?: string;
  attributes: Record<string, string | number>;
}

/** A span id: 8 random bytes, hex. */
export function newSpanId(): string {
  return randomBytes(8).toString("hex");
}

/** The traces URL and headers from the worker's environment, as OpenTelemetry's exporters read them; none: off. Pure. */
export function spanTarget(env: NodeJS.ProcessEnv): { url: string; headers: Record<string, string> } | undefined {
  const url =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || (env.OTEL_EXPORTER_OTLP_ENDPOINT ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/traces` : "");
  if (!url) return undefined;
  const headers: Record<string, string> = {};
  // "key=value,key2=value2", values URL-encoded (the OTLP exporter specification).
  for (const pair of (env.OTEL_EXPORTER_OTLP_TRACES_HEADERS || env.OTEL_EXPORTER_OTLP_HEADERS || "").split(",")) {
    const at = pair.indexOf("=");
    if (at <= 0) continue;
    headers[pair.slice(0, at).trim()] = decodeURIComponent(pair.slice(at + 1).trim());
  }
  return { url, headers };
}

type AnyValue = { stringValue: string } | { intValue: string } | { doubleValue: number };
const value = (v: string | number): AnyValue =>
  typeof v === "string" ? { stringValue: v } : Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
const attributes = (a: Record<string, string | number>) => Object.entries(a).map(([key, v]) => ({ key, value: value(v) }));
const nanos = (ms: number) => `${BigInt(Math.round(ms * 1000)) * 1000n}`;

/** The OTLP/HTTP JSON body of these spans from this resource. Pure. */
export function otlpBody(resource: Record<string, string | number>, spans: readonly HandlerSpan[]): object {
  return {
    resourceSpans: [
      {
        resource: { attributes: attributes(resource) },
        scopeSpans: [
          {
            scope: { name: "svc-runtime" },
            spans: spans.map((s) => ({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId,
              name: s.name,
              kind: 1, // INTERNAL
              startTimeUnixNano: nanos(s.startMs),
              endTimeUnixNano: nanos(s.endMs),
              attributes: attributes(s.attributes),
              // 1 OK, 2 ERROR
              status: s.ok ? { code: 1 } : { code: 2, ...(s.message ? { message: s.message } : {}) },
            })),
          },
        ],
      },
    ],
  };
}

/** How long finished spans wait for others before they are sent together. */
const BATCH_MS = 200;

export class SpanExporter {
  private pending: HandlerSpan[] = [];
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> = Promise.resolve();
  private failing = false;

  constructor(
    private readonly target: { url: string; headers: Record<string, string> },
    private readonly resource: Record<string, string | number>,
    private readonly note: (text: string) => void,
  ) {}

  add(span: HandlerSpan): void {
    this.pending.push(span);
    if (this.timer) return;
    this.timer = setTimeout(() => void this.flush(), BATCH_MS);
    this.timer.unref();
  }

  /** Send what is pending (the worker's exit waits for it). */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const spans = this.pending;
    this.pending = [];
    if (spans.length === 0) return this.sending;
    this.sending = this.sending.then(() => this.send(spans));
    return this.sending;
  }

  private async send(spans: HandlerSpan[]): Promise<void> {
    try {
      const res = await fetch(this.target.url, {
        method: "POST",
        headers: { ...this.target.headers, "content-type": "application/json" },
        body: JSON.stringify(otlpBody(this.resource, spans)),
        signal: AbortSignal.timeout(10_000),
      });
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`the collector answered ${res.status}`);
      this.failing = false;
    } catch (err) {
      // Telemetry is not worth holding a job back for: dropped, and said once until the collector answers again.
      if (!this.failing)
        this.note(
          `could not send ${spans.length} span(s) to ${this.target.url} (${err instanceof Error ? err.message : String(err)}); spans are dropped until it answers`,
        );
      this.failing = true;
    }
  }
}
