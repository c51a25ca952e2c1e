// A download's body into its partial file. Weights are hundreds of MB to hundreds of GB: per-chunk stream plumbing
// (web streams, a Transform, a write stream of 16 KB) costs more than the network here, so the chunks the socket
// gives (64 KB) are written in batches of a few MB with one writev each, each at its own offset, at most two batches
// in flight; the socket is paused while the disk catches up. How far the file is written (the bytes before the
// first batch not yet on disk) is told as batches land: the hashing thread reads up to there (hash-thread.ts).
// docs/models.md "Speed" has the figures.

import { close, writev } from "node:fs";
import type { Readable } from "node:stream";
import { openPartial, WrittenPrefix } from "./partial-file.js";

/** Bytes gathered before a write: large enough that writes are few, small enough that memory stays bounded. */
const BATCH_BYTES = 4 * 1024 * 1024;
/** Writes in flight before the socket is paused: one being written while the next is gathered. */
const MAX_WRITES = 2;

/**
 * Read `body` into the file at `path` from byte `start` on (the file cut there first; 0: a new file), each chunk
 * first passed to `take`, which sees it before it is written and returns false to drop it (a body longer than it
 * should be). `written` hears the file's length on disk each time it grows (every byte before it written). Resolves
 * once every taken byte is written and the file closed; rejects with the body's error (a connection that broke) or
 * the disk's, after what arrived before it is written, so that a resume starts from there.
 */
export function receiveInto(body: Readable, path: string, start: number, take: (chunk: Buffer) => boolean, written?: (bytes: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let fd: number | undefined;
    let batch: Buffer[] = [];
    let batchBytes = 0;
    /** Where the next batch goes. */
    let position = start;
    const onDisk = new WrittenPrefix(start);
    let writing = 0;
    let ended = false;
    /** The body's error (a broken connection): what arrived is still written. */
    let broken: unknown;
    /** The disk's (or the open's): nothing more is written. */
    let diskError: unknown;
    let settled = false;

    const settle = () => {
      if (settled || writing > 0) return;
      if (diskError === undefined && (!ended || fd === undefined)) return;
      settled = true;
      const failure = diskError ?? broken;
      if (fd === undefined) return reject(failure);
      close(fd, (err) => (failure !== undefined ? reject(failure) : err ? reject(err) : resolve()));
    };
    const flush = () => {
      if (batchBytes === 0 || fd === undefined || diskError !== undefined) return;
      const buffers = batch;
      const from = position;
      position += batchBytes;
      const to = position;
      batch = [];
      batchBytes = 0;
      writing++;
      writev(fd, buffers, from, (err) => {
        writing--;
        if (err) {
          diskError ??= err;
          body.destroy();
          return settle();
        }
        if (onDisk.land(from, to)) written?.(onDisk.whole);
        if (ended) flush();
        else if (writing < MAX_WRITES && body.isPaused()) body.resume();
        settle();
      });
      if (writing >= MAX_WRITES) body.pause();
    };
    const end = (err?: unknown) => {
      if (ended) return;
      ended = true;
      if (err !== undefined) broken = err;
      flush();
      settle();
    };

    const opened = (err: NodeJS.ErrnoException | null, handle?: number) => {
      if (err) {
        diskError = err;
        if (handle !== undefined) close(handle, () => settle());
        body.destroy();
        return settle();
      }
      fd = handle;
      if (batchBytes >= BATCH_BYTES || ended) flush();
      if (writing < MAX_WRITES && !ended) body.resume();
      settle();
    };
    body.pause();
    openPartial(path, start, opened);
    body.on("data", (chunk: Buffer) => {
      if (!take(chunk)) return;
      batch.push(chunk);
      batchBytes += chunk.length;
      if (batchBytes >= BATCH_BYTES) flush();
    });
    body.on("end", () => end());
    // What arrived before a break is kept (written first): a resume starts from there.
    body.on("error", (err) => end(err));
    // Closed without an end or an error (the connection aborted): a break like any other.
    body.on("close", () => end(new Error("the connection closed before the body ended")));
  });
}
