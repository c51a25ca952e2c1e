import { describe, expect, it } from "vitest";
import { ColdStarts } from "./cold-starts.js";

describe("ColdStarts", () => {
  it("times a cold start from its first start to the first job taken, once, and counts each", () => {
    const cold = new ColdStarts();
    expect(cold.taken("ep1", 1_000)).toBeUndefined();
    cold.began("ep1", 1_000);
    cold.began("ep1", 1_500);
    expect(cold.taken("ep1", 3_250)).toBe(2_250);
    expect(cold.taken("ep1", 4_000)).toBeUndefined();
    cold.began("ep1", 10_000);
    expect(cold.taken("ep1", 10_400)).toBe(400);
    expect(cold.counts.get("ep1")).toEqual({ count: 2, lastMs: 400 });
    expect(cold.counts.has("ep2")).toBe(false);
  });
});
