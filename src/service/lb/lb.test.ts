import { describe, expect, it } from "vitest";
import { lbDemand, pickWorker } from "./balance.js";
import { noWorkersRefusal } from "./index.js";
import { addressProblem, lbEndpointUrl, lbTarget } from "./address.js";
import { problemOf } from "../http/problems.js";
import { classifyPing, pingVerdict } from "./ping.js";
import { lbByHost, lbByPath, mayBeProviderCall, mayBeRead, mayBeRun, mayBeTake } from "./front-sniff.js";
import { downstreamRawHeaders, requestHead } from "./exchange.js";
import { downstreamHeaders, upstreamHeaders } from "./proxy.js";

describe("pickWorker", () => {
  const w = (id: string, inFlight: number, ready = true) => ({ id, inFlight, ready });
  it("takes the ready worker with the fewest outstanding requests", () => {
    expect(pickWorker([w("a", 3), w("b", 1), w("c", 2)])?.id).toBe("b");
    expect(pickWorker([w("a", 3), w("b", 0, false), w("c", 2)])?.id).toBe("c");
    expect(pickWorker([w("a", 0, false)])).toBeUndefined();
    expect(pickWorker([])).toBeUndefined();
  });
  it("takes turns among equally loaded workers", () => {
    const list = [w("a", 1), w("b", 1), w("c", 1)];
    expect(pickWorker(list)?.id).toBe("a");
    expect(pickWorker(list, "a")?.id).toBe("b");
    expect(pickWorker(list, "c")?.id).toBe("a");
    expect(pickWorker(list, "gone")?.id).toBe("a");
  });
  it("turns only among the least loaded, whatever their order", () => {
    // The last picked carries more now: the first of the least loaded.
    expect(pickWorker([w("a", 2), w("b", 1), w("c", 1)], "a")?.id).toBe("b");
    // A less loaded worker after the last picked one starts the count again.
    expect(pickWorker([w("a", 1), w("b", 1), w("c", 0), w("d", 0)], "a")?.id).toBe("c");
    expect(pickWorker([w("a", 1), w("c", 0), w("d", 0)], "c")?.id).toBe("d");
    expect(pickWorker([w("c", 0), w("a", 1), w("d", 0)], "d")?.id).toBe("c");
    expect(pickWorker([w("c", 0), w("x", 0, false), w("d", 0)], "c")?.id).toBe("d");
  });
  it("asks the caller's predicate which workers are ready", () => {
    const pool = new Map([
      ["a", { id: "a", inFlight: 0, endpoint: "e1" }],
      ["b", { id: "b", inFlight: 0, endpoint: "e2" }],
    ]);
    expect(pickWorker(pool.values(), undefined, (x) => x.endpoint === "e2")?.id).toBe("b");
    expect(pickWorker(pool.values(), undefined, (x) => x.endpoint === "e3")).toBeUndefined();
  });
  it("reports demand as queued (waiting) and in progress (in flight)", () => {
    expect(lbDemand(2, 5)).toEqual({ queued: 2, inProgress: 5 });
  });
});

describe("the front's first look at a request's bytes", () => {
  const b = (text: string) => Buffer.from(text, "latin1");
  it("tells an LB path by the bytes after the method", () => {
    expect(lbByPath(b("GET /lb/abc/items HTTP/1.1\r\n"))).toBe(true);
    expect(lbByPath(b("OPTIONS /lb/abc HTTP/1.1\r\n"))).toBe(true);
    expect(lbByPath(b("DELETE /lb/"))).toBe(true);
    expect(lbByPath(b("GET /lbx/abc HTTP/1.1\r\n"))).toBe(false);
    expect(lbByPath(b("GET /v2/abc/run HTTP/1.1\r\n"))).toBe(false);
    expect(lbByPath(b("GET  /lb/abc HTTP/1.1\r\n"))).toBe(false);
    // No space where a method ends, or too little to tell.
    expect(lbByPath(b("GETTINGLONG /lb/abc HTTP/1.1\r\n"))).toBe(false);
    expect(lbByPath(b("GET /lb"))).toBe(false);
    expect(lbByPath(b(""))).toBe(false);
  });
  it("tells an LB host within the head only", () => {
    const head = "GET / HTTP/1.1\r\nhost: abc.lb.localhost:8080\r\n\r\n";
    expect(lbByHost(b(head), head.indexOf("\r\n\r\n"))).toBe(true);
    const elsewhere = "GET / HTTP/1.1\r\nhost: example.com\r\n\r\nabc.lb.localhost";
    expect(lbByHost(b(elsewhere), elsewhere.indexOf("\r\n\r\n"))).toBe(false);
  });
  it("tells the job API's /run, reads and a worker's take by their first bytes", () => {
    expect(mayBeRun(b("POST /v2/abc/run HTTP/1.1"))).toBe(true);
    expect(mayBeRun(b("POST /v2"))).toBe(false);
    expect(mayBeRun(b("GET /v2/abc/run HTTP/1.1"))).toBe(false);
    expect(mayBeRead(b("GET /v2/abc/health HTTP/1.1"))).toBe(true);
    expect(mayBeRead(b("get /v2/abc/health HTTP/1.1"))).toBe(false);
    expect(mayBeTake(b("POST /_worker/v1/take HTTP/1.1"))).toBe(true);
    expect(mayBeTake(b("POST /_worker/v1/takes HTTP/1.1"))).toBe(false);
    expect(mayBeProviderCall(b("GET /_worker/provider/v2/ep/job-take/w?x=1 HTTP/1.1"))).toBe(true);
    expect(mayBeProviderCall(b("POST /_worker/provider/v2/ep/job-done/w/j?x=1 HTTP/1.1"))).toBe(true);
    expect(mayBeProviderCall(b("PUT /_worker/provider/v2/ep/job-done/w/j HTTP/1.1"))).toBe(false);
    expect(mayBeProviderCall(b("GET /_worker/v1/take HTTP/1.1"))).toBe(false);
  });
});

