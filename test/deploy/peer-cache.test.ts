// Cross-endpoint address lookup inside a worker: through the state API, cached for 300 s; a failed refresh
// keeps the cached address. A real HTTP server plays the state API.
import { afterEach, describe, expect, it, vi } from "vitest";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { clearPeerCache, PEER_CACHE_MS, resolveEndpoint, setRuntime } from "svc/internal";

afterEach(() => {
  setRuntime(undefined);
  clearPeerCache();
  vi.useRealTimers();
});

describe("peer address cache", () => {
  it("looks a peer up once per 300 s and keeps the cached address when a refresh fails", async () => {
    let lookups = 0;
    let failing = false;
    let peerId = "aaaa000000000001";
    const server = createServer((req, res) => {
      lookups++;
      expect(req.headers.authorization).toBe("Bearer worker-api-key");
      expect(req.url).toBe("/v1/apps/shop/environments/prod");
      if (failing) {
        res.writeHead(503, { "content-type": "application/problem+json" });
        res.end(JSON.stringify({ title: "Service Unavailable", status: 503, detail: "down" }));
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ app: "shop", env: "prod", endpoints: [{ name: "worker", id: peerId, url: `http://peer/v2/${peerId}`, type: "queue" }] }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      setRuntime({ endpointName: "caller", endpointId: "c1", app: "shop", env: "prod", apiUrl, apiKey: "worker-api-key" });
      vi.useFakeTimers({ toFake: ["Date"] });
      const first = await resolveEndpoint("worker");
      expect(first).toEqual({ url: "http://peer/v2/aaaa000000000001", apiKey: "worker-api-key" });
      await resolveEndpoint("worker");
      expect(lookups).toBe(1);

      // After 300 s the address is looked up again (and a moved peer is followed).
      peerId = "bbbb000000000002";
      vi.setSystemTime(Date.now() + PEER_CACHE_MS + 1);
      expect((await resolveEndpoint("worker")).url).toBe("http://peer/v2/bbbb000000000002");
      expect(lookups).toBe(2);

      // The state API fails: the cached address is kept.
      failing = true;
      vi.setSystemTime(Date.now() + PEER_CACHE_MS + 1);
      expect((await resolveEndpoint("worker")).url).toBe("http://peer/v2/bbbb000000000002");
      expect(lookups).toBe(3);
      expect(PEER_CACHE_MS).toBe(300_000);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
