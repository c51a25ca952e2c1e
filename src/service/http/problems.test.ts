import { describe, expect, it } from "vitest";
import { Refusal } from "../../errors.js";
import { StorageUnavailable } from "../store/faults.js";
import { HttpProblem, problemOf } from "./problems.js";

describe("problemOf: the core's refusals as HTTP answers", () => {
  it("answers each kind with its status, the detail and the listed faults unchanged", () => {
    const answers = (["invalid", "forbidden", "not-found", "conflict", "unprocessable", "unavailable"] as const).map((kind) => {
      const p = problemOf(new Refusal(kind, `a ${kind} request`, { errors: ["$.x: bad"] }))!;
      return [p.status, p.message, p.errors, p.headers];
    });
    expect(answers).toEqual([
      [400, "a invalid request", ["$.x: bad"], undefined],
      [403, "a forbidden request", ["$.x: bad"], undefined],
      [404, "a not-found request", ["$.x: bad"], undefined],
      [409, "a conflict request", ["$.x: bad"], undefined],
      [422, "a unprocessable request", ["$.x: bad"], undefined],
      [503, "a unavailable request", ["$.x: bad"], undefined],
    ]);
  });

  it("tells a refusal that clears by itself when to retry, a storage fault included", () => {
    expect(problemOf(new Refusal("unavailable", "busy", { retryAfterS: 7 }))!.headers).toEqual({ "retry-after": "7" });
    const storage = problemOf(new StorageUnavailable("full", new Error("SQLITE_FULL")))!;
    expect([storage.status, storage.headers, storage.message]).toEqual([
      503,
      { "retry-after": "5" },
      "The service's storage is full: nothing of this request was kept; retry in a few seconds",
    ]);
  });

  it("passes an HttpProblem through and leaves any other error (a bug) to the caller", () => {
    const problem = new HttpProblem(405, "no", { headers: { allow: "GET" } });
    expect(problemOf(problem)).toBe(problem);
    expect(problemOf(new Error("bug"))).toBeUndefined();
    expect(problemOf("thrown string")).toBeUndefined();
  });
});
