import { describe, expect, it } from "vitest";
import { examplePath, lbCurl, localEndpoints, queueCurl } from "./access.js";
import type { Manifest } from "svc/internal";

describe("curls users paste", () => {
  it("queue endpoints: /runsync, naming the function only when the endpoint serves several", () => {
    expect(queueCurl("http://127.0.0.1:1/v2/abc", "k", [])).toBe(
      `curl -s -X POST http://127.0.0.1:1/v2/abc/runsync -H "Authorization: Bearer k" -H "Content-Type: application/json" -d '{"input":{}}'`,
    );
    expect(queueCurl("http://h/v2/abc", "k", ["one"])).toContain(`-d '{"input":{}}'`);
    expect(queueCurl("http://h/v2/abc", "k", ["embed", "rank"])).toContain(`-d '{"input":{},"function":"embed"}'`);
  });

  it("load-balanced endpoints: a GET route first, with its path parameters filled in", () => {
    expect(lbCurl("http://h/lb/x", ["POST /echo", "GET /items/:id/tags/:tag"], "k")).toBe(
      `curl -s -X GET http://h/lb/x/items/1/tags/1 -H "Authorization: Bearer k"`,
    );
    expect(examplePath("/items/:id")).toBe("/items/1");
    expect(examplePath("/a:b/c")).toBe("/a:b/c");
    expect(lbCurl("http://h/lb/x", [], "k")).toBe(`curl -s -X GET http://h/lb/x/ping -H "Authorization: Bearer k"`);
  });

  it("a local session's load-balanced endpoints are reached at {service}/lb/{id}, queue ones at the job API", () => {
    const manifest = {
      resources: { api: { functions: [] }, jobs: { functions: [{ name: "a" }, { name: "b" }] } },
      routes: { api: { "GET /items/:id": {}, "POST /echo": {} } },
    } as unknown as Manifest;
    const [api, jobs] = localEndpoints(
      [
        { id: "aa", name: "api", type: "lb", url: "http://s/v2/aa" },
        { id: "bb", name: "jobs", type: "queue", url: "http://s/v2/bb" },
      ],
      manifest,
      "http://s",
      "KEY",
    );
    expect(api).toMatchObject({
      url: "http://s/lb/aa",
      routes: ["GET /items/:id", "POST /echo"],
      functions: [],
      curl: `curl -s -X GET http://s/lb/aa/items/1 -H "Authorization: Bearer KEY"`,
    });
    expect(jobs).toMatchObject({ url: "http://s/v2/bb", functions: ["a", "b"], routes: [] });
    expect(jobs!.curl).toContain(`-d '{"input":{},"function":"a"}'`);
  });
});
