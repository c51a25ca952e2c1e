// A streaming job's chunks on their way to the service: posted in order, a batch per request, a few ms after the
// first chunk waits; a generator that yields faster than they go is paused (`backlogged`). Apart from the loop
// (loop.ts), which makes one per streaming job and only pushes, drains or discards it.

import { chunkMetrics } from "svc/internal";
import { errorMessage } from "../errors.js";
import type { TakenJob } from "./api.js";

/** The most one request of results or chunks carries (a single larger one still goes alone). */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/** Posts one job's chunks in order: a batch per request, sent a few ms after the first chunk waits. */
export class ChunkSender {
  private parts: string[] = [];
  private bytes = 0;
  private timer?: NodeJS.Timeout;
  private sending?: Promise<void>;
  private discarded = false;
  private readonly idleWaiters: Array<() => void> = [];

  constructor(
    private readonly job: TakenJob,
    private readonly batchMs: number,
    private readonly post: (body: string) => Promise<unknown>,
    private readonly onRefused: (err: unknown) => void,
  ) {}

  /** So much waits that the generator should pause until it is sent. */
  get backlogged(): boolean {
    return this.bytes > 8 * MAX_BATCH_BYTES;
  }

  push(value: unknown): void {
    if (this.discarded) return;
    let json: string;
    try {
      // A yielded value marked with metrics (textGeneration) becomes {output, metrics}.
      const metrics = chunkMetrics(value);
      json = JSON.stringify(metrics ? { output: value ?? null, metrics } : { output: value === undefined ? null : value });
    } catch (err) {
      json = JSON.stringify({ output: null, metrics: { error: `chunk is not JSON-serialisable: ${errorMessage(err)}` } });
    }
    this.parts.push(json);
    this.bytes += json.length;
    if (this.bytes >= MAX_BATCH_BYTES) this.kick();
    else this.timer ??= setTimeout(() => this.kick(), this.batchMs);
  }

  private kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.sending || this.discarded) return;
    this.sending = this.sendAll().finally(() => {
      this.sending = undefined;
      for (const wake of this.idleWaiters.splice(0)) wake();
    });
  }

  private async sendAll(): Promise<void> {
    while (this.parts.length > 0 && !this.discarded) {
      const batch: string[] = [];
      let bytes = 0;
      while (this.parts.length > 0 && (batch.length === 0 || bytes + this.parts[0]!.length < MAX_BATCH_BYTES)) {
        const part = this.parts.shift()!;
        bytes += part.length;
        batch.push(part);
      }
      this.bytes -= bytes;
      const body = `{"jobId":${JSON.stringify(this.job.id)},"lease":${JSON.stringify(this.job.lease)},"chunks":[${batch.join(",")}]}`;
      try {
        const answer = (await this.post(body)) as { ok?: boolean; reason?: string } | undefined;
        if (answer?.ok === false) throw new Error(answer.reason ?? "stream refused");
      } catch (err) {
        this.discard();
        this.onRefused(err);
        return;
      }
    }
  }

  idle(): Promise<void> {
    if (!this.sending) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Send everything still waiting, then resolve. */
  async drain(): Promise<void> {
    while (!this.discarded && (this.parts.length > 0 || this.sending)) {
      this.kick();
      await this.idle();
    }
  }

  discard(): void {
    this.discarded = true;
    this.parts = [];
    this.bytes = 0;
    if (this.timer) clearTimeout(this.timer);
  }
}
