// One job's progress reports (ctx.progress) on their way to the service (`POST /_worker/v1/progress`). Only the
// latest value matters, so reports are coalesced: at most one request per interval per job (a handler may report
// in a tight loop), one in flight at a time, and the value waiting when the job ends goes out before its result
// (flush), so /status never shows older progress than the handler last reported.

import { errorMessage } from "../errors.js";

/** At most one progress request per job within this window. */
export const PROGRESS_INTERVAL_MS = 250;

export interface ProgressTimers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

const realTimers: ProgressTimers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout),
};

export class ProgressSender {
  /** JSON of the latest value not sent yet. */
  private latest: string | undefined;
  private sending: Promise<void> | undefined;
  private timer: unknown;
  private lastSentAt = Number.NEGATIVE_INFINITY;
  private discarded = false;
  private readonly idleWaiters: Array<() => void> = [];

  constructor(
    private readonly job: { id: string; lease: string },
    /** Posts one report; resolves with the service's answer. */
    private readonly post: (body: string) => Promise<unknown>,
    /** The service refused a report or could not be reached: nothing more is sent for this job. */
    private readonly onRefused: (reason: string) => void,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
    private readonly timers: ProgressTimers = realTimers,
  ) {}

  /** The handler reported `json` (already checked: progressJson). */
  push(json: string): void {
    if (this.discarded) return;
    this.latest = json;
    this.schedule();
  }

  private schedule(): void {
    if (this.discarded || this.sending || this.timer !== undefined || this.latest === undefined) return;
    const wait = this.lastSentAt + this.intervalMs - this.timers.now();
    if (wait <= 0) this.send();
    else this.timer = this.timers.setTimeout(() => this.send(), wait);
  }

  private send(): void {
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    if (this.discarded || this.sending || this.latest === undefined) return;
    const body = `{"jobId":${JSON.stringify(this.job.id)},"lease":${JSON.stringify(this.job.lease)},"progress":${this.latest}}`;
    this.latest = undefined;
    this.lastSentAt = this.timers.now();
    this.sending = this.post(body)
      .then(
        (answer) => {
          const refused = (answer as { ok?: boolean; reason?: string } | undefined)?.ok === false;
          if (refused) this.refuse((answer as { reason?: string }).reason ?? "refused");
        },
        (err: unknown) => this.refuse(errorMessage(err)),
      )
      .finally(() => {
        this.sending = undefined;
        for (const wake of this.idleWaiters.splice(0)) wake();
        this.schedule();
      });
  }

  private refuse(reason: string): void {
    if (this.discarded) return;
    this.discard();
    this.onRefused(reason);
  }

  private idle(): Promise<void> {
    if (!this.sending) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Send the value still waiting now (not after the interval), then resolve once nothing is in flight. */
  async flush(): Promise<void> {
    while (!this.discarded && (this.latest !== undefined || this.sending)) {
      if (!this.sending) this.send();
      await this.idle();
    }
  }

  /** The job ended without a result to report (cancelled, lease lost): drop what waits. */
  discard(): void {
    this.discarded = true;
    this.latest = undefined;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
  }
}
