// Webhooks cannot reach inside: against a real service, with a listener on the loopback addresses (the "inside":
// 127.0.0.1 and ::1, one port) that must receive nothing, and an allow-listed receiver on 127.0.0.2 that must get
// its deliveries. Every loopback spelling of a URL is refused at submit (422 naming the rule), the service's own
// address too; names resolving to 127.0.0.1 (localhost, and a name only the test's fake resolver knows) are
// refused at connect time, the delivery log naming the rule; a redirect from the allowed receiver to the loopback
// listener is an answer, not a hop. The refusals are counted by rule.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { lookup as systemLookup } from "node:dns/promises";
import type { LookupAddress } from "node:dns";
import { call, manifest, ProtocolWorker, resource, startTestService, until, type TestService } from "./helpers.js";

interface Hit {
  method: string;
  url: string;
}

/** A listener recording every request it gets, answering `answer` (status and headers) for each path. */
async function listener(host: string, answer: (path: string) => { status: number; headers?: Record<string, string> }) {
  const hits: Hit[] = [];
  const server: Server = createServer((req, res) => {
    hits.push({ method: req.method!, url: req.url! });
    req.resume();
    const { status, headers } = answer(req.url!);
    res.writeHead(status, headers).end();
  });
  // "::" takes IPv4 (as ::ffff:a.b.c.d) and IPv6 on one port: every loopback spelling lands here.
  await new Promise<void>((r) => server.listen({ port: 0, host, ipv6Only: false }, r));
  const port = (server.address() as AddressInfo).port;
  return { hits, port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/**
 * A fake resolver: `localtest` (a name with no DNS record anywhere) resolves to 127.0.0.1, `hooks.internal` to the
 * allowed receiver's 127.0.0.2; other names (localhost) as the system resolves them.
 */
const fakeLookup = async (name: string): Promise<LookupAddress[]> => {
  if (name === "localtest") return [{ address: "127.0.0.1", family: 4 }];
  if (name === "hooks.internal") return [{ address: "127.0.0.2", family: 4 }];
  return systemLookup(name, { all: true });
};

describe("webhooks cannot reach inside", () => {
  let t: TestService;
  let endpointId: string;
  let worker: ProtocolWorker;
  let inside: Awaited<ReturnType<typeof listener>>;
  let allowed: Awaited<ReturnType<typeof listener>>;

  beforeAll(async () => {
    inside = await listener("::", () => ({ status: 200 }));
    allowed = await listener("127.0.0.2", (path) =>
      path.startsWith("/redirect") ? { status: 302, headers: { location: `http://127.0.0.1:${inside.port}/stolen` } } : { status: 200 },
    );
    t = await startTestService({
      webhooks: { allow: ["127.0.0.2/32"], lookup: fakeLookup, retry: { attempts: 2, baseMs: 50, factor: 2, maxDelayMs: 200 }, intervalMs: 50 },
    });
    const [endpoint] = await t.service.deploy({
      app: "hooks",
      env: "prod",
      manifest: manifest({ h: resource({ retries: 0 }) }, "hooks"),
      artifactPath: t.artifact,
    });
    endpointId = endpoint!.id;
    worker = await ProtocolWorker.mint(t, endpointId);
    await worker.register();
  });
  afterAll(async () => {
    await t?.close();
    await inside?.close();
    await allowed?.close();
  });

  const submit = (body: Record<string, unknown>) => call(`${t.service.url}/v2/${endpointId}/run`, { key: t.key, body: { input: {}, ...body } });

  /** Submit a job with `webhook`, take it and complete it; its id. */
  async function runJob(webhook: string): Promise<string> {
    const run = await submit({ webhook });
    expect(run.status).toBe(200);
    // Whatever else is queued (a submission that should have been refused) ends too, so each test stands alone.
    const jobs = await worker.take(50);
    expect(jobs.map((j) => j.id)).toContain(run.body.id);
    await worker.done(jobs.map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: { ok: true } })));
    return run.body.id;
  }

  /** The job's delivery log once nothing is pending and at least `attempts` were made. */
  async function settledLog(id: string, attempts = 1) {
    return until(async () => {
      const r = await call(`${t.service.url}/v2/${endpointId}/webhook-deliveries/${id}`, { key: t.key });
      return r.body.deliveries?.length >= attempts && r.body.pending.length === 0 ? r.body : undefined;
    });
  }

  it("refuses every loopback spelling at submit with a 422 naming the rule", async () => {
    const p = inside.port;
    const spellings = [
      `http://127.0.0.1:${p}/a`,
      `http://[::1]:${p}/a`,
      `http://[::ffff:127.0.0.1]:${p}/a`,
      `http://2130706433:${p}/a`,
      `http://127.1:${p}/a`,
      `http://0x7f000001:${p}/a`,
    ];
    for (const webhook of spellings) {
      const r = await submit({ webhook });
      expect(r.status, webhook).toBe(422);
      expect(r.headers.get("content-type")).toContain("application/problem+json");
      expect(r.body.webhookRule, webhook).toBe("loopback");
      expect(r.body.errors, webhook).toEqual([
        expect.stringMatching(
          /^\$\.webhook: refused by the webhook rule "loopback": .* is a loopback address; webhooks go to public addresses unless the operator allows others \(--webhook-allow\)$/,
        ),
      ]);
    }
    const v2 = await submit({ webhookV2: `http://2130706433:${p}/b` });
    expect(v2.status).toBe(422);
    expect(v2.body.errors).toEqual([expect.stringMatching(/^\$\.webhookV2: refused by the webhook rule "loopback"/)]);
    // The service's own routes are refused by a rule of their own.
    const own = await submit({ webhook: `${t.service.url}/v2/${endpointId}/run` });
    expect(own.status).toBe(422);
    expect(own.body.webhookRule).toBe("service");
    expect(inside.hits).toEqual([]);
  });

  it("refuses names that resolve to loopback at connect time, and the delivery log names the rule", async () => {
    for (const host of ["localhost", "localtest"]) {
      const id = await runJob(`http://${host}:${inside.port}/by-name`);
      const log = await settledLog(id);
      expect(log.deliveries, host).toEqual([
        {
          messageId: expect.stringMatching(/^msg_/),
          event: "completed",
          attempt: 1,
          at: expect.any(Number),
          durationMs: expect.any(Number),
          status: null,
          error: expect.stringMatching(new RegExp(`^refused by the webhook rule "loopback": ${host} resolves to (127\\.0\\.0\\.1|::1), a loopback address`)),
          outcome: "failed",
        },
      ]);
    }
    expect(inside.hits).toEqual([]);
  });

  it("does not follow a redirect from an allowed receiver to the inside: the 302 is the attempt's answer", async () => {
    const id = await runJob(`http://127.0.0.2:${allowed.port}/redirect`);
    const log = await settledLog(id, 2);
    expect(log.deliveries.map((d: { status: number; error: string; outcome: string }) => [d.status, d.error, d.outcome])).toEqual([
      [302, "answered 302 (redirects are not followed)", "retrying"],
      [302, "answered 302 (redirects are not followed)", "failed"],
    ]);
    expect(allowed.hits.filter((h) => h.url === "/redirect")).toEqual([
      { method: "POST", url: "/redirect" },
      { method: "POST", url: "/redirect" },
    ]);
    expect(inside.hits).toEqual([]);
  });

  it("delivers to the allow-listed receiver, by address and by a name resolving to it", async () => {
    for (const host of ["127.0.0.2", "hooks.internal"]) {
      const id = await runJob(`http://${host}:${allowed.port}/ok-${host}`);
      const log = await settledLog(id);
      expect(
        log.deliveries.map((d: { status: number; outcome: string }) => [d.status, d.outcome]),
        host,
      ).toEqual([[200, "delivered"]]);
    }
    expect(allowed.hits.filter((h) => h.url.startsWith("/ok-"))).toEqual([
      { method: "POST", url: "/ok-127.0.0.2" },
      { method: "POST", url: "/ok-hooks.internal" },
    ]);
    expect(inside.hits).toEqual([]);
  });

  it("counts the refusals by rule and stage", async () => {
    const text = (await call(`${t.service.url}/metrics`, { key: t.key })).text;
    expect(text).toContain('svc_webhook_refusals_total{rule="loopback",stage="submit"} 7');
    expect(text).toContain('svc_webhook_refusals_total{rule="service",stage="submit"} 1');
    expect(text).toContain('svc_webhook_refusals_total{rule="loopback",stage="delivery"} 2');
  });
});
