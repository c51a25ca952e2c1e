// The runtime's span export: where to (the OTLP variables as OpenTelemetry's exporters read them), the OTLP/HTTP
// JSON it sends, batched, to a real HTTP server on 127.0.0.1, and a collector that does not answer said once.

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { otlpBody, SpanExporter, spanTarget, type HandlerSpan } from "./spans.js";

const span = (over: Partial<HandlerSpan> = {}): HandlerSpan => ({
  traceId: "a".repeat(32),
  spanId: "b".repeat(16),
  parentSpanId: "c".repeat(16),
  name: "job handler",
  startMs: 1_700_000_000_000.5,
  endMs: 1_700_000_000_250,
  ok: true,
  attributes: { "svc.job.id": "j1", n: 3 },
  ...over,
});

describe("where spans go", () => {
  it("reads the traces endpoint, else the base endpoint with /v1/traces, and the headers", () => {
    expect(spanTarget({})).toBeUndefined();
    expect(spanTarget({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" })).toEqual({ url: "http://c:4318/v1/traces", headers: {} });
    expect(spanTarget({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t/x" })?.url).toBe("http://t/x");
    expect(spanTarget({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t/x", OTEL_EXPORTER_OTLP_HEADERS: "api-key=a%3Db, x = y ,bad" })?.headers).toEqual({
      "api-key": "a=b",
      x: "y",
    });
  });
});

describe("the OTLP body", () => {
  it("carries the resource, the span's ids, times in nanoseconds, attributes and status", () => {
    const body = otlpBody({ "service.name": "svc-worker" }, [span(), span({ ok: false, message: "boom" })]) as any;
    const [ok, failed] = body.resourceSpans[0].scopeSpans[0].spans;
    expect(body.resourceSpans[0].resource.attributes).toEqual([{ key: "service.name", value: { stringValue: "svc-worker" } }]);
    expect(ok).toMatchObject({
      traceId: "a".repeat(32),
      spanId: "b".repeat(16),
      parentSpanId: "c".repeat(16),
      name: "job handler",
      kind: 1,
      startTimeUnixNano: "1700000000000500000",
      endTimeUnixNano: "1700000000250000000",
      status: { code: 1 },
    });
    expect(ok.attributes).toEqual([
      { key: "svc.job.id", value: { stringValue: "j1" } },
      { key: "n", value: { intValue: "3" } },
    ]);
    expect(failed.status).toEqual({ code: 2, message: "boom" });
  });
});

describe("the exporter", () => {
  const servers: Array<{ close(): void }> = [];
  afterEach(() => {
    for (const s of servers.splice(0)) s.close();
  });

  it("sends the spans finished together in one request, with the headers, and what is left at flush", async () => {
    const got: Array<{ headers: Record<string, unknown>; body: any }> = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        got.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) });
        res.end("{}");
      });
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
    const exporter = new SpanExporter({ url, headers: { "api-key": "k" } }, { "service.name": "svc-worker" }, () => undefined);
    exporter.add(span({ spanId: "1".repeat(16) }));
    exporter.add(span({ spanId: "2".repeat(16) }));
    // Sent after the batch's wait (200 ms), without a flush.
    for (let i = 0; i < 100 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(got).toHaveLength(1);
    expect(got[0]!.headers["api-key"]).toBe("k");
    expect(got[0]!.headers["content-type"]).toBe("application/json");
    expect(got[0]!.body.resourceSpans[0].scopeSpans[0].spans.map((s: { spanId: string }) => s.spanId)).toEqual(["1".repeat(16), "2".repeat(16)]);
    exporter.add(span({ spanId: "3".repeat(16) }));
    await exporter.flush();
    expect(got).toHaveLength(2);
  });

  it("says once that the collector cannot be reached, and does not throw", async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    server.close();
    const notes: string[] = [];
    const exporter = new SpanExporter({ url: `http://127.0.0.1:${port}/v1/traces`, headers: {} }, {}, (t) => notes.push(t));
    exporter.add(span());
    await exporter.flush();
    exporter.add(span());
    await exporter.flush();
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatch(/^could not send 1 span\(s\) to http:\/\/127\.0\.0\.1:\d+\/v1\/traces \(.+\); spans are dropped until it answers$/);
  });
});
