// A worker that does not begin its answer within the endpoint's executionTimeout: the caller gets a 504
// problem, nothing is retried, and the worker stays in the pool (slow is not dead). An answer that has begun (a
// stream) may run longer. Both ways: the LB front, and node:http alone.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lbEndpointUrl } from "../../src/service/lb/index.js";
import { startApp, until, type LiveApp } from "./harness.js";

describe.each([true, false])("lbFront: %s", (lbFront) => {
  let app: LiveApp;
  let base: string;
  let endpointId: string;
  let auth: Record<string, string>;

  beforeAll(async () => {
    app = await startApp("fixtures/lb-app", { resources: { api: { workersMin: 1, workersMax: 1, executionTimeoutMs: 1000 } }, service: { lbFront } });
    endpointId = app.endpoints.find((e) => e.name === "api")!.id;
    base = lbEndpointUrl(app.service.url, endpointId);
    auth = { authorization: `Bearer ${app.key}` };
  });

  afterAll(async () => {
    await app?.close();
  });

  it("answers 504 problem+json when the worker has not begun its answer within executionTimeout, and keeps the worker", async () => {
    expect((await fetch(`${base}/items/warm`, { headers: auth })).status).toBe(200);
    const started = Date.now();
    const late = await fetch(`${base}/slow?ms=8000`, { headers: auth });
    const waited = Date.now() - started;
    expect(late.status).toBe(504);
    expect(late.headers.get("content-type")).toBe("application/problem+json");
    const worker = late.headers.get("x-svc-worker")!;
    expect(worker).toMatch(/^w/);
    expect(await late.json()).toMatchObject({
      title: "Gateway Timeout",
      status: 504,
      detail: `The worker ${worker} did not answer within 1000 ms (the endpoint's executionTimeout); it was not retried`,
    });
    // Never early; the pool's sweep runs every second, so at most two seconds late.
    expect(waited).toBeGreaterThanOrEqual(1000);
    expect(waited).toBeLessThan(4500);

    // Still in the pool: the next request is served by the same worker.
    const next = await fetch(`${base}/items/after`, { headers: auth });
    expect([next.status, next.headers.get("x-svc-worker")]).toEqual([200, worker]);
    const health = (await (await fetch(`${app.service.url}/v2/${endpointId}/health`, { headers: auth })).json()) as { requests: { failed: number; served: number } };
    expect(health.requests.failed).toBe(1);
    const logs = async () =>
      ((await (await fetch(`${app.service.url}/v1/endpoints/${endpointId}/logs`, { headers: auth })).json()) as { lines: Array<{ text: string }> }).lines.map((l) => l.text);
    await until("the timeout in the logs", async () => (await logs()).find((t) => t === `lb: worker ${worker} did not answer a request within 1000 ms (executionTimeout): 504, not retried`));
  });

  it("lets an answer that has begun (a stream) run past executionTimeout", async () => {
    const response = await fetch(`${base}/events?count=4&gap=600`, { headers: auth });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text.match(/^data: /gm)?.length).toBe(4);
  });
});
