// The console's pure form helpers: the API's `$.field: message` errors by field, env lines, key scopes.

import { expect, it } from "vitest";
import { fieldErrors } from "../../console/api.js";
import { envText, parseEnv, scopesOf } from "../../console/forms.js";

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
  const { relativeTime } = await import("../../console/forms.js");
  const now = 1_000_000_000_000;
  expect(relativeTime(now - 10_000, now)).toBe("just now");
  expect(relativeTime(now - 5 * 60_000, now)).toBe("5 min ago");
  expect(relativeTime(now - 3 * 3_600_000, now)).toBe("3 h ago");
  expect(relativeTime(now - 86_400_000, now)).toBe("1 day ago");
  expect(relativeTime(now + 7 * 86_400_000, now)).toBe("in 7 days");
});

it("starts Try it from the function's example input, naming the function when there are several", async () => {
  const { exampleBody } = await import("../../console/forms.js");
  expect(JSON.parse(exampleBody([], undefined))).toEqual({ input: {} });
  expect(JSON.parse(exampleBody([{ name: "echo", kind: "function" }], undefined))).toEqual({ input: {} });
  const greeter = [
    { name: "bye", kind: "method", class: "Greeter", exampleInput: { name: "" } },
    { name: "hello", kind: "method", class: "Greeter", exampleInput: { name: "", times: 0 } },
  ];
  expect(JSON.parse(exampleBody(greeter, undefined))).toEqual({ input: { name: "" }, function: "bye" });
  expect(JSON.parse(exampleBody(greeter, "hello"))).toEqual({ input: { name: "", times: 0 }, function: "hello" });
});
