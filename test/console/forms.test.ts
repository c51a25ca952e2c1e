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