describe("lbTarget", () => {
  it("reads the endpoint and the forwarded path from /lb/{id}/...", () => {
    expect(lbTarget("/lb/abc123/items/a%20b?q=1&r=2", undefined)).toEqual({ endpointId: "abc123", path: "/items/a%20b?q=1&r=2" });
    expect(lbTarget("/lb/abc123", undefined)).toEqual({ endpointId: "abc123", path: "/" });
    expect(lbTarget("/lb/abc123?x=1", undefined)).toEqual({ endpointId: "abc123", path: "/?x=1" });
    expect(lbTarget("/v2/abc123/run", "127.0.0.1:8080")).toBeUndefined();
  });
  it("reads the endpoint from a Host of {id}.lb.localhost", () => {
    expect(lbTarget("/status?x=1", "abc123.lb.localhost:8080")).toEqual({ endpointId: "abc123", path: "/status?x=1" });
    expect(lbTarget("/status", "ABC123.lb.localhost")).toEqual({ endpointId: "abc123", path: "/status" });
    expect(lbTarget("/status", "evil.lb.localhost.example.com")).toBeUndefined();
  });
  it("builds the endpoint URL", () => {
    expect(lbEndpointUrl("http://127.0.0.1:8080/", "abc")).toBe("http://127.0.0.1:8080/lb/abc");
  });
});

describe("addressProblem", () => {
  it("accepts scheme://host:port only", () => {
    expect(addressProblem("http://127.0.0.1:4000")).toBeUndefined();
    expect(addressProblem("https://worker.internal:443")).toBeUndefined();
    expect(addressProblem("ftp://x")).toMatch(/http\(s\)/);
    expect(addressProblem("http://u:p@x:1")).toMatch(/only/);
    expect(addressProblem("http://x:1/path")).toMatch(/only/);
    expect(addressProblem(42)).toMatch(/must be a string/);
    expect(addressProblem("not a url")).toMatch(/http\(s\)/);
  });
});

describe("ping", () => {
  it("classifies /ping answers", () => {
    expect([200, 204, 404, 405, 500, undefined].map(classifyPing)).toEqual(["ready", "initializing", "missing", "missing", "unhealthy", "unreachable"]);
  });
  it("explains a missing /ping", () => {
    const verdict = pingVerdict("http://w:1", { state: "missing", status: 404 });
    expect(verdict.ok).toBe(false);
    expect(verdict.message).toContain("has no /ping path");
    expect(pingVerdict("http://w:1", { state: "initializing", status: 204 }).ok).toBe(true);
  });
});

