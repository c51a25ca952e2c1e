// A download's body into its partial file. Weights are hundreds of MB to hundreds of GB: per-chunk stream plumbing
// (web streams, a Transform, a write stream of 16 KB) costs more than the network here, so the chunks the socket
// gives (64 KB) are hashed as they arrive and written in batches of a few MB with one writev each, at most two
// batches in flight; the socket is paused while the disk catches up. docs/models.md "Speed" has the figures.

import { close, open, writev } from "node:fs";
import type { Readable } from "node:stream";

/** Bytes gathered before a write: large enough that writes are few, small enough that memory stays bounded. */
const BATCH_BYTES = 4 * 1024 * 1024;
/** Writes in flight before the socket is paused: one being written while the next is gathered. */
const MAX_WRITES = 2;

/**
 * Read `body` into the file at `path` (appended to, or truncated first), each chunk first passed to `take`, which
 * sees it before it is written and returns false to drop it (a body longer than it should be). Resolves once every
 * taken byte is written and the file closed; rejects with the body's error (a connection that broke) or the disk's,
 * after what arrived before it is written, so that a resume starts from there.
 */
export function receiveInto(body: Readable, path: string, append: boolean, take: (chunk: Buffer) => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    let fd: number | undefined;
    let batch: Buffer[] = [];
    let batchBytes = 0;
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
      batch = [];
      batchBytes = 0;
      writing++;
      writev(fd, buffers, (err) => {
        writing--;
        if (err) {
          diskError ??= err;
          body.destroy();
        } else if (ended) flush();
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

    body.pause();
    open(path, append ? "a" : "w", 0o644, (err, opened) => {
      if (err) {
        diskError = err;
        body.destroy();
        return settle();
      }
      fd = opened;
      if (batchBytes >= BATCH_BYTES || ended) flush();
      if (writing < MAX_WRITES && !ended) body.resume();
      settle();
    });
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
