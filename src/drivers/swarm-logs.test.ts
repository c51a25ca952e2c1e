import { describe, expect, it } from "vitest";
import { FrameReader } from "./swarm-logs.js";

const frame = (type: number, text: string) => {
  const payload = Buffer.from(text, "utf8");
  const header = Buffer.alloc(8);
  header[0] = type;
  header.writeUInt32BE(payload.length, 4);
  return Buffer.concat([header, payload]);
};

describe("FrameReader", () => {
  it("splits Docker's multiplexed stream into stdout and stderr frames, across chunk boundaries", () => {
    const all = Buffer.concat([frame(1, "2026-11-25T10:00:00.1Z out é\n"), frame(2, "2026-11-25T10:00:00.2Z err\n"), frame(1, "tail")]);
    const reader = new FrameReader();
    const frames = [];
    // One byte at a time: a header, and a multi-byte character, split over chunks.
    for (let i = 0; i < all.length; i++) frames.push(...reader.push(all.subarray(i, i + 1)));
    expect(frames).toEqual([
      { stream: "stdout", payload: "2026-11-25T10:00:00.1Z out é\n" },
      { stream: "stderr", payload: "2026-11-25T10:00:00.2Z err\n" },
      { stream: "stdout", payload: "tail" },
    ]);
  });
});
