// Webhooks a receiver can trust, against a real service and a real receiver on 127.0.0.1 that verifies every
// delivery with the standardwebhooks package (the specification's own verifier): deliveries are signed with the
// endpoint's secret, a forged one is refused by that verifier, the event filter is obeyed, and a receiver that
// fails twice then takes the message leaves a delivery log of three attempts, the last delivered.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { call, manifest, ProtocolWorker, resource, startTestService, until, type TestService } from "./helpers.js";
import { newSigningSecret, signedHeaders } from "../../src/service/webhooks/signing.js";
import { errorMessage } from "../../src/errors.js";

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** What the verifier made of it: the payload, or why it refused it. */
  verified: { ok: true; payload: any } | { ok: false; error: string };
  answered: number;
}

/** A receiver verifying with `secret()`; `/flaky/*` refuses (503) the first `failFirst` verified deliveries. */
async function verifyingReceiver(secret: () => string, failFirst: number) {
  const received: Received[] = [];
  let flakyFailures = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString();
      let verified: Received["verified"];
      try {
        verified = { ok: true, payload: new Webhook(secret()).verify(body, req.headers as Record<string, string>) };
      } catch (err) {
        verified = { ok: false, error: errorMessage(err) };
      }
      let answered = verified.ok ? 200 : 401;
      if (verified.ok && req.url!.startsWith("/flaky") && flakyFailures < failFirst) {
        flakyFailures++;
        answered = 503;
      }
      received.push({ path: req.url!, headers: req.headers, body, verified, answered });
      res.writeHead(answered).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, received, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe("signed webhooks", () => {
  let t: TestService;
  let endpointId: string;
  let worker: ProtocolWorker;
  let secret = "";
  let receiver: Awaited<ReturnType<typeof verifyingReceiver>>;

  beforeAll(async () => {
    // Retries within a second, so that the test sees a whole schedule; the receiver on 127.0.0.1 is allowed.
    t = await startTestService({ webhooks: { retry: { attempts: 5, baseMs: 100, factor: 2, maxDelayMs: 1_000 }, intervalMs: 50, allow: ["127.0.0.1/32"] } });
    const [endpoint] = await t.service.deploy({
      app: "hooks",
      env: "prod",
      manifest: manifest({ h: resource({ retries: 0 }) }, "hooks"),
      artifactPath: t.artifact,
    });
    endpointId = endpoint!.id;
    worker = await ProtocolWorker.mint(t, endpointId);
    await worker.register();
    receiver = await verifyingReceiver(() => secret, 2);
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.close();
  });

  /** Submit, take and end one job; its id. */
  async function runJob(path: string, extra: Record<string, unknown>, status: "COMPLETED" | "FAILED" = "COMPLETED"): Promise<string> {
    const run = await call(`${t.service.url}/v2/${endpointId}/run`, { key: t.key, body: { input: { path }, webhook: `${receiver.base}${path}`, ...extra } });
    expect(run.status).toBe(200);
    const [job] = await worker.take(1);
    expect(job!.id).toBe(run.body.id);
    await worker.done([
      { jobId: job!.id, lease: job!.lease, status, ...(status === "COMPLETED" ? { output: { ok: true } } : { error: { message: "bad input" } }) },
    ]);
    return run.body.id;
  }

  const at = (path: string) => receiver.received.filter((r) => r.path === path);

  it("makes a signing secret shown once, and signs every delivery with it", async () => {
    const rotated = await call(`${t.service.url}/v1/endpoints/${endpointId}/webhook/rotate-secret`, { key: t.key, body: {} });
    expect(rotated.status).toBe(200);
    expect(rotated.headers.get("cache-control")).toBe("no-store");
    secret = rotated.body.secret;
    expect(secret).toMatch(/^whsec_/);
    const settings = await call(`${t.service.url}/v1/endpoints/${endpointId}/webhook`, { key: t.key });
    expect(settings.body).toEqual({
      endpointId,
      events: ["completed", "failed"],
      eventsDefault: true,
      signingSecret: { createdAt: expect.any(Number), previousExpiresAt: null },
    });
    expect(settings.text).not.toContain(secret.slice(6));

    const id = await runJob("/default", {});
    await until(() => at("/default").length > 0);
    const [delivery] = at("/default");
    expect(delivery!.verified).toEqual({ ok: true, payload: expect.objectContaining({ id, status: "COMPLETED", output: { ok: true } }) });
    expect(delivery!.headers["webhook-id"]).toMatch(/^msg_/);
    expect(delivery!.headers["svc-webhook-event"]).toBe("completed");
  });

  it("a forged delivery (another secret, or a tampered body) is refused by the verifier", async () => {
    const body = JSON.stringify({ id: "forged", status: "COMPLETED", output: { ok: true } });
    const forged = [
      { headers: signedHeaders([newSigningSecret()], "msg_forged1", Date.now(), body), body },
      { headers: signedHeaders([secret], "msg_forged2", Date.now(), body), body: body.replace("forged", "tampered") },
    ];
    for (const f of forged) {
      const r = await fetch(`${receiver.base}/forged`, { method: "POST", headers: { "content-type": "application/json", ...f.headers }, body: f.body });
      expect(r.status).toBe(401);
    }
    expect(at("/forged").map((r) => r.verified)).toEqual([
      { ok: false, error: "No matching signature found" },
      { ok: false, error: "No matching signature found" },
    ]);
  });

  it("sends the events a job's filter names, and only those", async () => {
    const started = await runJob("/started", { webhookEvents: ["started", "completed"] });
    const none = await runJob("/failed-only", { webhookEvents: ["failed"] });
    const failed = await runJob("/failed-only-2", { webhookEvents: ["failed"] }, "FAILED");
    await until(() => at("/started").length >= 2 && at("/failed-only-2").length >= 1);
    // Time for a message that should not come to have come.
    await new Promise((r) => setTimeout(r, 500));
    expect(at("/started").map((r) => [r.headers["svc-webhook-event"], r.verified.ok && r.verified.payload.status])).toEqual([
      ["started", "IN_PROGRESS"],
      ["completed", "COMPLETED"],
    ]);
    expect(new Set(at("/started").map((r) => (r.verified.ok ? r.verified.payload.id : undefined)))).toEqual(new Set([started]));
    expect(at("/failed-only")).toEqual([]);
    expect(at("/failed-only-2").map((r) => [r.headers["svc-webhook-event"], r.verified.ok && r.verified.payload])).toEqual([
      ["failed", expect.objectContaining({ id: failed, status: "FAILED", error: "bad input" })],
    ]);
    expect((await call(`${t.service.url}/v2/${endpointId}/webhook-deliveries/${none}`, { key: t.key })).body).toEqual({
      jobId: none,
      deliveries: [],
      pending: [],
    });
  });

  it("follows the endpoint's filter when the job names none", async () => {
    const set = await call(`${t.service.url}/v1/endpoints/${endpointId}/webhook`, { method: "PATCH", key: t.key, body: { events: ["started"] } });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ events: ["started"], eventsDefault: false });
    const bad = await call(`${t.service.url}/v1/endpoints/${endpointId}/webhook`, { method: "PATCH", key: t.key, body: { events: ["finished"] } });
    expect(bad.status).toBe(422);
    await runJob("/endpoint-filter", {});
    await until(() => at("/endpoint-filter").length >= 1);
    await new Promise((r) => setTimeout(r, 500));
    expect(at("/endpoint-filter").map((r) => r.headers["svc-webhook-event"])).toEqual(["started"]);
    await call(`${t.service.url}/v1/endpoints/${endpointId}/webhook`, { method: "PATCH", key: t.key, body: { events: null } });
  });

  it("retries a receiver that fails twice, and the job's delivery log shows the three attempts, the last delivered", async () => {
    const id = await runJob("/flaky", {});
    await until(() => at("/flaky").some((r) => r.answered === 200), 10_000);
    const attempts = at("/flaky");
    expect(attempts.map((r) => r.answered)).toEqual([503, 503, 200]);
    // One message: the same webhook-id on every attempt, each verified.
    expect(new Set(attempts.map((r) => r.headers["webhook-id"])).size).toBe(1);
    expect(attempts.every((r) => r.verified.ok)).toBe(true);
    const log = await until(async () => {
      const r = await call(`${t.service.url}/v2/${endpointId}/webhook-deliveries/${id}`, { key: t.key });
      return r.body.deliveries?.length === 3 ? r : undefined;
    });
    expect(log.body).toEqual({
      jobId: id,
      deliveries: [1, 2, 3].map((attempt) => ({
        messageId: attempts[0]!.headers["webhook-id"],
        event: "completed",
        attempt,
        at: expect.any(Number),
        durationMs: expect.any(Number),
        status: attempt < 3 ? 503 : 200,
        error: attempt < 3 ? "answered 503" : null,
        outcome: attempt < 3 ? "retrying" : "delivered",
      })),
      pending: [],
    });
    // Another user's key, or an unknown job: not found.
    expect((await call(`${t.service.url}/v2/${endpointId}/webhook-deliveries/nope`, { key: t.key })).status).toBe(404);
  });

  it("signs with both secrets while a rotated-out one is kept, so receivers can switch", async () => {
    const before = secret;
    const rotated = await call(`${t.service.url}/v1/endpoints/${endpointId}/webhook/rotate-secret`, { key: t.key, body: { keepPreviousSeconds: 3600 } });
    expect(rotated.body.settings.signingSecret.previousExpiresAt).toBeGreaterThan(Date.now());
    secret = rotated.body.secret;
    expect(secret).not.toBe(before);
    await runJob("/rotated", {});
    await until(() => at("/rotated").length > 0);
    const [delivery] = at("/rotated");
    expect(delivery!.verified.ok).toBe(true);
    expect(() => new Webhook(before).verify(delivery!.body, delivery!.headers as Record<string, string>)).not.toThrow();
    expect(String(delivery!.headers["webhook-signature"]).split(" ")).toHaveLength(2);
  });
});
