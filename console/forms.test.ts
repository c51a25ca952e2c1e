// The console's pure form helpers: the API's `$.field: message` errors by field, env lines, key scopes.

import { expect, it } from "vitest";
import { fieldErrors } from "./api.js";
import { endpointCurl, envText, exampleBody, parseEnv, scopesOf, sensibleExample } from "./forms.js";

it("groups the API's 422 errors by top-level field, keeping the rest apart", () => {
  expect(
    fieldErrors(["$.size: must be at least 10", "$.size: must be an integer", "$.env.A: must be a string", "$: must be an object", "something else"]),
  ).toEqual({ size: ["must be at least 10", "must be an integer"], env: ["must be a string"], "": ["$: must be an object", "something else"] });
});

it("reads KEY=value lines (values may hold '='), skips blanks and comments, reports the rest", () => {
  expect(parseEnv("A=1\n\n# note\nB = x=y\nnot a pair\n=nokey")).toEqual({ env: { A: "1", B: " x=y" }, bad: ["not a pair", "=nokey"] });
  expect(parseEnv(envText({ A: "1", URL: "http://h/?a=b" })).env).toEqual({ A: "1", URL: "http://h/?a=b" });
});

it("adds a jobs:<id> scope per endpoint id typed", () => {
  expect(scopesOf(["management:read"], " abc123, def456  ghi ")).toEqual(["management:read", "jobs:abc123", "jobs:def456", "jobs:ghi"]);
  expect(scopesOf([], "")).toEqual([]);
});

it("says how long ago or until a time is, in words", async () => {
  const { relativeTime } = await import("./forms.js");
  const now = 1_000_000_000_000;
  expect(relativeTime(now - 10_000, now)).toBe("just now");
  expect(relativeTime(now - 5 * 60_000, now)).toBe("5 min ago");
  expect(relativeTime(now - 3 * 3_600_000, now)).toBe("3 h ago");
  expect(relativeTime(now - 86_400_000, now)).toBe("1 day ago");
  expect(relativeTime(now + 7 * 86_400_000, now)).toBe("in 7 days");
});

it("starts Try it from the function's example input, naming the function when there are several", async () => {
  const { exampleBody } = await import("./forms.js");
  const prompt = { prompt: "Hello! Say something nice in one sentence." };
  expect(JSON.parse(exampleBody([], undefined))).toEqual({ input: prompt });
  expect(JSON.parse(exampleBody([{ name: "echo", kind: "function" }], undefined))).toEqual({ input: prompt });
  const greeter = [
    { name: "bye", kind: "method", class: "Greeter", exampleInput: { name: "" } },
    { name: "hello", kind: "method", class: "Greeter", exampleInput: { name: "", times: 0 } },
  ];
  expect(JSON.parse(exampleBody(greeter, undefined))).toEqual({ input: { name: "Ada" }, function: "bye" });
  expect(JSON.parse(exampleBody(greeter, "hello"))).toEqual({ input: { name: "Ada", times: 1 }, function: "hello" });
});

it("starts Try it from an example with something in it: never an empty prompt", () => {
  expect(sensibleExample({ prompt: "", maxTokens: 0, stream: false, tags: [""] })).toEqual({
    prompt: "Hello! Say something nice in one sentence.",
    maxTokens: 1,
    stream: false,
    tags: ["example"],
  });
  expect(sensibleExample({ name: "", formal: false })).toEqual({ name: "Ada", formal: false });
  // No type to start from (an untyped handler, a REST endpoint): a prompt, not {}.
  expect(JSON.parse(exampleBody([], undefined))).toEqual({ input: { prompt: "Hello! Say something nice in one sentence." } });
  expect(JSON.parse(exampleBody([{ name: "f", kind: "function", exampleInput: {} }], "f")).input).toEqual({
    prompt: "Hello! Say something nice in one sentence.",
  });
  const two = [
    { name: "a", kind: "method", exampleInput: { text: "" } },
    { name: "b", kind: "method" },
  ];
  expect(JSON.parse(exampleBody(two, "a"))).toEqual({ input: { text: "Hello from the svc console" }, function: "a" });
});

it("prints a curl with the CLI's key placeholder and the example body, quoted for the shell", () => {
  const curl = endpointCurl({ type: "queue", url: "http://h/v2/e1", functions: [{ name: "f", kind: "function", exampleInput: { name: "" } }] });
  expect(curl).toBe(
    `curl -s -X POST http://h/v2/e1/runsync -H "Authorization: Bearer $SVC_API_KEY" -H "Content-Type: application/json" -d '{"input":{"name":"Ada"}}'`,
  );
  expect(endpointCurl({ type: "queue", url: "http://h/v2/e1", functions: [{ name: "f", kind: "function", exampleInput: { text: "it's" } }] })).toContain(
    `-d '{"input":{"text":"it'\\''s"}}'`,
  );
  expect(endpointCurl({ type: "lb", url: "http://h/lb/e2", routes: ["POST /chat", "GET /items/:id"] })).toBe(
    'curl -s -X GET http://h/lb/e2/items/1 -H "Authorization: Bearer $SVC_API_KEY"',
  );
});
