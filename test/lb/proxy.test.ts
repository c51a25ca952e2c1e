// Load-balanced endpoints through the real proxy: fixtures/lb-app built for real, deployed to a real service
// whose scaler starts real worker processes; every call is a fetch to {service}/lb/{endpoint_id}/...

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { until, useLbApp } from "./harness.js";

// Twice: with the LB front (lb/front.ts) serving what it can, and with node:http serving everything (the path the
// front hands connections to), so both keep the same behaviour.
describe.each([true, false])("lbFront: %s", (lbFront) => {
  // idleTimeout 5 s: the deploy's probe worker (docs/deploy.md, Releases) idles out before the cold-start test.
  const lb = useLbApp({ workersMin: 0, workersMax: 2, maxConcurrency: 1, idleTimeout: 5 }, { lbFront });

  describe(`a load-balanced endpoint behind the proxy (${lbFront ? "LB front" : "node:http only"})`, () => {
    it("refuses a request without a key (401 problem) and starts no worker for it", async () => {
      const response = await fetch(`${lb.base}/items/1`);
      expect(response.status).toBe(401);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      expect(await response.json()).toMatchObject({ title: "Unauthorized", status: 401 });
      const wrong = await fetch(`${lb.base}/items/1`, { headers: { authorization: "Bearer nope" } });
      expect(wrong.status).toBe(401);
      expect((await lb.health()).coldStarts).toEqual({ count: 0, lastMs: null });
    });

    it("lists its route handlers as its functions, and still has no job API (nor OpenAI route)", async () => {
      // Several functions would make a queue endpoint's /run require `function`; an LB endpoint has no /run at all.
      const deployed = lb.app.endpoints.find((e) => e.name === "api")!;
      expect(deployed.type).toBe("lb");
      const manifest = JSON.parse(readFileSync(join(lb.app.dir, "project", ".svc", "svc_manifest.json"), "utf8"));
      expect(manifest.resources.api.functions.length).toBeGreaterThan(1);
      for (const path of ["run", "runsync"]) {
        const run = await fetch(`${lb.app.service.url}/v2/${lb.endpointId}/${path}`, { method: "POST", headers: lb.auth, body: '{"input":{}}' });
        expect([path, run.status, ((await run.json()) as { detail: string }).detail]).toEqual([
          path,
          400,
          `Endpoint ${lb.endpointId} is load-balanced; it has no job API`,
        ]);
      }
      const chat = await fetch(`${lb.app.service.url}/v2/${lb.endpointId}/openai/v1/models`, { headers: lb.auth });
      expect(chat.status).toBe(400);
      expect((await lb.health()).coldStarts).toEqual({ count: 0, lastMs: null });
    });

    it("scales from zero on the first request, which waits through the cold start (/ping 204, then 200)", async () => {
      await until(
        "the deploy's worker to idle out",
        async () => {
          const w = (await lb.health()).workers;
          return w.idle + w.running + w.initializing === 0 ? true : undefined;
        },
        20_000,
      );
      const started = Date.now();
      const response = await fetch(`${lb.base}/items/abc?q=z`, { headers: lb.auth });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { id: string; q: string };
      expect(body).toMatchObject({ id: "abc", q: "z" });
      const worker = response.headers.get("x-svc-worker")!;
      expect(worker).toMatch(/^w/);
      // The fixture takes 600 ms to load: the request waited for it.
      expect(Date.now() - started).toBeGreaterThanOrEqual(600);

      const lines = await lb.logLines();
      const texts = lines.filter((l) => l.workerId === worker).map((l) => l.text);
      const initializing = texts.findIndex((t) => t.includes("answered /ping 204: initializing"));
      const ready = texts.findIndex((t) => t.includes("answered /ping 200: ready"));
      expect(initializing).toBeGreaterThanOrEqual(0);
      expect(ready).toBeGreaterThan(initializing);
      expect(texts.some((t) => /^cold start: the first request after idle waited \d+ ms/.test(t))).toBe(true);
      // The process driver gave the worker a local socket, and the proxy reaches it there (docs/lb.md).
      expect(texts.some((t) => /^lb: worker w\w+ registered at http:\/\/127\.0\.0\.1:\d+ \(the proxy uses its local socket \/.+\.sock\)/.test(t))).toBe(true);

      const h = await lb.health();
      expect(h.coldStarts.count).toBe(1);
      expect(h.coldStarts.lastMs).toBeGreaterThanOrEqual(600);
      expect(h.requests).toMatchObject({ served: 1, failed: 0, inFlight: 0, waiting: 0 });

      // Warm now: no second cold start.
      expect((await fetch(`${lb.base}/items/again`, { headers: lb.auth })).status).toBe(200);
      expect((await lb.health()).coldStarts.count).toBe(1);
    });

    it("passes path parameters, query strings, JSON bodies, statuses and headers both ways", async () => {
      const encoded = await fetch(`${lb.base}/items/a%20b%2Fc?q=${encodeURIComponent("x&y")}`, { headers: lb.auth });
      expect(await encoded.json()).toMatchObject({ id: "a b/c", q: "x&y" });

      const posted = await fetch(`${lb.base}/echo`, {
        method: "POST",
        headers: { ...lb.auth, "content-type": "application/json" },
        body: JSON.stringify({ n: 7, list: [1, 2], text: "héllo" }),
      });
      expect(posted.status).toBe(200);
      expect(await posted.json()).toEqual({ got: { n: 7, list: [1, 2], text: "héllo" }, contentType: "application/json" });

      const teapot = await fetch(`${lb.base}/teapot`, { headers: lb.auth });
      expect(teapot.status).toBe(418);
      expect(teapot.headers.get("x-app")).toBe("lb-app");
      expect(teapot.headers.get("set-cookie")).toBe("a=1");
      expect(teapot.headers.get("x-svc-worker")).toMatch(/^w/);
      expect(await teapot.text()).toBe("short and stout");

      // The worker's own 404 and 405 come through unchanged.
      expect((await fetch(`${lb.base}/nothing-here`, { headers: lb.auth })).status).toBe(404);
      const wrongMethod = await fetch(`${lb.base}/echo`, { headers: lb.auth });
      expect([wrongMethod.status, wrongMethod.headers.get("allow")]).toEqual([405, "POST"]);
    });

    it("holds the worker's stream back while the caller does not read, then delivers every byte (backpressure end to end)", async () => {
      const marker = join(lb.app.dir, `big-${String(lbFront)}.txt`);
      const pieces = 256; // 64 KiB each: 16 MiB, far more than the sockets on the way can hold
      const made = () =>
        Number(
          (() => {
            try {
              return readFileSync(marker, "utf8");
            } catch {
              return "0";
            }
          })(),
        );
      const received: Buffer[] = [];
      const done = new Promise<number>((resolve, reject) => {
        const req = request(`${lb.base}/big?pieces=${pieces}&marker=${encodeURIComponent(marker)}`, { headers: lb.auth, agent: false }, (res) => {
          res.pause(); // read nothing for now
          void (async () => {
            // Production stalls while nobody reads: the count stops moving, short of the whole.
            let last = -1;
            await until(
              "the producer to stall",
              async () => {
                await new Promise((r) => setTimeout(r, 400));
                const now = made();
                const stalled = now > 0 && now === last;
                last = now;
                return stalled || undefined;
              },
              20_000,
            );
            expect(made()).toBeLessThan(pieces);
            res.on("data", (chunk: Buffer) => received.push(chunk));
            res.on("end", () => resolve(res.statusCode ?? 0));
            res.resume();
          })().catch(reject);
        });
        req.on("error", reject);
        req.end();
      });
      expect(await done).toBe(200);
      const body = Buffer.concat(received);
      expect(body.length).toBe(pieces * 65536);
      for (let k = 0; k < pieces; k++) expect([body[k * 65536], body[k * 65536 + 65535]]).toEqual([k % 251, k % 251]);
      expect(made()).toBe(pieces);
    });

    it("round-trips a binary body byte for byte", async () => {
      const bytes = randomBytes(300_000);
      const response = await fetch(`${lb.base}/bytes`, { method: "POST", headers: { ...lb.auth, "content-type": "application/octet-stream" }, body: bytes });
      expect(response.status).toBe(201);
      expect(response.headers.get("content-type")).toBe("application/octet-stream");
      expect(response.headers.get("x-byte-count")).toBe(String(bytes.length));
      expect(Buffer.from(await response.arrayBuffer()).equals(bytes)).toBe(true);
    });

    it("round-trips a chunked upload (no content-length) byte for byte, and answers HEAD without a body", async () => {
      const parts = [randomBytes(70_000), randomBytes(5), randomBytes(100_000)];
      const answer = await new Promise<{ status: number; count: string | undefined; body: Buffer }>((resolve, reject) => {
        const req = request(`${lb.base}/bytes`, { method: "POST", headers: { ...lb.auth, "content-type": "application/octet-stream" } }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode!, count: res.headers["x-byte-count"] as string | undefined, body: Buffer.concat(chunks) }));
        });
        req.on("error", reject);
        // Written in pieces, a tick apart: the body goes out chunked, as it is produced.
        req.write(parts[0]);
        setTimeout(() => {
          req.write(parts[1]);
          req.end(parts[2]);
        }, 20);
      });
      const sent = Buffer.concat(parts);
      expect([answer.status, answer.count]).toEqual([201, String(sent.length)]);
      expect(answer.body.equals(sent)).toBe(true);
      const head = await fetch(`${lb.base}/items/h1?q=x`, { method: "HEAD", headers: lb.auth });
      expect(head.status).toBe(200);
      expect(head.headers.get("x-svc-worker")).toBeTruthy();
      expect(await head.text()).toBe("");
    });

    it("passes a server-sent event stream through as it is produced", async () => {
      const response = await fetch(`${lb.base}/events?count=5&gap=300`, { headers: lb.auth });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("text/event-stream");
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      const received: Array<{ i: number; at: number; receivedAt: number }> = [];
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = JSON.parse(buffer.slice(0, end).replace(/^data: /, "")) as { i: number; at: number };
          received.push({ ...event, receivedAt: Date.now() });
          buffer = buffer.slice(end + 2);
        }
      }
      expect(received.map((e) => e.i)).toEqual([0, 1, 2, 3, 4]);
      // The first event reached the client before the handler had even produced the last one.
      expect(received[0]!.receivedAt).toBeLessThan(received[4]!.at);
      expect(received[4]!.receivedAt - received[0]!.receivedAt).toBeGreaterThanOrEqual(900);
    });

    it("routes by Host: {endpoint_id}.lb.localhost", async () => {
      const url = new URL(lb.app.service.url);
      const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          { host: url.hostname, port: url.port, path: "/items/by-host?q=1", headers: { ...lb.auth, host: `${lb.endpointId}.lb.localhost:${url.port}` } },
          (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (body += c));
            res.on("end", () => resolve({ status: res.statusCode!, body }));
          },
        );
        req.on("error", reject);
        req.end();
      });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toMatchObject({ id: "by-host", q: "1" });
    });

    it("scales on in-flight requests and balances by least outstanding requests", async () => {
      // Three slow requests at once on one worker: the scaler starts the second (workersMax 2).
      const busy = Array.from({ length: 3 }, () => fetch(`${lb.base}/slow?ms=1500`, { headers: lb.auth }));
      await until("a second ready worker", async () => ((await lb.health()).pool.ready === 2 ? true : undefined), 20_000);
      await Promise.all((await Promise.all(busy)).map((r) => r.text()));
      const answers = await Promise.all(Array.from({ length: 4 }, () => fetch(`${lb.base}/slow?ms=400`, { headers: lb.auth })));
      const perWorker = new Map<string, number>();
      for (const a of answers) {
        expect(a.status).toBe(200);
        await a.text();
        const w = a.headers.get("x-svc-worker")!;
        perWorker.set(w, (perWorker.get(w) ?? 0) + 1);
      }
      expect([...perWorker.values()].sort()).toEqual([2, 2]);
    });

    it("answers 502 problem+json when the worker dies mid-request, and does not retry", async () => {
      const marker = join(lb.app.dir, "crash-calls.txt");
      const response = await fetch(`${lb.base}/crash?marker=${encodeURIComponent(marker)}`, { method: "POST", headers: lb.auth });
      expect(response.status).toBe(502);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      const problem = (await response.json()) as { title: string; status: number; detail: string };
      expect(problem).toMatchObject({ title: "Bad Gateway", status: 502 });
      expect(problem.detail).toMatch(/not retried/);
      const dead = response.headers.get("x-svc-worker");
      expect(dead).toMatch(/^w/);
      // Time for a retry to have happened, had there been one: still one call.
      await new Promise((r) => setTimeout(r, 1500));
      expect(readFileSync(marker, "utf8")).toBe("call\n");
      expect((await lb.health()).requests.failed).toBe(1);
      // The endpoint keeps serving, never from the dead worker.
      const after = await fetch(`${lb.base}/items/after`, { headers: lb.auth });
      expect(after.status).toBe(200);
      expect(after.headers.get("x-svc-worker")).not.toBe(dead);
    });

    // (fetch keeps one connection: the first test's 401 handed it to node:http, so most requests above took that
    // path; the new connections fetch opened for concurrent requests met the front.)
    it(lbFront ? "served some of these requests on the LB front" : "has no LB front when it is turned off", () => {
      const stats = lb.app.service.lbFrontStats();
      if (lbFront) expect(stats!.served).toBeGreaterThan(0);
      else expect(stats).toBeUndefined();
    });
  });
});
