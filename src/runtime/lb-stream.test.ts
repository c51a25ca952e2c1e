// A route server that starts before its handler is loaded (/ping 204, routes 503), and streamed
// Response bodies written as they are produced.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RouteDefinition } from "svc/internal";
import { serveRoutes, toResponse, type RouteServer } from "./lb.js";

const routes: RouteDefinition[] = [
  {
    method: "GET",
    path: "/ticks",
    handler: () => {
      let i = 0;
      const stream = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (i === 3) return controller.close();
          if (i > 0) await new Promise((r) => setTimeout(r, 150));
          controller.enqueue(new TextEncoder().encode(`tick ${i++}\n`));
        },
      });
      return new Response(stream, { headers: { "content-type": "text/plain" } });
    },
  },
];

describe("a route server that starts before its handler", () => {
  let server: RouteServer;
  beforeAll(async () => {
    server = await serveRoutes(null);
  });
  afterAll(async () => {
    await server.close();
  });

  it("answers /ping 204 and routes 503 until ready, then serves", async () => {
    expect((await fetch(`${server.address}/ping`)).status).toBe(204);
    const early = await fetch(`${server.address}/ticks`);
    expect([early.status, early.headers.get("retry-after"), early.headers.get("content-type")]).toEqual([503, "1", "application/problem+json"]);
    server.ready(routes);
    const ping = await fetch(`${server.address}/ping`);
    expect([ping.status, await ping.json()]).toEqual([200, { status: "healthy" }]);
  });

  it("writes a streamed Response chunk by chunk", async () => {
    const response = await fetch(`${server.address}/ticks`);
    expect(response.headers.get("content-length")).toBeNull();
    const reader = response.body!.getReader();
    const arrivals: number[] = [];
    let text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      arrivals.push(Date.now());
      text += new TextDecoder().decode(value);
    }
    expect(text).toBe("tick 0\ntick 1\ntick 2\n");
    expect(arrivals.length).toBe(3);
    expect(arrivals[2]! - arrivals[0]!).toBeGreaterThanOrEqual(250);
  });

  it("keeps a Response with a declared length whole", async () => {
    const whole = await toResponse(new Response("abc", { headers: { "content-length": "3" } }));
    expect([whole.stream, whole.body.toString()]).toEqual([undefined, "abc"]);
    const streamed = await toResponse(new Response("abc"));
    expect(streamed.stream).toBeDefined();
  });
});
