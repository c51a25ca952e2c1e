// A worker that does not begin its answer within the endpoint's executionTimeout: the caller gets a 504
// problem, nothing is retried, and the worker stays in the pool (slow is not dead). An answer that has begun (a
// stream) may run longer. Both ways: the LB front, and node:http alone.

import { describe, expect, it } from "vitest";
import { until, useLbApp } from "./harness.js";

describe.each([true, false])("lbFront: %s", (lbFront) => {
  const lb = useLbApp({ workersMin: 1, workersMax: 1, executionTimeoutMs: 1000 }, { lbFront });

  it("answers 504 problem+json when the worker has not begun its answer within executionTimeout, and keeps the worker", async () => {
    expect((await fetch(`${lb.base}/items/warm`, { headers: lb.auth })).status).toBe(200);
    const started = Date.now();
    const late = await fetch(`${lb.base}/slow?ms=8000`, { headers: lb.auth });
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
    const next = await fetch(`${lb.base}/items/after`, { headers: lb.auth });
    expect([next.status, next.headers.get("x-svc-worker")]).toEqual([200, worker]);
    expect((await lb.health()).requests.failed).toBe(1);
    const line = `lb: worker ${worker} did not answer a request within 1000 ms (executionTimeout): 504, not retried`;
    await until("the timeout in the logs", async () => (await lb.logLines()).find((l) => l.text === line));
  });

  it("lets an answer that has begun (a stream) run past executionTimeout", async () => {
    const response = await fetch(`${lb.base}/events?count=4&gap=600`, { headers: lb.auth });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text.match(/^data: /gm)?.length).toBe(4);
  });
});
