// A download's partial file, as both ways of receiving a body write it (receive.ts, socket-get.ts): opened at the
// offset the download resumes from, written in batches at their own offsets, and how far it is whole on disk.

import { ftruncate, open } from "node:fs";

/**
 * Open the file at `path` to be written from byte `start` on: a new (emptied) file at 0, else the file cut at
 * `start` (a partial file longer than the offset the download resumes from would keep a stale tail).
 */
export function openPartial(path: string, start: number, opened: (err: NodeJS.ErrnoException | null, fd?: number) => void): void {
  if (start === 0) open(path, "w", 0o644, opened);
  else open(path, "r+", (err, fd) => (err ? opened(err) : ftruncate(fd, start, (cut) => opened(cut, fd))));
}

/** How far a file written in batches at their offsets is whole: two writes in flight may land in either order. */
export class WrittenPrefix {
  /** Batches landed past one still being written: [from, to). */
  private readonly landed: Array<[number, number]> = [];

  /** `whole`: every byte before it is on disk. */
  constructor(public whole: number) {}

  /** The batch [from, to) landed: true when the whole prefix grew. */
  land(from: number, to: number): boolean {
    this.landed.push([from, to]);
    this.landed.sort((a, b) => a[0] - b[0]);
    const before = this.whole;
    while (this.landed.length > 0 && this.landed[0]![0] === this.whole) this.whole = this.landed.shift()![1];
    return this.whole > before;
  }
}
