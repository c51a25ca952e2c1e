import { describe, expect, it } from "vitest";
import { jobMark, markChunk, noteMark, readMarkedLine } from "./output-marks.js";

describe("output marks", () => {
  it("a job's line reads back with its job id and clean text", () => {
    expect(readMarkedLine("stdout", `${jobMark("job-1.a")}hello`)).toEqual({ stream: "stdout", text: "hello", jobId: "job-1.a" });
    expect(readMarkedLine("stderr", `${noteMark()}[svc-runtime] ready`)).toEqual({ stream: "log", text: "[svc-runtime] ready" });
    expect(readMarkedLine("stderr", `${noteMark("j2")}stray`)).toEqual({ stream: "log", text: "stray", jobId: "j2" });
    expect(readMarkedLine("stderr", "plain")).toEqual({ stream: "stderr", text: "plain" });
  });

  it("ids that could break the sequence are not marked", () => {
    expect(jobMark("bad\x07id")).toBe("");
  });

  it("marks every line start, across partial writes", () => {
    const m = "<m>";
    const first = markChunk("a\nb", m, true);
    expect(first).toEqual({ text: "<m>a\n<m>b", atLineStart: false });
    const second = markChunk(" continued\nc\n", m, first.atLineStart);
    expect(second).toEqual({ text: " continued\n<m>c\n", atLineStart: true });
  });
});
