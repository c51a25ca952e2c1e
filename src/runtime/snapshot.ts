// The runtime's side of snapshots (docs/cold-start.md, "Snapshots"): a runtime started with SVC_SNAPSHOT_FD is a
// template. It loads the endpoint's handler and runs its initialisation before it opens any socket, says so on
// SVC_SNAPSHOT_READY_FD, and blocks reading SVC_SNAPSHOT_FD. The driver checkpoints it there (CRIU); every worker
// restored from that image resumes in that read, on a descriptor CRIU replaced with one of its own restore, from
// which it learns who it is (worker id, token, service address, keys) before it talks to anyone.

import { closeSync, openSync, readSync, writeSync } from "node:fs";
import crypto from "node:crypto";
import { syncBuiltinESMExports } from "node:module";
import type { LoadedHandler } from "svc/internal";
import { handlerPath, importHandler, installRuntimeContext } from "./handler.js";

export const SNAPSHOT_FD_ENV = "SVC_SNAPSHOT_FD";
export const SNAPSHOT_READY_FD_ENV = "SVC_SNAPSHOT_READY_FD";
/** What the template says on its ready descriptor once initialised. */
export const SNAPSHOT_READY = "ready\n";

/**
 * The variables that make a worker this worker: never in an image (the template runs without them), handed to each
 * restored worker. Everything else of the environment is the endpoint's and part of the image's key.
 */
export const SNAPSHOT_IDENTITY_KEYS = [
  "SVC_API_URL",
  "SVC_WORKER_ID",
  "SVC_WORKER_TOKEN",
  "SVC_API_KEY",
  "SVC_PARENT_PID",
  "SVC_LB_SOCKET",
  "SVC_HTTP_HOST",
  "SVC_HTTP_PORT",
] as const;

/** What a driver writes, as one JSON line, to a restored worker. */
export interface SnapshotIdentity {
  env: Record<string, string>;
}

/**
 * A template runtime: initialise, wait to be checkpointed and restored, become the worker the restore names.
 * Resolves with the initialised handler (undefined when this runtime is not a template). Throws when the handler
 * fails to load or initialise: the template then exits non-zero and the driver starts workers as usual.
 */
export async function restoredFromSnapshot(): Promise<LoadedHandler | undefined> {
  const fdText = process.env[SNAPSHOT_FD_ENV];
  if (!fdText) return undefined;
  const fd = Number(fdText);
  const readyFd = Number(process.env[SNAPSHOT_READY_FD_ENV]);
  delete process.env[SNAPSHOT_FD_ENV];
  delete process.env[SNAPSHOT_READY_FD_ENV];
  const endpointName = process.env.SVC_ENDPOINT_NAME ?? "";
  // Module-level code may look at its context: what is the endpoint's is known; the worker's is not yet (the
  // worker's own context replaces this one once it is).
  installRuntimeContext(
    { endpointName, endpointId: process.env.SVC_ENDPOINT_ID ?? "", app: process.env.SVC_APP, env: process.env.SVC_ENV, apiUrl: "", apiKey: undefined },
    () => undefined,
    () => undefined,
  );
  const loaded = await importHandler(await handlerPath(process.env.SVC_ARTIFACT_DIR ?? "", endpointName));
  await loaded.init();
  // Timers and promises the initialisation left pending would otherwise run inside the checkpoint's wait.
  await new Promise<void>((resolve) => setImmediate(resolve));
  writeSync(readyFd, SNAPSHOT_READY);
  closeSync(readyFd);
  const identity = readIdentity(fd);
  for (const key of SNAPSHOT_IDENTITY_KEYS) {
    const value = identity.env[key];
    if (value) process.env[key] = value;
    else delete process.env[key];
  }
  reseedRandomness();
  return loaded;
}

/** One JSON line from `fd`, blocking: the checkpoint is taken during this read, and each restore resumes in it. */
function readIdentity(fd: number): SnapshotIdentity {
  const buffer = Buffer.alloc(64 * 1024);
  let text = "";
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, buffer, 0, buffer.length, null);
    } catch (err) {
      // A read interrupted by the checkpoint itself is simply read again.
      if ((err as NodeJS.ErrnoException).code === "EAGAIN" || (err as NodeJS.ErrnoException).code === "EINTR") continue;
      throw err;
    }
    if (n === 0) throw new Error("the snapshot's identity channel closed before naming the worker");
    text += buffer.toString("utf8", 0, n);
    const end = text.indexOf("\n");
    if (end >= 0) {
      closeSync(fd);
      return JSON.parse(text.slice(0, end)) as SnapshotIdentity;
    }
  }
}

