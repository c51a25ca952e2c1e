// Traces through the OpenTelemetry SDK and its OTLP/HTTP exporter. Imported only when traces are configured
// (tracing/index.ts loadTracing): a service without traces never loads any of it.
//
// A request's span is active (AsyncLocalStorage) while the dispatcher serves it; a job submitted meanwhile keeps
// that context, so the job's spans are its children: "job queued" (submitted, or failed and waiting for its retry,
// until a worker takes it), "job dispatch" (taken until the take is answered) and "job run" (answered until the
// worker reports the result). The run span's context goes to the worker with the job (its traceparent), so spans
// the handler makes are the run's children.

import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type SpanContext } from "@opentelemetry/api";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import type { JobRow } from "../store/types.js";
import type { JobTracing, TracedResult, Tracing, TracingOptions } from "./index.js";

/** Jobs whose spans are followed at once; beyond it the oldest is dropped (its open span ends), so memory is bounded. */
export const MAX_TRACKED_JOBS = 100_000;

interface TrackedJob {
  /** The context the job was submitted in: its spans' parent. */
  parent: Context;
  /** Since when it waits in the queue again (after a failed attempt); the first wait starts at its createdAt. */
  queuedSince?: number;
  run?: Span;
}

/** The W3C traceparent header of a span context. Pure. */
export function traceparentOf(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

function jobAttributes(row: JobRow): Record<string, string | number> {
  return { "svc.job.id": row.id, "svc.endpoint.id": row.endpointId, "svc.job.attempt": row.attempt };
}

function endWith(span: Span, ok: boolean, message?: string, at?: number): void {
  span.setStatus(ok ? { code: SpanStatusCode.OK } : { code: SpanStatusCode.ERROR, message });
  span.end(at);
}

export function startOtelTracing(options: TracingOptions): Tracing {
  const exporter = new OTLPTraceExporter({ url: options.tracesUrl });
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (read by the env detector) override svc's own name.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ "service.name": options.serviceName }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  // The AsyncLocalStorage context manager and the W3C propagator, process-wide: a request's span stays active
  // across the awaits of its handler, and libraries the service uses that trace join it.
  provider.register();
  const tracer = provider.getTracer("svc");
  const tracked = new Map<string, TrackedJob>();

  const track = (jobId: string, job: TrackedJob): TrackedJob => {
    tracked.set(jobId, job);
    if (tracked.size > MAX_TRACKED_JOBS) {
      const [oldestId, oldest] = tracked.entries().next().value as [string, TrackedJob];
      tracked.delete(oldestId);
      oldest.run?.end();
    }
    return job;
  };

  const jobs: JobTracing = {
    submitted(jobId) {
      track(jobId, { parent: context.active() });
    },

    taken(workerId, rows) {
      const now = Date.now();
      const parents = new Map<string, string>();
      for (const row of rows) {
        // A job submitted before this start, or by another replica, starts its own trace here.
        const job = tracked.get(row.id) ?? track(row.id, { parent: ROOT_CONTEXT });
        // Taken again with a run still open: the worker that had it lost its lease.
        if (job.run) endWith(job.run, false, "the lease lapsed; the job was taken again", now);
        const attributes = jobAttributes(row);
        const queuedSince = Math.min(job.queuedSince ?? row.createdAt, now);
        const takenAt = Math.min(Math.max(row.startedAt ?? now, queuedSince), now);
        tracer.startSpan("job queued", { kind: SpanKind.INTERNAL, startTime: queuedSince, attributes }, job.parent).end(takenAt);
        const withWorker = { ...attributes, "svc.worker.id": workerId };
        tracer.startSpan("job dispatch", { kind: SpanKind.INTERNAL, startTime: takenAt, attributes: withWorker }, job.parent).end(now);
        job.run = tracer.startSpan("job run", { kind: SpanKind.CONSUMER, startTime: now, attributes: withWorker }, job.parent);
        job.queuedSince = undefined;
        parents.set(row.id, traceparentOf(job.run.spanContext()));
      }
      return parents;
    },

    reported(results: readonly TracedResult[]) {
      const now = Date.now();
      for (const r of results) {
        const job = tracked.get(r.jobId);
        if (!job?.run) continue;
        const message = typeof r.error?.message === "string" ? r.error.message : "the handler failed";
        endWith(job.run, r.status === "COMPLETED", message, now);
        job.run = undefined;
        // Queued again if it has retries left; final() forgets it otherwise.
        job.queuedSince = now;
      }
    },

    final(row) {
      const job = tracked.get(row.id);
      if (!job) return;
      tracked.delete(row.id);
      const ok = row.status === "COMPLETED";
      const message = row.error ?? row.status;
      if (job.run) return endWith(job.run, ok, message);
      // A result already ended its run; one cancelled or timed out while queued ended waiting: that wait is a span.
      if (row.status !== "CANCELLED" && row.status !== "TIMED_OUT") return;
      const attributes = { ...jobAttributes(row), "svc.job.status": row.status };
      endWith(tracer.startSpan("job queued", { kind: SpanKind.INTERNAL, startTime: job.queuedSince ?? row.createdAt, attributes }, job.parent), ok, message);
    },
  };

  return {
    export: { tracesUrl: options.tracesUrl, ...(options.headers ? { headers: options.headers } : {}) },
    request(req, res, serve) {
      const parent = propagation.extract(ROOT_CONTEXT, req.headers);
      const method = req.method ?? "GET";
      const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { "http.request.method": method } }, parent);
      res.once("close", () => {
        span.setAttribute("http.response.status_code", res.statusCode);
        if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        else if (!res.writableFinished) span.setStatus({ code: SpanStatusCode.ERROR, message: "the client went away before the answer was sent" });
        span.end();
      });
      return context.with(trace.setSpan(parent, span), serve);
    },

    route(method, pattern) {
      const span = trace.getActiveSpan();
      span?.updateName(`${method ?? "GET"} ${pattern}`);
      span?.setAttribute("http.route", pattern);
    },

    jobs,

    async shutdown() {
      await provider.shutdown();
    },
  };
}
