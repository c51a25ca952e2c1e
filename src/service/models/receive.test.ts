import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { receiveInto } from "./receive.js";

const dir = mkdtempSync(join(tmpdir(), "svc-receive-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const chunks = (count: number, size: number) => Array.from({ length: count }, (_, i) => Buffer.alloc(size, i % 251));

describe("receiveInto", () => {
  it("writes every chunk in order, across batches, and resolves once the file is whole", async () => {
    const parts = chunks(200, 64 * 1024); // 12.5 MB: several 4 MB batches
    const path = join(dir, "whole");
    const seen: number[] = [];
    const told: number[] = [];
    await receiveInto(
      Readable.from(parts),
      path,
      0,
      (c) => (seen.push(c.length), true),
      (bytes) => told.push(bytes),
    );
    expect(readFileSync(path).equals(Buffer.concat(parts))).toBe(true);
    expect(seen).toHaveLength(200);
    // How far the file is written, as batches land: growing to the whole file (two writes in flight may land in
    // either order: then one tells both).
    expect(told.length).toBeGreaterThanOrEqual(2);
    expect(told).toEqual([...told].sort((a, b) => a - b));
    expect(told.at(-1)).toBe(200 * 64 * 1024);
  });

  it("continues a partial file from its offset, and says the whole length written", async () => {
    const path = join(dir, "partial");
    writeFileSync(path, "first ");
    const told: number[] = [];
    await receiveInto(
      Readable.from([Buffer.from("second")]),
      path,
      6,
      () => true,
      (bytes) => told.push(bytes),
    );
    expect(readFileSync(path, "utf8")).toBe("first second");
    expect(told).toEqual([12]);
  });

  it("drops what a partial file holds past the offset it resumes from", async () => {
    const path = join(dir, "stale-tail");
    writeFileSync(path, "first STALE TAIL");
    await receiveInto(Readable.from([Buffer.from("second")]), path, 6, () => true);
    expect(readFileSync(path, "utf8")).toBe("first second");
  });

  it("keeps what arrived before the connection broke, then rejects with the break", async () => {
    const path = join(dir, "broken");
    const body = new PassThrough();
    const arrived = 5 * 1024 * 1024 + 4;
    let seen = 0;
    // The break comes once every byte written so far has reached the receiver (a socket's error after its data).
    const done = receiveInto(body, path, 0, (c) => {
      seen += c.length;
      if (seen === arrived) setImmediate(() => body.destroy(new Error("socket hang up")));
      return true;
    });
    body.write(Buffer.alloc(5 * 1024 * 1024, 7));
    body.write(Buffer.from("tail"));
    await expect(done).rejects.toThrow("socket hang up");
    expect(readFileSync(path).length).toBe(arrived);
  });

  it("writes nothing of a chunk `take` refuses", async () => {
    const path = join(dir, "refused");
    await receiveInto(Readable.from([Buffer.from("kept"), Buffer.from("dropped")]), path, 0, (c) => c.toString() === "kept");
    expect(readFileSync(path, "utf8")).toBe("kept");
  });

  it("rejects when the file cannot be opened, and reads no further", async () => {
    const body = Readable.from(chunks(3, 1024));
    await expect(receiveInto(body, join(dir, "no-such-dir", "file"), 0, () => true)).rejects.toThrow(/ENOENT/);
  });
});
