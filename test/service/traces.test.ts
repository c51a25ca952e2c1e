// Traces end to end: a `svc server` sending OTLP/HTTP to a receiver of the test's (test/fakes/otlp-receiver.ts), a
// real process worker running a user's handler that traces with OpenTelemetry's own SDK to the same receiver. One
// /runsync gives the request's span, the job's queue wait, dispatch and run, the runtime's span of the handler's run
// (sent by the worker to the collector the service names to it) and the user's span, all under one trace id: the
// runtime's span is a child of the job's run, whose context the take handed the worker, and the user's its child.

import { afterAll, beforeAll, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServerProcess, type ServerProcess } from "../server-process.js";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../fakes/otlp-receiver.js";
import { call, manifest, ProtocolWorker, resource, startTestService, until } from "./helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "traces-admin-key";

let work: string;
let receiver: OtlpReceiver;
let server: ServerProcess | undefined;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-traces-"));
  receiver = await startOtlpReceiver();
});

afterAll(async () => {
  await server?.stop();
  await receiver.close();
  rmSync(work, { recursive: true, force: true });
});

it("makes nothing of traces when they are not configured: no traceparent in the take, no OpenTelemetry registered", async () => {
  const t = await startTestService();
  try {
    const [endpoint] = await t.service.deploy({ app: "plain", env: "prod", manifest: manifest({ p: resource() }, "plain"), artifactPath: t.artifact });
    const w = await ProtocolWorker.mint(t, endpoint!.id);
    await w.register();
    const run = await call(`${t.service.url}/v2/${endpoint!.id}/run`, { key: t.key, body: { input: { n: 1 } }, authorization: `Bearer ${t.key}` });
    expect(run.status).toBe(200);
    const answer = await w.post<{ jobs: Array<Record<string, unknown>> }>("take", { workerId: w.workerId, max: 1, waitMs: 2000 });
    expect(answer.body.jobs.map((j) => j.id)).toEqual([run.body.id]);
    expect(answer.body.jobs[0]).not.toHaveProperty("traceparent");
    // The SDK registers itself on the API's global when loaded (tracing/otel.ts): never here.
    expect((globalThis as Record<symbol, unknown>)[Symbol.for("opentelemetry.js.api.1")]).toBeUndefined();
  } finally {
    await t.close();
  }
});

it("puts the spans of one /runsync and the span its handler made under one trace id", async () => {
  const project = copyFixture("traced-app", work);
  // The user's code brings OpenTelemetry (bundled by `svc build`), and sends to the test's receiver.
  symlinkSync(join(repo, "node_modules", "@opentelemetry"), join(project, "node_modules", "@opentelemetry"), "dir");
  const source = join(project, "src", "traced.ts");
  writeFileSync(source, readFileSync(source, "utf8").replace("__OTLP_URL__", receiver.url));

  server = await startServerProcess({
    dataDir: join(work, "data"),
    // The collector is on the host's loopback: a sandboxed worker in a network of its own reaches its port (the
    // service's collector, which it names to its workers) with no SVC_WORKER_HOST_PORTS.
    env: {
      SVC_API_KEY: KEY,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: "50",
    },
  });
  expect(server.log()).toContain(`traces: OTLP/HTTP to ${receiver.url}/v1/traces`);
  await deployFixture(project, server.url, KEY);
  const endpoint = (await call(`${server.url}/v1/apps/traced-app/environments/prod`, { key: KEY })).body.endpoints[0].id as string;

  const r = await call(`${server.url}/v2/${endpoint}/runsync`, { key: KEY, body: { input: { n: 7 } } });
  expect(r.status).toBe(200);
  expect(r.body.status).toBe("COMPLETED");
  const out = r.body.output as {
    trace: { traceparent: string; traceId: string; spanId: string; sampled: boolean };
    active: { traceId: string; spanId: string } | null;
    made: { traceId: string };
  };
  const traceId = out.trace.traceId;
  expect(out.trace.traceparent).toBe(`00-${traceId}-${out.trace.spanId}-01`);
  const named = (name: string): ReceivedSpan | undefined => receiver.spans.find((s) => s.traceId === traceId && s.name === name);
  await until(() => ["POST /v2/:endpoint/runsync", "job queued", "job dispatch", "job run", "job handler", "handler work"].every((n) => named(n)), 15_000);
  const request = named("POST /v2/:endpoint/runsync")!;
  const run = named("job run")!;
  const runtime = named("job handler")!;
  const handler = named("handler work")!;
  // The runtime's own span of the handler's run, sent by the worker with no code of the user's: a child of the job's
  // run, its resource naming the worker.
  expect(runtime).toMatchObject({
    service: "svc-worker",
    parentSpanId: run.spanId,
    kind: 1,
    status: { code: 1 },
    attributes: { "svc.job.id": r.body.id },
    resource: { "svc.endpoint.id": endpoint, "svc.endpoint.name": "traced", "svc.app": "traced-app" },
  });
  expect(runtime.resource["svc.worker.id"]).toBe(runtime.attributes["svc.worker.id"]);
  expect(runtime.resource["service.instance.id"]).toMatch(/^w/);
  // The runtime made its span the active one in the handler's OpenTelemetry; ctx.trace stays the job's run.
  expect(out.active).toMatchObject({ traceId, spanId: runtime.spanId });
  expect(request).toMatchObject({
    service: "svc",
    kind: 2,
    parentSpanId: undefined,
    attributes: { "http.route": "/v2/:endpoint/runsync", "http.response.status_code": 200 },
  });
  for (const name of ["job queued", "job dispatch", "job run"]) {
    expect(named(name)).toMatchObject({ service: "svc", parentSpanId: request.spanId, attributes: { "svc.job.id": r.body.id, "svc.endpoint.id": endpoint } });
  }
  expect(run.spanId).toBe(out.trace.spanId);
  expect(run.status?.code).toBe(1); // OK
  // The handler's own span: same trace, a child of the runtime's, sent by the user's SDK.
  expect(handler).toMatchObject({ service: "traced-app", traceId, parentSpanId: runtime.spanId, attributes: { n: 7 } });
  expect(receiver.refused).toEqual([]);
}, 180_000);
