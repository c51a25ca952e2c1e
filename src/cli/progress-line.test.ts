// `svc run`'s progress line: rewritten in place on a terminal, a line per change elsewhere.

import { describe, expect, it } from "vitest";
import { ProgressLine, progressText } from "./progress-line.js";

function stream(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, isTTY, columns: 40, write: (text: string) => writes.push(text) };
}

describe("svc run's progress line", () => {
  it("shows text as it is and anything else as compact JSON, cut to the terminal's width", () => {
    expect(progressText("rendering frame 3")).toBe("progress: rendering frame 3");
    expect(progressText({ step: 3, of: 10 })).toBe('progress: {"step":3,"of":10}');
    expect(progressText("a\n  b")).toBe("progress: a b");
    expect(progressText("x".repeat(100), 40)).toHaveLength(39);
  });

  it("on a terminal rewrites one line as the value changes, and clears it before other output", () => {
    const s = stream(true);
    const line = new ProgressLine(s);
    line.show({ step: 1 });
    line.show({ step: 1 });
    line.show({ step: 2 });
    line.clear();
    line.show({ step: 2 });
    expect(s.writes).toEqual(['\r\x1b[Kprogress: {"step":1}', '\r\x1b[Kprogress: {"step":2}', "\r\x1b[K", '\r\x1b[Kprogress: {"step":2}']);
  });

  it("elsewhere writes one line per change and no escapes", () => {
    const s = stream(false);
    const line = new ProgressLine(s);
    line.show("10%");
    line.show("10%");
    line.clear();
    line.show("20%");
    expect(s.writes).toEqual(["progress: 10%\n", "progress: 20%\n"]);
  });
});
