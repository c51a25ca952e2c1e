// An OTLP/HTTP receiver for the tests: a small HTTP server on 127.0.0.1 taking POST /v1/traces in the JSON
// encoding (what @opentelemetry/exporter-trace-otlp-http sends; gzip accepted), keeping every span it got, flat.
// Anything else (protobuf, another path) is answered 415 or 404 and recorded as refused, so a test sees it.

import { createServer, type Server } from "node:http";
import { gunzipSync } from "node:zlib";

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  /** The span's attributes, their values unwrapped (stringValue, intValue...). */
  attributes: Record<string, unknown>;
  status?: { code?: number; message?: string };
  /** `service.name` of the resource that sent it. */
  service?: string;
  /** The sending resource's attributes, unwrapped. */
  resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** Base address, as OTEL_EXPORTER_OTLP_ENDPOINT takes it (traces go to `${url}/v1/traces`). */
  url: string;
  spans: ReceivedSpan[];
  /** Requests it could not read: their path and content type. */
  refused: string[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number; arrayValue?: { values?: AnyValue[] } };
type KeyValue = { key: string; value: AnyValue };

function unwrap(v: AnyValue | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(unwrap);
  return undefined;
}

function attributesOf(list: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, unwrap(kv.value)]));
}

/** The spans of an ExportTraceServiceRequest in OTLP's JSON encoding (ids in hex). Pure. */
export function spansOf(request: unknown): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  const body = request as { resourceSpans?: Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: any[] }> }> };
  for (const rs of body.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    const service = resource["service.name"] as string | undefined;
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId || undefined,
          name: s.name,
          kind: s.kind,
          attributes: attributesOf(s.attributes),
          status: s.status,
          service,
          resource,
        });
      }
    }
  }
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const refused: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const type = req.headers["content-type"] ?? "";
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        refused.push(`${req.method} ${req.url} ${type}`);
        return void res.writeHead(404).end();
      }
      if (!type.startsWith("application/json")) {
        refused.push(`${req.url} ${type}`);
        return void res.writeHead(415).end();
      }
      let raw = Buffer.concat(chunks);
      if (req.headers["content-encoding"] === "gzip") raw = gunzipSync(raw);
      spans.push(...spansOf(JSON.parse(raw.toString("utf8"))));
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    refused,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
