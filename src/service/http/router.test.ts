import { describe, expect, it } from "vitest";
import { RouteTable, rowFor, type RouteRow } from "./router.js";
import { HttpProblem } from "./problems.js";
import { acceptsBareKey, goesToJobsReplica, ROUTES } from "../api.js";

const row = (methods: string[], pattern: string): RouteRow<string> => ({
  methods,
  pattern,
  auth: "user",
  body: "none",
  rateLimited: true,
  handler: `${methods.join(",")} ${pattern}`,
});

describe("RouteTable", () => {
  const table = new RouteTable([
    row(["GET", "POST"], "/v2/network-volumes"),
    row(["GET"], "/v2/network-volumes/:id"),
    row(["DELETE"], "/v2/network-volumes/:id"),
    row(["POST"], "/v2/:endpoint/run"),
    row(["GET"], "/v2/:endpoint/status/:job"),
    row(["GET", "POST"], "/v2/:endpoint/openai/*rest"),
  ]);

  it("matches literals and parameters, decoding them", () => {
    expect(table.match("/v2/ep1/status/j%2F1")?.params).toEqual({ endpoint: "ep1", job: "j/1" });
    expect(table.match("/v2/ep1/run")?.rows.map((r) => r.handler)).toEqual(["POST /v2/:endpoint/run"]);
    expect(table.match("/v2/ep1/status")).toBeUndefined();
    expect(table.match("/v2/ep1/run/extra")).toBeUndefined();
  });

  it("gives a path to the first pattern that matches, with every row of that pattern", () => {
    // "/v2/network-volumes/run" is a volume id, never endpoint "network-volumes"'s /run
    const m = table.match("/v2/network-volumes/run")!;
    expect(m.params).toEqual({ id: "run" });
    expect(m.rows.map((r) => r.handler)).toEqual(["GET /v2/network-volumes/:id", "DELETE /v2/network-volumes/:id"]);
    expect(rowFor(m, "DELETE").handler).toBe("DELETE /v2/network-volumes/:id");
  });

  it("takes the rest of the path, possibly empty", () => {
    expect(table.match("/v2/ep/openai/v1/chat/completions")?.params).toEqual({ endpoint: "ep", rest: "v1/chat/completions" });
    expect(table.match("/v2/ep/openai")?.params).toEqual({ endpoint: "ep", rest: "" });
  });

  it("answers 405 naming every method of the pattern; HEAD is served by GET", () => {
    const m = table.match("/v2/network-volumes/vol1")!;
    expect(rowFor(m, "HEAD").handler).toBe("GET /v2/network-volumes/:id");
    try {
      rowFor(m, "PUT");
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(HttpProblem);
      expect((err as HttpProblem).status).toBe(405);
      expect((err as HttpProblem).headers).toEqual({ allow: "GET, DELETE" });
    }
  });

  it("throws URIError for a path that is not valid percent-encoding", () => {
    expect(() => table.match("/v2/%E0%A4%A/run")).toThrow(URIError);
  });
});

describe("the service's route table", () => {
  it("declares each method of a pattern once", () => {
    const seen = new Set<string>();
    for (const r of ROUTES) {
      for (const m of r.methods) {
        const key = `${m} ${r.pattern}`;
        expect(seen.has(key), key).toBe(false);
        seen.add(key);
      }
    }
  });

  it("sends job traffic, worker calls, changes and log follows to the replica serving jobs; reads stay", () => {
    const id = "3f2a9c0d1e2b4a5c";
    expect(goesToJobsReplica("POST", `/v2/${id}/run`, undefined)).toBe(true);
    expect(goesToJobsReplica("GET", `/v2/${id}/status/j1`, undefined)).toBe(true);
    expect(goesToJobsReplica("GET", `/v2/${id}/openai/v1/models`, undefined)).toBe(true);
    expect(goesToJobsReplica("POST", "/_worker/v1/take", undefined)).toBe(true);
    expect(goesToJobsReplica("GET", `/lb/${id}/items`, undefined)).toBe(true);
    expect(goesToJobsReplica("POST", "/v1/keys", undefined)).toBe(true);
    expect(goesToJobsReplica("GET", `/v1/endpoints/${id}/logs?follow=1`, undefined)).toBe(true);
    expect(goesToJobsReplica("GET", `/v1/endpoints/${id}/logs`, undefined)).toBe(false);
    expect(goesToJobsReplica("GET", "/v2/network-volumes", undefined)).toBe(false);
    expect(goesToJobsReplica("GET", "/v1/keys", undefined)).toBe(false);
    expect(goesToJobsReplica("GET", "/v1/apps/a/environments/prod", undefined)).toBe(false);
  });

  it("takes the bare key only where a row says so", () => {
    expect(acceptsBareKey("/v2/ep1/run", undefined)).toBe(true);
    expect(acceptsBareKey("/v2/network-volumes/run", undefined)).toBe(false);
    expect(acceptsBareKey("/_worker/v1/take", undefined)).toBe(false);
  });
});
