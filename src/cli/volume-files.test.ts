import { describe, expect, it } from "vitest";
import { parseVolumePath, planCopy, uploadKey } from "./volume-files.js";

describe("volume paths on the command line", () => {
  it("tells <volume>:<path> from a local path", () => {
    expect(parseVolumePath("models:llama/w.bin")).toEqual({ volume: "models", path: "llama/w.bin" });
    expect(parseVolumePath("vol0123456789ab:/x")).toEqual({ volume: "vol0123456789ab", path: "x" });
    expect(parseVolumePath("models:")).toEqual({ volume: "models", path: "" });
    expect(parseVolumePath("./a:b")).toBeUndefined();
    expect(parseVolumePath("/tmp/a:b")).toBeUndefined();
    expect(parseVolumePath("weights.bin")).toBeUndefined();
  });
  it("plans the direction of a copy, and where a file goes", () => {
    expect(planCopy("w.bin", "models:llama/")).toEqual({ direction: "up", local: "w.bin", remote: { volume: "models", path: "llama/" } });
    expect(planCopy("models:a.txt", ".")).toEqual({ direction: "down", local: ".", remote: { volume: "models", path: "a.txt" } });
    expect(() => planCopy("a", "b")).toThrow(/Neither side/);
    expect(() => planCopy("m:a", "n:b")).toThrow(/Both sides/);
    expect(uploadKey("llama/", "w.bin")).toBe("llama/w.bin");
    expect(uploadKey("", "w.bin")).toBe("w.bin");
    expect(uploadKey("llama/weights.bin", "w.bin")).toBe("llama/weights.bin");
  });
});
