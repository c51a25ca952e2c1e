import { describe, expect, it } from "vitest";
import { UsageError } from "../../errors.js";
import { noteMark, readMarkedLine } from "../../runtime/output-marks.js";
import { stackBlock } from "../../dev/failure-stack.js";
import { devPool, isLifecycleNote, redeployedLine, requestLine, workerLine } from "./dev.js";

describe("the dev terminal's worker lines", () => {
  it("tags a line with its endpoint and job, plain without colour, one colour per endpoint with it", () => {
    expect(workerLine("noisy", { ts: 0, stream: "stdout", text: "hello", jobId: "j1" }, false)).toBe("[noisy j1] hello");
    expect(workerLine("noisy", { ts: 0, stream: "stdout", text: "hello" }, false)).toBe("[noisy] hello");
    const a = workerLine("noisy", { ts: 0, stream: "stdout", text: "x" }, true);
    const b = workerLine("noisy", { ts: 0, stream: "stdout", text: "y" }, true);
    // picocolors only colours on a terminal it detects; compare the tag's escape codes when present.
    expect(a.split("[noisy]")[0]).toBe(b.split("[noisy]")[0]);
  });

  it("keeps the frames worth reading from a stack", () => {
    const stack = [
      "RangeError: nope",
      "    at talk (src/noisy.ts:5:25)",
      "    at Object.invoke (/work/svc/src/sdk/handler.ts:126:30)",
      "    at WorkerLoop.execute (file:///work/svc/dist/runtime/loop.js:346:50)",
      "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
    ].join("\n");
    expect(stackBlock(stack)).toEqual(["    at talk (src/noisy.ts:5:25)", "    at Object.invoke (/work/svc/src/sdk/handler.ts:126:30)"]);
  });
});

describe("svc dev's pool size", () => {
  it("is --pool, else SVC_WORKER_POOL, else the default (undefined); 0 turns it off", () => {
    expect(devPool(undefined, undefined)).toBeUndefined();
    expect(devPool(undefined, "0")).toBe(0);
    expect(devPool("3", "0")).toBe(3);
    expect(devPool("0", undefined)).toBe(0);
  });

  it("refuses what is not a count from 0 to 64, naming where it came from", () => {
    expect(() => devPool("-1", undefined)).toThrow(UsageError);
    expect(() => devPool("two", undefined)).toThrow(/--pool must be a whole number from 0 to 64, not "two"/);
    expect(() => devPool(undefined, "65")).toThrow(/SVC_WORKER_POOL must be a whole number/);
    expect(() => devPool("", undefined)).toThrow(UsageError);
  });
});

describe("what the dev terminal says of requests and workers' lives", () => {
  it("a request is one line: method, path, status and time", () => {
    expect(requestLine({ method: "POST", path: "/v2/0123456789abcdef/runsync", status: 200, ms: 12.4 })).toBe("POST /v2/0123456789abcdef/runsync 200 12ms");
  });
  it("the runtime's notes about a worker's life are lifecycle lines; notes about jobs and the user's output are not", () => {
    const note = (text: string, jobId?: string) => ({ ts: 0, stream: "log" as const, text, ...(jobId ? { jobId } : {}) });
    expect(isLifecycleNote(note("draining (the service asked); 0 job(s) held"))).toBe(true);
    expect(isLifecycleNote(note("drained; exiting"))).toBe(true);
    expect(isLifecycleNote(note("serving 2 route(s) and /ping at http://127.0.0.1:1234"))).toBe(true);
    expect(isLifecycleNote(note("job j1 failed: Error: boom", "j1"))).toBe(false);
    expect(isLifecycleNote(note("uncaught exception: Error: x"))).toBe(false);
    expect(isLifecycleNote({ ts: 0, stream: "stderr", text: "draining (my own words)" })).toBe(false);
  });
  it("a note the driver captured from a worker's output (tagged [svc-runtime]) is a lifecycle line too", () => {
    for (const text of ["draining (the service asked); 0 job(s) held", "drained; exiting", "pre-booted: waiting for a claim"]) {
      const line = readMarkedLine("stderr", `${noteMark()}[svc-runtime] ${text}`);
      expect(isLifecycleNote({ ts: 0, ...line })).toBe(true);
    }
    expect(isLifecycleNote({ ts: 0, ...readMarkedLine("stderr", `${noteMark("j1")}[svc-runtime] job j1 failed: Error: boom`) })).toBe(false);
  });
});

describe("svc dev's redeploy line", () => {
  const endpoints = [{ name: "echo" }, { name: "tally" }, { name: "stream" }];
  it("names the endpoints that get new workers and those that keep theirs", () => {
    expect(redeployedLine({ endpoints, added: [], changed: ["tally"] })).toBe(
      "redeployed: new workers for tally (code or settings changed); echo, stream keep their workers; queued jobs are kept",
    );
    expect(redeployedLine({ endpoints, added: ["stream"], changed: [] })).toBe(
      "redeployed: no endpoint's code or settings changed; echo, tally keep their workers; queued jobs are kept",
    );
    expect(redeployedLine({ endpoints: [{ name: "tally" }], added: [], changed: [] })).toBe(
      "redeployed: no endpoint's code or settings changed; tally keeps its workers; queued jobs are kept",
    );
  });
});