describe("proxy headers", () => {
  it("drops hop-by-hop headers and the API key on the way up, and says who asked", () => {
    const up = upstreamHeaders(
      { host: "svc:1", connection: "keep-alive, x-private", "x-private": "1", authorization: "Bearer k", "content-type": "application/json", "x-app": "y" },
      { host: "svc:1", remote: "127.0.0.1", endpointId: "e1" },
    );
    expect(up).toEqual({
      "content-type": "application/json",
      "x-app": "y",
      "x-forwarded-host": "svc:1",
      "x-forwarded-for": "127.0.0.1",
      "x-forwarded-proto": "http",
    });
  });
  it("sends the worker's credential up in place of any the caller sent", () => {
    const incoming = { host: "svc:1", "x-svc-lb-credential": "forged", "x-app": "y" };
    expect(upstreamHeaders(incoming, { endpointId: "e1", credential: "own" })).toEqual({
      "x-app": "y",
      "x-svc-lb-credential": "own",
      "x-forwarded-proto": "http",
    });
    // A worker that asks none (a prebuilt image's): the caller's copy is still not passed on.
    expect(upstreamHeaders(incoming, { endpointId: "e1" })).toEqual({ "x-app": "y", "x-forwarded-proto": "http" });
  });
  it("keeps the worker's headers on the way down and names the worker", () => {
    const down = downstreamHeaders({ "content-type": "text/event-stream", "transfer-encoding": "chunked", "set-cookie": ["a=1", "b=2"] }, "w1");
    expect(down).toEqual({ "content-type": "text/event-stream", "set-cookie": ["a=1", "b=2"], "x-svc-worker": "w1" });
  });
});

describe("raw forwarding heads", () => {
  it("writes the request head: Host of the worker, no hop-by-hop headers nor API key, X-Forwarded-*, duplicates kept", () => {
    const raw = [
      "Host",
      "svc:1",
      "Authorization",
      "Bearer k",
      "Connection",
      "keep-alive, x-private",
      "X-Private",
      "p",
      "Accept",
      "a",
      "Accept",
      "b",
      "X-Forwarded-For",
      "10.0.0.1",
      "Content-Length",
      "2",
    ];
    expect(requestHead("POST", "/items/1?q=2", "127.0.0.1:9000", raw, { host: "svc:1", remote: "127.0.0.1" }, false)).toBe(
      "POST /items/1?q=2 HTTP/1.1\r\nhost: 127.0.0.1:9000\r\nAccept: a\r\nAccept: b\r\nContent-Length: 2\r\n" +
        "x-forwarded-host: svc:1\r\nx-forwarded-for: 10.0.0.1, 127.0.0.1\r\nx-forwarded-proto: http\r\n\r\n",
    );
    expect(requestHead("POST", "/", "w:1", ["Transfer-Encoding", "chunked"], {}, true)).toBe(
      "POST / HTTP/1.1\r\nhost: w:1\r\nx-forwarded-proto: http\r\ntransfer-encoding: chunked\r\n\r\n",
    );
  });

  it("writes the worker's credential line after Host, and drops a caller's copy in any case", () => {
    const raw = ["X-Svc-Lb-Credential", "forged", "Accept", "a", "x-svc-lb-credential", "again"];
    expect(requestHead("GET", "/", "w:1", raw, {}, false, "x-svc-lb-credential: own\r\n")).toBe(
      "GET / HTTP/1.1\r\nhost: w:1\r\nx-svc-lb-credential: own\r\nAccept: a\r\nx-forwarded-proto: http\r\n\r\n",
    );
    expect(requestHead("GET", "/", "w:1", raw, {}, false)).toBe("GET / HTTP/1.1\r\nhost: w:1\r\nAccept: a\r\nx-forwarded-proto: http\r\n\r\n");
  });

  it("keeps the worker's headers on the way down (set-cookie twice too) and names the worker", () => {
    const raw = [
      "Content-Type",
      "text/plain",
      "Set-Cookie",
      "a=1",
      "Set-Cookie",
      "b=2",
      "Connection",
      "keep-alive",
      "Keep-Alive",
      "timeout=65",
      "Transfer-Encoding",
      "chunked",
    ];
    expect(downstreamRawHeaders(raw, "w1")).toEqual(["Content-Type", "text/plain", "Set-Cookie", "a=1", "Set-Cookie", "b=2", "x-svc-worker", "w1"]);
  });
});

describe("noWorkersRefusal", () => {
  it("is a 503 without Retry-After that says why and what to change, by kind of endpoint", () => {
    const rest = problemOf(noWorkersRefusal({ id: "e1", app: "" }, 'image "web:1" is not in the Docker engine'))!;
    expect([rest.status, rest.headers]).toEqual([503, undefined]);
    expect(rest.message).toBe(
      'Endpoint e1 has no workers and will get none: image "web:1" is not in the Docker engine; fix that, then update the endpoint (PATCH /v1/endpoints/e1 or `svc endpoint update e1`)',
    );
    expect(noWorkersRefusal({ id: "e1", app: "" }, undefined).message).toBe(
      "Endpoint e1 has no workers and will get none: its workersMax is 0; update the endpoint with a workersMax above 0 (PATCH /v1/endpoints/e1 or `svc endpoint update e1 --workers-max <n>`)",
    );
    expect(noWorkersRefusal({ id: "e2", app: "shop" }, undefined).message).toMatch(
      /its workersMax is 0; raise the maximum of its `workers` setting and deploy again/,
    );
  });
});
