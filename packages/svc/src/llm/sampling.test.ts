import { describe, expect, it } from "vitest";
import { sampleIndex, seededRandom } from "./sampling.js";

const histogram = (weights: number[], options: { temperature: number; top_p: number }, draws = 4000) => {
  const random = seededRandom(7);
  const counts = weights.map(() => 0);
  for (let i = 0; i < draws; i++) counts[sampleIndex(weights, options, random)]!++;
  return counts;
};

describe("seededRandom", () => {
  it("repeats with a seed and differs between seeds", () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const c = seededRandom(43);
    const seqA = [a(), a(), a()];
    expect([b(), b(), b()]).toEqual(seqA);
    expect([c(), c(), c()]).not.toEqual(seqA);
    for (const x of seqA) expect(x >= 0 && x < 1).toBe(true);
  });
});

describe("sampleIndex", () => {
  it("picks the heaviest choice at temperature 0", () => {
    expect(histogram([1, 5, 2], { temperature: 0, top_p: 1 })).toEqual([0, 4000, 0]);
  });

  it("samples by weight at temperature 1", () => {
    const [a, b] = histogram([1, 3], { temperature: 1, top_p: 1 });
    expect(b! / (a! + b!)).toBeGreaterThan(0.7);
    expect(b! / (a! + b!)).toBeLessThan(0.8);
  });

  it("flattens the weights at a high temperature", () => {
    const [a, b] = histogram([1, 3], { temperature: 2, top_p: 1 });
    // 1^(1/2) : 3^(1/2) = 1 : 1.73 -> about 63% for the heavier one
    expect(b! / (a! + b!)).toBeGreaterThan(0.58);
    expect(b! / (a! + b!)).toBeLessThan(0.68);
  });

  it("keeps only the nucleus with top_p", () => {
    expect(histogram([6, 3, 1], { temperature: 1, top_p: 0.5 })).toEqual([4000, 0, 0]);
    const counts = histogram([6, 3, 1], { temperature: 1, top_p: 0.85 });
    expect(counts[2]).toBe(0);
    expect(counts[1]).toBeGreaterThan(0);
  });
});
