// The hashes that verify a model's files, computed on a thread of their own while the download runs. The thread
// reads what the download has written (from the page cache, into a buffer of its own) and hashes it: the thread
// that receives the body only tells it how far the file is written, so receiving and hashing run on two cores
// and no chunk is copied between threads. It is started with the first download and kept while downloads follow
// (a thread's start costs about as much CPU as hashing 40 MB), ended once idle. Should it fail to start or die,
// the file is hashed on this thread once complete: slower, the same digest.
// docs/design/0022-model-downloads.md has the figures.

import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { Worker } from "node:worker_threads";
import { errorMessage } from "../../errors.js";

/** How a file is checked: sha256 of its bytes (an LFS file), or sha1 of a prefix then its bytes (a git blob id). */
export interface FileCheck {
  algorithm: "sha256" | "sha1";
  /** Hashed before the file's bytes (git's "blob <size>\0"). */
  prefix?: string;
}

/** One file's hash as its download writes it. */
export interface FileHashJob {
  /** The file's first `bytes` are on disk: they may be hashed. */
  written(bytes: number): void;
  /** The file is complete at `bytes`: its digest, in hex. */
  finish(bytes: number): Promise<string>;
  /** The download ended without a whole file: forget it. */
  abandon(): void;
}

/** How long the thread waits for the next download before it ends, ms. */
const IDLE_MS = 30_000;

// The hashing thread (eval'd: the same code runs from src/ under the tests and from dist/). One message per
// written batch; a job's file is opened at its first read and closed at its end.
const HASH_THREAD_SOURCE = `
const { parentPort } = require("node:worker_threads");
const { openSync, readSync, closeSync } = require("node:fs");
const { createHash } = require("node:crypto");
const jobs = new Map();
const buffer = Buffer.allocUnsafe(4 * 1024 * 1024);
const drop = (id) => {
  const job = jobs.get(id);
  jobs.delete(id);
  if (job && job.fd !== undefined) closeSync(job.fd);
};
parentPort.on("message", (m) => {
  if (m.begin) {
    const hash = createHash(m.algorithm);
    if (m.prefix) hash.update(m.prefix);
    jobs.set(m.id, { path: m.path, hash, done: 0, fd: undefined });
    return;
  }
  const job = jobs.get(m.id);
  if (!job) return;
  if (m.abandon) return drop(m.id);
  try {
    if (job.fd === undefined) job.fd = openSync(job.path, "r");
    while (job.done < m.upTo) {
      const n = readSync(job.fd, buffer, 0, Math.min(buffer.length, m.upTo - job.done), job.done);
      if (n === 0) throw new Error(job.path + " ends at " + job.done + " bytes, before the " + m.upTo + " written");
      job.hash.update(buffer.subarray(0, n));
      job.done += n;
    }
    if (m.end) {
      drop(m.id);
      parentPort.postMessage({ id: m.id, digest: job.hash.digest("hex") });
    }
  } catch (err) {
    drop(m.id);
    parentPort.postMessage({ id: m.id, error: String((err && err.message) || err) });
  }
});
`;

type ThreadAnswer = { id: number; digest: string } | { id: number; error: string };

interface Job {
  path: string;
  check: FileCheck;
  /** The thread's answer to `finish` (set by `finish`). */
  answer?: { resolve(digest: string): void; fail(reason: string): void };
  /** Why the thread could not hash it (told before `finish`): `finish` hashes the file here instead. */
  failed?: string;
}

export class FileHasher {
  private thread: Worker | undefined;
  private readonly jobs = new Map<number, Job>();
  private nextId = 1;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly idleMs = IDLE_MS) {}

  /** Start hashing the file at `path` as it is written (it need not exist yet). */
  begin(path: string, check: FileCheck): FileHashJob {
    const id = this.nextId++;
    const job: Job = { path, check };
    this.jobs.set(id, job);
    const thread = this.running();
    if (thread) thread.postMessage({ begin: true, id, path, algorithm: check.algorithm, prefix: check.prefix });
    else job.failed = "the hashing thread could not start";
    const post = (message: object) => {
      if (job.failed === undefined && this.jobs.has(id)) this.thread?.postMessage({ id, ...message });
    };
    return {
      written: (bytes) => post({ upTo: bytes }),
      finish: (bytes) => {
        if (job.failed !== undefined) return this.hereInstead(id, bytes);
        const digest = new Promise<string>((resolve, reject) => {
          job.answer = {
            resolve,
            // The thread could not read the file: hashed here, so that the download's verdict is the file's.
            fail: () => this.hereInstead(id, bytes).then(resolve, reject),
          };
        });
        post({ upTo: bytes, end: true });
        return digest;
      },
      abandon: () => {
        post({ abandon: true });
        this.done(id);
      },
    };
  }

  /** End the thread now (the service closes). */
  async close(): Promise<void> {
    clearTimeout(this.idleTimer);
    const thread = this.thread;
    this.thread = undefined;
    for (const id of [...this.jobs.keys()]) this.lost(id, "the model cache closed");
    await thread?.terminate();
  }

  /** The thread, started if need be; undefined when it cannot start. Held (ref'd) while it has jobs. */
  private running(): Worker | undefined {
    clearTimeout(this.idleTimer);
    if (this.thread) {
      this.thread.ref();
      return this.thread;
    }
    let thread: Worker;
    try {
      thread = new Worker(HASH_THREAD_SOURCE, { eval: true });
    } catch {
      return undefined;
    }
    this.thread = thread;
    thread.on("message", (m: ThreadAnswer) => {
      const job = this.jobs.get(m.id);
      if (!job) return;
      if ("digest" in m) {
        this.done(m.id);
        job.answer?.resolve(m.digest);
      } else this.lost(m.id, m.error);
    });
    const gone = (why: string) => {
      if (this.thread !== thread) return;
      this.thread = undefined;
      for (const id of [...this.jobs.keys()]) this.lost(id, why);
    };
    thread.on("error", (err) => gone(`the hashing thread failed: ${errorMessage(err)}`));
    thread.on("exit", (code) => gone(`the hashing thread exited (${code})`));
    return thread;
  }

  /** The thread cannot finish this job: `finish` (now or later) hashes the file here. */
  private lost(id: number, why: string): void {
    const job = this.jobs.get(id);
    if (!job) return;
    job.failed = why;
    if (job.answer) job.answer.fail(why);
  }

  /** The file's first `bytes` hashed on this thread (the thread could not do it). */
  private async hereInstead(id: number, bytes: number): Promise<string> {
    const job = this.jobs.get(id);
    this.done(id);
    if (!job) throw new Error("the hash job has ended");
    const hash = createHash(job.check.algorithm);
    if (job.check.prefix) hash.update(job.check.prefix);
    if (bytes > 0) for await (const chunk of createReadStream(job.path, { start: 0, end: bytes - 1 })) hash.update(chunk as Buffer);
    return hash.digest("hex");
  }

  private done(id: number): void {
    this.jobs.delete(id);
    if (this.jobs.size > 0 || !this.thread) return;
    // Idle: it no longer keeps the process alive, and ends if no download follows.
    const thread = this.thread;
    thread.unref();
    this.idleTimer = setTimeout(() => {
      if (this.thread !== thread || this.jobs.size > 0) return;
      this.thread = undefined;
      void thread.terminate();
    }, this.idleMs);
    this.idleTimer.unref();
  }
}
