import { describe, expect, it } from "vitest";
import { closestName, didYouMean, editDistance } from "./suggest.js";

describe("editDistance", () => {
  it("counts inserts, deletes and substitutions", () => {
    expect(editDistance("", "")).toBe(0);
    expect(editDistance("abc", "")).toBe(3);
    expect(editDistance("", "ab")).toBe(2);
    expect(editDistance("prd", "prod")).toBe(1);
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(editDistance("models", "models")).toBe(0);
    expect(editDistance("fsn", "fns")).toBe(1);
    expect(editDistance("modles", "models")).toBe(1);
  });
});

describe("closestName", () => {
  it("finds the typo's intended name, and nothing for a name unlike any", () => {
    expect(closestName("prd", ["staging", "prod"])).toBe("prod");
    expect(closestName("modles", ["weights", "models"])).toBe("models");
    expect(closestName("Models", ["models"])).toBe("models");
    expect(closestName("cache", ["models", "weights"])).toBeUndefined();
    expect(closestName("x", [])).toBeUndefined();
    expect(closestName("fsn", ["fns", "lb"])).toBe("fns");
  });
  it("prefers the closer of two candidates", () => {
    expect(closestName("tex", ["text", "tx2"])).toBe("text");
    expect(closestName("abcdef", ["abcdxx", "abcdex"])).toBe("abcdex");
  });
});

describe("didYouMean", () => {
  it("is a sentence to append, or nothing", () => {
    expect(didYouMean("prd", ["prod"])).toBe('; did you mean "prod"?');
    expect(didYouMean("zzz", ["prod"])).toBe("");
  });
});
