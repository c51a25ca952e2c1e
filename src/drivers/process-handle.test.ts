import { describe, expect, it } from "vitest";
import { sandboxExit } from "./process-handle.js";

describe("sandboxExit", () => {
  it("reads bwrap's 128+n as the signal that ended the worker", () => {
    expect(sandboxExit(137, null)).toEqual({ code: null, signal: "SIGKILL" });
    expect(sandboxExit(143, null)).toEqual({ code: null, signal: "SIGTERM" });
    expect(sandboxExit(0, null)).toEqual({ code: 0, signal: null });
    expect(sandboxExit(1, null)).toEqual({ code: 1, signal: null });
  });
});
