import { afterEach, describe, expect, it, vi } from "vitest";
import { alignRows, alignTable, colorWanted, createOutput, formatBytes, formatDuration } from "./output.js";

describe("alignRows", () => {
  it("pads every column but the last to its widest cell, two spaces apart, no trailing spaces", () => {
    expect(
      alignRows([
        ["+", "worker", "queue", "created"],
        ["~", "api-long-name", "load-balanced", ""],
        ["-", "old", "", "removed"],
      ]),
    ).toEqual(["+  worker         queue          created", "~  api-long-name  load-balanced", "-  old                           removed"]);
  });

  it("puts an upper-case header over a table", () => {
    expect(
      alignTable(
        ["kind", "id"],
        [
          ["cpu", "abc"],
          ["gpu", "d"],
        ],
      ),
    ).toBe("KIND  ID\ncpu   abc\ngpu   d");
  });
});

describe("formatDuration", () => {
  it("shows milliseconds under a second, then seconds, then minutes", () => {
    expect(formatDuration(850.4)).toBe("850 ms");
    expect(formatDuration(1234)).toBe("1.2 s");
    expect(formatDuration(125_000)).toBe("2 min 5 s");
  });
});

describe("colorWanted", () => {
  it("colours a terminal, and nothing else, when neither variable is set", () => {
    expect(colorWanted({}, true)).toBe(true);
    expect(colorWanted({}, false)).toBe(false);
  });

  it("turns colour off with NO_COLOR (any non-empty value), on a terminal too", () => {
    expect(colorWanted({ NO_COLOR: "1" }, true)).toBe(false);
    expect(colorWanted({ NO_COLOR: "" }, true)).toBe(true);
  });

  it("forces colour on with FORCE_COLOR, without a terminal and over NO_COLOR; off with 0 or false", () => {
    for (const value of ["1", "2", "3", "true", ""]) expect(colorWanted({ FORCE_COLOR: value }, false), value).toBe(true);
    expect(colorWanted({ FORCE_COLOR: "1", NO_COLOR: "1" }, false)).toBe(true);
    for (const value of ["0", "false", "FALSE"]) expect(colorWanted({ FORCE_COLOR: value }, true), value).toBe(false);
  });
});

describe("createOutput", () => {
  afterEach(() => {
    vi.restoreAllMocks();
    vi.unstubAllEnvs();
  });

  /** What a warning looks like on stderr under `env`, stderr being a pipe. */
  function warning(env: Record<string, string | undefined>): string {
    const written: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => (written.push(String(chunk)), true));
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
    const out = createOutput();
    out.warn("careful");
    return written.join("");
  }

  it("colours a warning on a pipe when FORCE_COLOR says so, and not otherwise", () => {
    expect(process.stderr.isTTY).toBeFalsy();
    expect(warning({ FORCE_COLOR: "1", NO_COLOR: undefined })).toBe("\x1b[33mwarning\x1b[39m: careful\n");
    expect(warning({ FORCE_COLOR: undefined, NO_COLOR: undefined })).toBe("warning: careful\n");
    expect(warning({ FORCE_COLOR: "0", NO_COLOR: undefined })).toBe("warning: careful\n");
  });

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

describe("sizes", () => {
  it("are shown with their unit, three significant figures at most", () => {
    expect([0, 512, 1500, 12_345_678, 4_200_000_000, 999_999, 123_456_789_012].map(formatBytes)).toEqual([
      "0 B",
      "512 B",
      "1.5 KB",
      "12.3 MB",
      "4.2 GB",
      "1.0 MB",
      "123 GB",
    ]);
  });
});