/**
 * Every restore of one image starts with the same memory: V8's Math.random state, Node's cached UUID entropy and
 * OpenSSL's generator state are the template's. From here the random sources JavaScript reaches read the kernel's
 * (/dev/urandom, opened after the restore) instead, so two restored workers never draw the same numbers. OpenSSL's
 * own uses (key generation, TLS) cannot be reseeded from here: docs/cold-start.md says so.
 */
export function reseedRandomness(): void {
  const urandom = openSync("/dev/urandom", "r");
  const fill = (view: Uint8Array): void => {
    let done = 0;
    while (done < view.byteLength) done += readSync(urandom, view, done, view.byteLength - done, null);
  };
  const bytesOf = (data: NodeJS.ArrayBufferView) => new Uint8Array(data.buffer, data.byteOffset, data.byteLength);

  // Math.random: 53 random bits per draw, from a refilled pool.
  const pool = new Uint32Array(1024);
  let next = pool.length;
  const draw = (): number => {
    if (next + 2 > pool.length) {
      fill(new Uint8Array(pool.buffer));
      next = 0;
    }
    const high = pool[next++]! >>> 5;
    const low = pool[next++]! >>> 6;
    return (high * 67108864 + low) / 9007199254740992;
  };
  Math.random = draw;

  const randomFillSync = <T extends NodeJS.ArrayBufferView>(buffer: T, offset = 0, size?: number): T => {
    const all = bytesOf(buffer);
    fill(all.subarray(offset, size === undefined ? undefined : offset + size));
    return buffer;
  };
  const randomBytes = (size: number, callback?: (err: Error | null, buf: Buffer) => void): Buffer => {
    const buf = Buffer.allocUnsafe(size);
    fill(buf);
    if (callback) process.nextTick(callback, null, buf);
    return buf;
  };
  const randomFill = (buffer: NodeJS.ArrayBufferView, ...rest: unknown[]): void => {
    const callback = rest.pop() as (err: Error | null, buf: NodeJS.ArrayBufferView) => void;
    const [offset, size] = rest as [number | undefined, number | undefined];
    randomFillSync(buffer, offset ?? 0, size);
    process.nextTick(callback, null, buffer);
  };
  const randomUUID = (): string => {
    const b = Buffer.allocUnsafe(16);
    fill(b);
    b[6] = (b[6]! & 0x0f) | 0x40;
    b[8] = (b[8]! & 0x3f) | 0x80;
    const hex = b.toString("hex");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };
  const getRandomValues = <T extends ArrayBufferView | null>(array: T): T => {
    if (array && array.byteLength > 65536) {
      throw new DOMException(
        `The ArrayBufferView's byte length (${array.byteLength}) exceeds the number of bytes of entropy available via this API (65536)`,
        "QuotaExceededError",
      );
    }
    if (array) fill(bytesOf(array as NodeJS.ArrayBufferView));
    return array;
  };
  const randomInt = (min: number, max?: number | ((err: Error | null, n: number) => void), callback?: (err: Error | null, n: number) => void): number => {
    if (typeof max !== "number") {
      callback = max;
      max = min;
      min = 0;
    }
    const range = max - min;
    if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || range <= 0 || range > 2 ** 48) {
      throw new RangeError(`randomInt: invalid range [${min}, ${max})`);
    }
    // Rejection sampling over 48 bits: no modulo bias.
    const limit = 2 ** 48 - (2 ** 48 % range);
    const six = Buffer.allocUnsafe(6);
    let value: number;
    do {
      fill(six);
      value = six.readUIntBE(0, 6);
    } while (value >= limit);
    const n = min + (value % range);
    if (callback) process.nextTick(callback, null, n);
    return n;
  };
  // (node:crypto's own getRandomValues is a fixed getter that calls the Web Crypto object's, replaced below.)
  Object.assign(crypto as unknown as Record<string, unknown>, { randomFillSync, randomBytes, randomFill, randomUUID, randomInt });
  const web = globalThis.crypto as unknown as Record<string, unknown> | undefined;
  if (web) {
    Object.defineProperty(web, "getRandomValues", { value: getRandomValues, configurable: true, writable: true });
    Object.defineProperty(web, "randomUUID", { value: randomUUID, configurable: true, writable: true });
  }
  // `import { randomUUID } from "node:crypto"` in the user's modules sees the replacements too.
  syncBuiltinESMExports();
}
