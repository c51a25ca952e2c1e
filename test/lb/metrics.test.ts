// A load-balanced endpoint counted as it is used: after known traffic (three 200s, a 418 from the app, a 504 for a
// worker that did not answer within executionTimeout) its series say five requests, one error and a latency that
// holds the 504's wait; Prometheus has them by status class; usage has its requests. Both ways: the LB front, and
// node:http alone. (A request no worker answered in time, the service's 503, counts too: test/lb/waiting.test.ts.)

import { describe, expect, it } from "vitest";
import { useLbApp } from "./harness.js";

describe.each([true, false])("lbFront: %s", (lbFront) => {
  const lb = useLbApp({ workersMin: 1, workersMax: 1, executionTimeoutMs: 1000 }, { lbFront });

  it("counts its requests, 5xx answers and latency in its series, in Prometheus and in usage", async () => {
    for (const id of ["a", "b", "c"]) expect((await fetch(`${lb.base}/items/${id}`, { headers: lb.auth })).status).toBe(200);
    expect((await fetch(`${lb.base}/teapot`, { headers: lb.auth })).status).toBe(418);
    expect((await fetch(`${lb.base}/slow?ms=3000`, { headers: lb.auth })).status).toBe(504);

    const url = lb.app.service.url;
    const series = await (await fetch(`${url}/v1/endpoints/${lb.endpointId}/metrics?window=1h`, { headers: lb.auth })).json();
    expect(series.endpointType).toBe("lb");
    expect(series.totals).toMatchObject({ requests: 5, errors: 1, jobs: { COMPLETED: 0, FAILED: 0 } });
    expect(series.points.reduce((n: number, p: { requests: number }) => n + p.requests, 0)).toBe(5);
    // The 504 waited the executionTimeout (1 s) at least: the slowest of five is the p95.
    expect(series.totals.latencyMs.p50).toBeGreaterThan(0);
    expect(series.totals.latencyMs.p95).toBeGreaterThanOrEqual(950);

    // Added up with the caller's other endpoints (the console's home page).
    const all = await (await fetch(`${url}/v1/metrics?window=1h`, { headers: lb.auth })).json();
    expect(all.totals).toMatchObject({ requests: 5, errors: 1 });

    const text = await (await fetch(`${url}/metrics`, { headers: lb.auth })).text();
    const count = (code: string) =>
      Number(text.match(new RegExp(`^svc_lb_request_duration_seconds_count\\{endpoint="${lb.endpointId}",code="${code}"\\} (\\d+)$`, "m"))?.[1]);
    expect([count("2xx"), count("4xx"), count("5xx")]).toEqual([3, 1, 1]);

    const usage = await (await fetch(`${url}/v1/usage`, { headers: lb.auth })).json();
    const rows = usage.hours.filter((h: { endpointId: string }) => h.endpointId === lb.endpointId);
    expect(rows.reduce((n: number, h: { requests: number }) => n + h.requests, 0)).toBe(5);
    expect(usage.totals.requests).toBe(5);
  });
});
