// Progress reports coalesced on a fake clock: at most one request per interval, the latest value each time, the
// last one before the result, nothing after a refusal; and the SDK's checks of a value.

import { describe, expect, it } from "vitest";
import { ProgressSender, type ProgressTimers } from "./progress.js";
import { MAX_PROGRESS_BYTES, NonRetryableError, ProgressError, progressJson } from "svc/internal";

class FakeTimers implements ProgressTimers {
  t = 0;
  private timers: Array<{ at: number; fn: () => void; id: number }> = [];
  private nextId = 1;
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.push({ at: this.t + ms, fn, id });
    return id;
  }
  clearTimeout(timer: unknown): void {
    this.timers = this.timers.filter((x) => x.id !== timer);
  }
  async advance(ms: number): Promise<void> {
    const until = this.t + ms;
    for (;;) {
      const due = this.timers.filter((x) => x.at <= until).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.t = due.at;
      this.clearTimeout(due.id);
      due.fn();
      await settle();
    }
    this.t = until;
    await settle();
  }
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup(answer: () => Promise<unknown> = async () => ({ ok: true })) {
  const timers = new FakeTimers();
  const sent: Array<{ at: number; progress: unknown }> = [];
  const refused: string[] = [];
  const sender = new ProgressSender(
    { id: "j1", lease: "l1" },
    async (body) => {
      const parsed = JSON.parse(body) as { jobId: string; lease: string; progress: unknown };
      expect(parsed).toMatchObject({ jobId: "j1", lease: "l1" });
      sent.push({ at: timers.now(), progress: parsed.progress });
      return answer();
    },
    (reason) => refused.push(reason),
    250,
    timers,
  );
  return { timers, sent, refused, sender };
}

describe("progress reports", () => {
  it("go out at most once per 250 ms, each time with the latest value", async () => {
    const { timers, sent, sender } = setup();
    sender.push('"0%"');
    await settle();
    for (let i = 1; i <= 20; i++) {
      await timers.advance(25);
      sender.push(`"${i * 5}%"`);
    }
    await timers.advance(250);
    // One at once, then one per window with the value latest when it closed: 4 requests for 21 reports, the last
    // value included.
    expect(sent).toEqual([
      { at: 0, progress: "0%" },
      { at: 250, progress: "45%" },
      { at: 500, progress: "95%" },
      { at: 750, progress: "100%" },
    ]);
  });

  it("flush sends the value still waiting at once, before the job's result", async () => {
    const { timers, sent, sender } = setup();
    sender.push("1");
    sender.push("2");
    await settle();
    sender.push("3");
    await timers.advance(10);
    await sender.flush();
    expect(sent.map((s) => s.progress)).toEqual([1, 3]);
    expect(sent[1]!.at).toBe(10);
    await sender.flush();
    expect(sent).toHaveLength(2);
  });

  it("stop after a refusal (the lease was lost) and after the job is discarded", async () => {
    const { timers, sent, refused, sender } = setup(async () => ({ ok: false, reason: "lease lost" }));
    sender.push("1");
    await settle();
    sender.push("2");
    await timers.advance(1000);
    expect(sent.map((s) => s.progress)).toEqual([1]);
    expect(refused).toEqual(["lease lost"]);
    const other = setup();
    other.sender.push("1");
    other.sender.discard();
    other.sender.push("2");
    await other.timers.advance(1000);
    await other.sender.flush();
    expect(other.sent.map((s) => s.progress)).toEqual([1]);
  });

  it("take any JSON value up to 64 KiB and refuse others with a clear error", () => {
    expect(progressJson({ step: 3, of: 10 })).toBe('{"step":3,"of":10}');
    expect(progressJson("half")).toBe('"half"');
    expect(progressJson(null)).toBe("null");
    expect(progressJson("x".repeat(MAX_PROGRESS_BYTES - 2))).toHaveLength(MAX_PROGRESS_BYTES);
    expect(() => progressJson("x".repeat(MAX_PROGRESS_BYTES))).toThrow(ProgressError);
    expect(() => progressJson("x".repeat(MAX_PROGRESS_BYTES))).toThrow(/65538 bytes of JSON; at most 65536 are kept/);
    expect(() => progressJson(undefined)).toThrow(/needs a JSON value, not undefined/);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => progressJson(cyclic)).toThrow(/needs a JSON value/);
    expect(() => progressJson(10n)).toThrow(ProgressError);
  });

  it("a NonRetryableError says so where the runtime looks, across copies of the SDK", () => {
    const err = new NonRetryableError("the input has no image");
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ name: "NonRetryableError", retryable: false, message: "the input has no image" });
  });
});
