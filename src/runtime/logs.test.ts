import { Console } from "node:console";
import { describe, expect, it } from "vitest";
import type { LogLine } from "./api.js";
import { captureProcessOutput, jobScope, LogShipper } from "./logs.js";
import { readMarkedLine } from "./output-marks.js";

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("log capture", () => {
  it("attributes console output to the job whose code wrote it, across awaits and timers", async () => {
    const posted: LogLine[][] = [];
    const shipper = new LogShipper({ post: async (lines) => void posted.push(lines), intervalMs: 10 });
    const restore = captureProcessOutput(shipper);
    // Vitest replaces the global console; a worker's console writes to process.stdout/stderr like this one.
    const console = new Console(process.stdout, process.stderr);
    try {
      const job = (id: string) =>
        jobScope.run(id, async () => {
          console.log(`${id} first`);
          await tick(5);
          await new Promise<void>((r) =>
            setTimeout(() => {
              console.error(`${id} from a timer`);
              r();
            }, 3),
          );
          process.stdout.write(`${id} raw\n`);
        });
      await Promise.all([job("job-a"), job("job-b")]);
      console.log("outside any job");
      await shipper.flush();
    } finally {
      restore();
    }
    const lines = posted.flat();
    for (const id of ["job-a", "job-b"]) {
      expect(lines.filter((l) => l.jobId === id).map((l) => `${l.stream}:${l.text}`)).toEqual([
        `stdout:${id} first`,
        `stderr:${id} from a timer`,
        `stdout:${id} raw`,
      ]);
    }
    expect(lines.find((l) => l.text === "outside any job")).toMatchObject({ stream: "stdout" });
    expect(lines.find((l) => l.text === "outside any job")?.jobId).toBeUndefined();
  });

  it("under a driver (marked), ships nothing and marks the lines a job writes in the raw output", async () => {
    const posted: LogLine[][] = [];
    const shipper = new LogShipper({ post: async (lines) => void posted.push(lines), intervalMs: 5 });
    const raw: string[] = [];
    const realWrite = process.stdout.write;
    // The recorder stands where the driver's pipe is: what the runtime's hook passes on is what the driver reads.
    process.stdout.write = ((chunk: unknown) => raw.push(String(chunk)) > 0) as typeof process.stdout.write;
    const restore = captureProcessOutput(shipper, { marked: true });
    try {
      await jobScope.run("job-7", async () => {
        process.stdout.write("one\ntwo\n");
      });
      process.stdout.write("outside\n");
      await shipper.flush();
    } finally {
      restore();
      process.stdout.write = realWrite;
    }
    expect(posted).toEqual([]);
    const lines = raw
      .join("")
      .split("\n")
      .filter(Boolean)
      .map((line) => readMarkedLine("stdout", line));
    expect(lines).toEqual([
      { stream: "stdout", text: "one", jobId: "job-7" },
      { stream: "stdout", text: "two", jobId: "job-7" },
      { stream: "stdout", text: "outside" },
    ]);
  });

  it("batches lines and keeps them while posting fails, within a bound", async () => {
    let failing = true;
    const posted: LogLine[][] = [];
    const shipper = new LogShipper({
      post: async (lines) => {
        if (failing) throw new Error("service down");
        posted.push(lines);
      },
      intervalMs: 5,
      maxBuffered: 50,
    });
    for (let i = 0; i < 80; i++) shipper.add("stdout", `line ${i}\n`, "j1");
    await shipper.flush();
    expect(posted).toEqual([]);
    failing = false;
    await shipper.flush();
    shipper.stop();
    const lines = posted.flat();
    expect(lines[0]!.text).toMatch(/30 log lines dropped/);
    expect(lines.slice(1).map((l) => l.text)).toEqual(Array.from({ length: 50 }, (_, i) => `line ${i + 30}`));
    expect(posted).toHaveLength(1);
  });
});
