import { describe, expect, it } from "vitest";
import { planEviction } from "./eviction.js";

const m = (key: string, bytes: number, lastUsed: number) => ({ key, bytes, lastUsed });

describe("planEviction", () => {
  it("evicts nothing at or under the limit", () => {
    expect(planEviction([m("a", 5, 1), m("b", 5, 2)], 10, new Set())).toEqual({ evict: [], bytesAfter: 10, overLimit: false });
  });

  it("evicts the least recently used first, only as many as bring the cache under the limit", () => {
    expect(planEviction([m("new", 4, 9), m("old", 4, 1), m("mid", 4, 5)], 8, new Set())).toEqual({ evict: ["old"], bytesAfter: 8, overLimit: false });
    expect(planEviction([m("new", 4, 9), m("old", 4, 1), m("mid", 4, 5)], 4, new Set())).toEqual({ evict: ["old", "mid"], bytesAfter: 4, overLimit: false });
  });

  it("never evicts a model it is told to keep (a running worker's, one being fetched), and says when the cache stays over", () => {
    expect(planEviction([m("held", 4, 1), m("b", 4, 2), m("c", 4, 3)], 8, new Set(["held"]))).toEqual({ evict: ["b"], bytesAfter: 8, overLimit: false });
    expect(planEviction([m("held", 6, 1), m("new", 6, 2)], 8, new Set(["held", "new"]))).toEqual({ evict: [], bytesAfter: 12, overLimit: true });
  });
});
