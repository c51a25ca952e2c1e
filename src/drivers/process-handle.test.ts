import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { testLaunch } from "./launch-fixture.js";
import { runningHandle, sandboxExit } from "./process-handle.js";

describe("sandboxExit", () => {
  it("reads bwrap's 128+n as the signal that ended the worker", () => {
    expect(sandboxExit(137, null)).toEqual({ code: null, signal: "SIGKILL" });
    expect(sandboxExit(143, null)).toEqual({ code: null, signal: "SIGTERM" });
    expect(sandboxExit(0, null)).toEqual({ code: 0, signal: null });
    expect(sandboxExit(1, null)).toEqual({ code: 1, signal: null });
  });
});

describe("a wrapped worker's stop", () => {
  it("ends even when the wrapper outlives its worker: the wrapper is killed too after the grace", async () => {
    // The wrapper (as bwrap would be) ignores SIGTERM and stays after its worker is gone; the worker is its own process.
    const wrapper = spawn(process.execPath, ["-e", "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"], { stdio: "ignore" });
    const worker = spawn("sleep", ["30"], { stdio: "ignore" });
    await new Promise((r) => setTimeout(r, 200));
    try {
      const handle = runningHandle(
        testLaunch(),
        { child: wrapper, innerPid: worker.pid!, handle: undefined! },
        { cleanup: () => undefined, sandboxed: true },
        () => undefined,
      );
      const started = Date.now();
      const exit = await handle.stop(100);
      expect(exit.signal).toBe("SIGKILL");
      expect(Date.now() - started).toBeLessThan(4_000);
      expect(worker.signalCode ?? (await new Promise((r) => worker.once("exit", (_c, s) => r(s))))).toBe("SIGTERM");
    } finally {
      wrapper.kill("SIGKILL");
      worker.kill("SIGKILL");
    }
  }, 10_000);
});
