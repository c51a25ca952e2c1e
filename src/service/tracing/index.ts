// Traces (OpenTelemetry): what the service's HTTP edge and the worker protocol ask of them, and the loader that
// brings the SDK in only when the operator configured an exporter. With tracing off nothing here loads the SDK,
// and every caller holds `undefined` instead of a Tracing: the cost of traces that are off is a property read.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { JobRow } from "../store/types.js";

/** A result a worker reported (done, or a take carrying results): ends the attempt's run span. */
export interface TracedResult {
  jobId: string;
  status: "COMPLETED" | "FAILED";
  error?: { message?: unknown };
}

/** The spans of a job: its queue wait, its dispatch (taken to handed over) and its run (handed over to done). */
export interface JobTracing {
  /** A job is being submitted: it belongs to the trace active now (the API request's span). Before the submit. */
  submitted(jobId: string): void;
  /**
   * A worker took these jobs: their queue waits and dispatches are recorded and their runs begin. Returns each
   * job's W3C traceparent (the run span's), which the take answer hands to the worker.
   */
  taken(workerId: string, rows: readonly JobRow[]): Map<string, string>;
  /** Results came back from a worker: their runs end (a FAILED job with retries left waits in the queue again). */
  reported(results: readonly TracedResult[]): void;
  /** A job reached a final state (committed): whatever of it is still open ends, and it is forgotten. */
  final(row: JobRow): void;
}

export interface Tracing {
  /** Run `serve` under a span for this API request (the caller's traceparent, if any, is its parent). */
  request(req: IncomingMessage, res: ServerResponse, serve: () => Promise<void>): Promise<void>;
  /** The request being served matched this route pattern: the span is named after it. */
  route(method: string | undefined, pattern: string): void;
  jobs: JobTracing;
  /** Where workers send their own spans (their runtime's span of a handler's run): the service's collector. */
  readonly export: WorkerTraceExport;
  /** Sends what is still buffered and stops. */
  shutdown(): Promise<void>;
}

/** The collector a worker's runtime sends its spans to, as the worker is told (OTEL_EXPORTER_OTLP_*). */
export interface WorkerTraceExport {
  tracesUrl: string;
  headers?: string;
}

export interface TracingOptions {
  /** The OTLP/HTTP traces URL (…/v1/traces). */
  tracesUrl: string;
  /** OTEL_EXPORTER_OTLP_HEADERS as the service was given it: workers send with the same (a hosted backend's key). */
  headers?: string;
  /** `service.name` of the spans (OTEL_SERVICE_NAME overrides it, as the SDK's resource detection reads it). */
  serviceName: string;
}

/**
 * The OTLP traces URL from the settings, or undefined when traces are off. `SVC_TRACES=off` wins; an explicit
 * traces URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is used as it is; a base endpoint (`--otlp-endpoint`,
 * OTEL_EXPORTER_OTLP_ENDPOINT) gets `/v1/traces` appended, as the OTLP specification says; `SVC_TRACES=otlp` alone
 * sends to the collector's default address. Pure.
 */
export function tracesUrlOf(s: { traces?: "otlp" | "off"; otlpEndpoint?: string; otlpTracesEndpoint?: string }): string | undefined {
  if (s.traces === "off") return undefined;
  if (s.otlpTracesEndpoint) return s.otlpTracesEndpoint;
  if (s.otlpEndpoint) return `${s.otlpEndpoint.replace(/\/+$/, "")}/v1/traces`;
  return s.traces === "otlp" ? "http://localhost:4318/v1/traces" : undefined;
}

/** The OpenTelemetry SDK, imported now (only called when traces are configured). */
export async function loadTracing(options: TracingOptions): Promise<Tracing> {
  const { startOtelTracing } = await import("./otel.js");
  return startOtelTracing(options);
}
