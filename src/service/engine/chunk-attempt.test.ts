import { describe, expect, it } from "vitest";
import { ATTEMPT_MARK_BYTES, markAttempt } from "./chunk-attempt.js";
import { MAX_CHUNK_BYTES, splitChunk } from "./index.js";

describe("markAttempt", () => {
  it("leaves a first attempt's chunk as the spec shapes it", () => {
    expect(markAttempt('{"output":"a"}', 1)).toBe('{"output":"a"}');
    expect(markAttempt('{"output":"a"}', 0)).toBe('{"output":"a"}');
  });
  it("marks a re-run's chunk so that a reader can tell the attempts apart", () => {
    expect(JSON.parse(markAttempt('{"output":{"i":1},"metrics":{"n":2}}', 3))).toEqual({ output: { i: 1 }, metrics: { n: 2 }, attempt: 3 });
    // A worker's own `attempt` member does not hide the service's.
    expect(JSON.parse(markAttempt('{"output":1,"attempt":9}', 2)).attempt).toBe(2);
  });
  it("keeps a marked piece of a split chunk within the chunk limit", () => {
    const pieces = splitChunk({ output: "x".repeat(3 * MAX_CHUNK_BYTES) }, MAX_CHUNK_BYTES - ATTEMPT_MARK_BYTES);
    for (const piece of pieces) expect(Buffer.byteLength(markAttempt(piece, 1_000_000))).toBeLessThanOrEqual(MAX_CHUNK_BYTES);
  });
});
