import { afterEach, describe, expect, it } from "vitest";
import { context, propagation, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { parseTraceparent, runInTrace } from "./trace.js";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`;

describe("parseTraceparent", () => {
  it("reads a W3C traceparent's parts", () => {
    expect(parseTraceparent(TRACEPARENT)).toEqual({ traceparent: TRACEPARENT, traceId: TRACE_ID, spanId: SPAN_ID, sampled: true });
    expect(parseTraceparent(`00-${TRACE_ID}-${SPAN_ID}-00`)?.sampled).toBe(false);
  });

  it("refuses what is not one", () => {
    for (const bad of [
      undefined,
      "",
      "01-" + TRACEPARENT.slice(3),
      `00-${"0".repeat(32)}-${SPAN_ID}-01`,
      `00-${TRACE_ID}-${"0".repeat(16)}-01`,
      `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`,
    ]) {
      expect(parseTraceparent(bad)).toBeUndefined();
    }
  });
});

describe("runInTrace", () => {
  afterEach(() => {
    context.disable();
    trace.disable();
    propagation.disable();
  });

  /** What a user's code does to trace: an SDK registered (its AsyncLocalStorage context manager included). */
  function userOpenTelemetry(): InMemorySpanExporter {
    const exporter = new InMemorySpanExporter();
    new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).register();
    return exporter;
  }

  it("runs the handler with the job's span active when the user's OpenTelemetry has a context manager", async () => {
    const exporter = userOpenTelemetry();
    const tracer = trace.getTracer("handler");
    const seen = await runInTrace(parseTraceparent(TRACEPARENT), async () => {
      await new Promise((r) => setTimeout(r, 1));
      tracer.startSpan("handler work").end();
      return trace.getActiveSpan()?.spanContext();
    });
    expect(seen).toMatchObject({ traceId: TRACE_ID, spanId: SPAN_ID, isRemote: true });
    const [made] = exporter.getFinishedSpans();
    expect(made!.spanContext().traceId).toBe(TRACE_ID);
    expect(made!.parentSpanContext?.spanId).toBe(SPAN_ID);
    // Outside the job, nothing is active.
    expect(trace.getActiveSpan()).toBeUndefined();
  });

  it("just runs the handler when no context manager is registered, or the job has no trace", () => {
    expect(runInTrace(parseTraceparent(TRACEPARENT), () => trace.getActiveSpan())).toBeUndefined();
    userOpenTelemetry();
    expect(runInTrace(undefined, () => trace.getActiveSpan())).toBeUndefined();
  });
});
