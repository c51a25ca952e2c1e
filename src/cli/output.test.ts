import { afterEach, describe, expect, it, vi } from "vitest";
import { alignRows, alignTable, createOutput, formatDuration } from "./output.js";

describe("alignRows", () => {
  it("pads every column but the last to its widest cell, two spaces apart, no trailing spaces", () => {
    expect(alignRows([["+", "worker", "queue", "created"], ["~", "api-long-name", "load-balanced", ""], ["-", "old", "", "removed"]])).toEqual([
      "+  worker         queue          created",
      "~  api-long-name  load-balanced",
      "-  old                           removed",
    ]);
  });

  it("puts an upper-case header over a table", () => {
    expect(alignTable(["kind", "id"], [["cpu", "abc"], ["gpu", "d"]])).toBe("KIND  ID\ncpu   abc\ngpu   d");
  });
});

describe("formatDuration", () => {
  it("shows milliseconds under a second, then seconds, then minutes", () => {
    expect(formatDuration(850.4)).toBe("850 ms");
    expect(formatDuration(1234)).toBe("1.2 s");
    expect(formatDuration(125_000)).toBe("2 min 5 s");
  });
});

describe("createOutput", () => {
  afterEach(() => vi.restoreAllMocks());

  it("prints a warning once, however often it is given", () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => (written.push(String(chunk)), true));
    const out = createOutput();
    out.warn("same thing");
    out.warn("other thing");
    out.warn("same thing");
    expect(written.join("").match(/warning: same thing/g)).toHaveLength(1);
    expect(written.join("")).toContain("warning: other thing");
  });
});
