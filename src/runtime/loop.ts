// The pull loop of one worker (docs/worker-protocol.md): register, then three independent long-lived loops:
//   take      long-polls for up to (concurrency - running) jobs and starts each;
//   events    long-polls the stop channel (cancel, drain);
//   heartbeat renews the leases of held jobs and learns which were lost.
// Results go out in batches (one request carries every result finished meanwhile), on the next take when the
// service records results a take carries (one request per batch of quick jobs instead of two); stream chunks go out per
// job, in order, a few ms after they are yielded. The service being unreachable is never fatal: requests are
// retried with backoff, and a service that forgot this worker gets it registered again.

import { progressJson, type InvokeResult, type JobTrace, type LoadedHandler } from "svc/internal";
import { errorMessage } from "../errors.js";
import { backoffMs, isTransient, sleep, type JobResult, type RegisterResponse, type TakenJob, type WorkerApi } from "./api.js";
import { ChunkSender, MAX_BATCH_BYTES } from "./chunk-sender.js";
import { errorOf, failureLine, serialiseResult } from "./job-result.js";
import { jobScope } from "./logs.js";
import { childTrace, parseTraceparent, runInTrace } from "./trace.js";
import { newSpanId, type SpanExporter } from "./spans.js";
import { ProgressSender } from "./progress.js";
import { recordedAlready, type ResultAnswer } from "../wire/worker.js";

export interface WorkerLoopOptions {
  api: Pick<WorkerApi, "post">;
  handler: LoadedHandler;
  workerId: string;
  concurrency: number;
  /** Runtime messages (not job output): to stderr and the service's log. */
  note(text: string): void;
  takeWaitMs?: number;
  eventsWaitMs?: number;
  /** Chunks yielded within this window go out in one request. */
  streamBatchMs?: number;
  /** On stop(): how long held jobs may still run before they are handed back. */
  stopGraceMs?: number;
  /** Called while the service is unreachable; returning true ends the worker (its parent is gone). */
  isOrphaned?(unreachableForMs: number): boolean;
  /** False for load-balanced workers: they serve HTTP themselves and only register, heartbeat and drain. */
  takeJobs?: boolean;
  /** Extra fields of the register body (a load-balanced worker's `address`). */
  registerExtra?: Record<string, unknown>;
  /** Where the runtime's span of each sampled job's handler run goes, when the service traces (spans.ts). */
  spans?: SpanExporter;
}

interface PendingResult {
  jobId: string;
  lease: string;
  json: string;
  /** Sent before in a request whose answer never came: the service may have recorded it already. */
  resent?: boolean;
}

interface RunningJob {
  job: TakenJob;
  controller: AbortController;
  iterator?: AsyncIterator<unknown>;
  /** Cancelled, timed out, lease lost or handed back: nothing more is reported for it. */
  abandoned: boolean;
  /** Its trace context, when the service traces (the handler's ctx.trace). */
  trace?: JobTrace;
  timer?: NodeJS.Timeout;
  stream?: ChunkSender;
  /** Made at the job's first ctx.progress. */
  progress?: ProgressSender;
  /** The runtime's span of the handler's run (its id and start), when one is sent. */
  span?: { spanId: string; startMs: number };
}
const MAX_DONE_IN_FLIGHT = 2;
/** Consecutive refused takes (about one a second) before the worker gives up. */
const MAX_REFUSALS = 10;

export class WorkerLoop {
  private readonly running = new Map<string, RunningJob>();
  /** Leases to keep renewing: running jobs, finished ones whose result is not yet acknowledged, and timed-out
   *  ones until the service confirms (cancel or lost). */
  private readonly heldLeases = new Map<string, string>(); // lease -> jobId
  private readonly doneQueue: PendingResult[] = [];
  /** Results riding on the take in flight. */
  private carried: PendingResult[] = [];
  private doneInFlight = 0;
  private doneScheduled = false;
  private readonly doneIdleWaiters: Array<() => void> = [];
  private readonly slotWaiters: Array<() => void> = [];
  private draining = false;
  private finished = false;
  private takeAbort = new AbortController();
  private readonly backgroundAbort = new AbortController();
  private registered?: RegisterResponse;
  private registering?: Promise<void>;
  private handingBack?: Promise<void>;
  private lastContact = Date.now();
  private orphaned = false;
  private refused = false;
  private stopRequests = 0;
  private readonly takeWaitMs: number;
  private readonly eventsWaitMs: number;
  private readonly streamBatchMs: number;

  constructor(private readonly options: WorkerLoopOptions) {
    this.takeWaitMs = options.takeWaitMs ?? 20_000;
    this.eventsWaitMs = options.eventsWaitMs ?? 20_000;
    this.streamBatchMs = options.streamBatchMs ?? 5;
  }

  get runningCount(): number {
    return this.running.size;
  }

  /** The AbortSignal of a job this worker runs (for in-process calls made by that job). */
  signalOf(jobId: string): AbortSignal | undefined {
    return this.running.get(jobId)?.controller.signal;
  }

  /** Register, serve until drained (or orphaned), and return. Never throws for network trouble. */
  async run(): Promise<"drained" | "orphaned" | "refused"> {
    try {
      await this.register();
    } catch (err) {
      this.options.note(`the service refused to register this worker: ${errorMessage(err)}`);
      return "refused";
    }
    const background = [this.eventsLoop(), this.heartbeatLoop()];
    await this.takeLoop();
    await this.allJobsSettled();
    await this.handingBack;
    await this.doneIdle();
    this.finished = true;
    this.backgroundAbort.abort();
    await Promise.allSettled(background);
    return this.orphaned ? "orphaned" : this.refused ? "refused" : "drained";
  }

  /** Stop taking, finish held jobs; after `graceMs` hand the rest back. A second call hands back at once. */
  stop(reason: string, graceMs = this.options.stopGraceMs ?? 10_000): void {
    if (this.stopRequests++ > 0) graceMs = 0;
    this.beginDrain(reason);
    const timer = setTimeout(() => {
      this.handingBack = this.handBack();
    }, graceMs);
    timer.unref();
  }

  private beginDrain(reason: string): void {
    if (this.draining) return;
    this.draining = true;
    this.options.note(`draining (${reason}); ${this.running.size} job(s) held`);
    // A take in flight could bring jobs we would have to run: close it. A job the service handed to a closed
    // request goes back to the queue when its lease lapses.
    this.takeAbort.abort();
    this.wakeSlots();
  }

  /** Give back every job still running: release their leases so other workers take them now. */
  private async handBack(): Promise<void> {
    const jobs = [...this.running.values()];
    if (jobs.length === 0) return;
    const leases = jobs.map((j) => j.job.lease);
    for (const entry of jobs) this.abandon(entry, "handed back");
    this.options.note(`handing back ${leases.length} unfinished job(s)`);
    await this.call("release", { workerId: this.options.workerId, leases }, { attempts: 3 }).catch(
      () => undefined /* unreleased leases lapse on the service, which requeues their jobs then */,
    );
  }

  // ---- registration -------------------------------------------------------------------------------------

  private register(): Promise<void> {
    this.registering ??= (async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          this.registered = await this.options.api.post<RegisterResponse>(
            "register",
            {
              workerId: this.options.workerId,
              pid: process.pid,
              concurrency: this.options.concurrency,
              ...this.options.registerExtra,
              // A first registration that hangs (a service that accepts and never answers) must not hold a stop.
            },
            { signal: this.registered ? undefined : this.takeAbort.signal },
          );
          this.lastContact = Date.now();
          return;
        } catch (err) {
          // Told to stop while the service is away: nothing is held yet, so there is nothing to wait for.
          if (this.draining && !this.registered) return;
          if (!isTransient(err)) throw err;
          if (this.checkOrphaned()) return;
          await sleep(backoffMs(attempt), this.draining ? this.backgroundAbort.signal : this.takeAbort.signal);
          if (this.backgroundAbort.signal.aborted || (this.draining && !this.registered)) return;
        }
      }
    })().finally(() => {
      this.registering = undefined;
    });
    return this.registering;
  }

  private checkOrphaned(): boolean {
    if (this.orphaned) return true;
    if (this.options.isOrphaned?.(Date.now() - this.lastContact)) {
      this.orphaned = true;
      this.options.note("the service is gone and so is the parent process: exiting");
      for (const entry of [...this.running.values()]) this.abandon(entry, "orphaned");
      this.doneQueue.length = 0;
      this.carried = [];
      this.beginDrain("orphaned");
      this.backgroundAbort.abort();
      this.resolveDoneIdle();
    }
    return this.orphaned;
  }

  /**
   * POST with retries for transient failures. Gives up
   * (throws) on other 4xx answers, after `attempts`, or once the worker is finished.
   */
  private async call<T>(route: string, body: unknown, opts: { attempts?: number; signal?: AbortSignal; timeoutMs?: number } = {}): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await this.options.api.post<T>(route, body, { signal: opts.signal, timeoutMs: opts.timeoutMs });
        this.lastContact = Date.now();
        return result;
      } catch (err) {
        if (opts.signal?.aborted || this.orphaned) throw err;
        if (!isTransient(err) || this.checkOrphaned()) throw err;
        if (opts.attempts !== undefined && attempt + 1 >= opts.attempts) throw err;
        await sleep(backoffMs(attempt), opts.signal);
      }
    }
  }

  // ---- taking and running jobs ----------------------------------------------------------------------------

  private async takeLoop(): Promise<void> {
    let refusals = 0;
    if (this.options.takeJobs === false) {
      while (!this.draining) await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
      return;
    }
    let started = 0;
    while (!this.draining) {
      if (started > 0 && this.registered?.takeResults) {
        // Jobs that end at once (quick handlers) have their results queued after one turn of the event loop:
        // they ride on this take instead of a done request of their own.
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (this.draining) break;
      }
      started = 0;
      const free = this.options.concurrency - this.running.size;
      if (free <= 0) {
        await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
        continue;
      }
      const carried = this.registered?.takeResults ? this.carry() : [];
      let jobs: TakenJob[];
      try {
        const head = `{"workerId":${JSON.stringify(this.options.workerId)},"max":${free},"waitMs":${this.takeWaitMs}`;
        const body = carried.length > 0 ? `${head},"results":[${carried.map((c) => c.json).join(",")}]}` : `${head}}`;
        const response = await this.call<{ jobs?: TakenJob[]; results?: ResultAnswer[] }>("take", body, {
          signal: this.takeAbort.signal,
          timeoutMs: this.takeWaitMs + 15_000,
        });
        jobs = response.jobs ?? [];
        // A retried take may find its results recorded by its first attempt.
        this.resultsAnswered(carried, response.results, true);
      } catch (err) {
        this.requeueCarried(carried);
        if (this.draining) break;
        this.options.note(`take failed: ${errorMessage(err)}`);
        // Transient trouble is retried inside call(); what reaches here is a refusal (token revoked, endpoint
        // deleted). A worker the service keeps refusing is useless: stop instead of polling forever.
        if (++refusals >= MAX_REFUSALS) {
          this.refused = true;
          this.beginDrain("the service keeps refusing this worker");
          break;
        }
        await sleep(1000, this.takeAbort.signal);
        continue;
      }
      refusals = 0;
      for (const job of jobs) this.start(job);
      started = jobs.length;
    }
  }

  /** Move waiting results (up to a batch) onto the next take. */
  private carry(): PendingResult[] {
    this.carried = this.nextBatch();
    return this.carried;
  }

  /** A take's carried results got no answer (closed, refused): they go out with a done, as maybe recorded. */
  private requeueCarried(carried: PendingResult[]): void {
    if (carried.length === 0) return;
    if (this.carried === carried) this.carried = [];
    this.doneQueue.unshift(...carried.map((c) => ({ ...c, resent: true })));
    this.pumpDone();
  }

  /** The service answered for `sent`: note refusals worth noting and stop renewing those leases. */
  private resultsAnswered(sent: PendingResult[], answers: ResultAnswer[] | undefined, mayBeRetry = false): void {
    if (sent.length === 0) return;
    const resent = new Set(sent.filter((s) => s.resent || mayBeRetry).map((s) => s.jobId));
    for (const r of answers ?? []) {
      if (r.accepted || (resent.has(r.jobId) && recordedAlready(r))) continue;
      this.options.note(`result of job ${r.jobId} not recorded: ${r.reason ?? "refused"}`);
    }
    for (const { lease } of sent) this.heldLeases.delete(lease);
    if (this.carried === sent) {
      this.carried = [];
      if (this.doneQueue.length === 0 && this.doneInFlight === 0) this.resolveDoneIdle();
    }
  }

  private wakeSlots(): void {
    for (const wake of this.slotWaiters.splice(0)) wake();
  }

  private allJobsSettled(): Promise<void> {
    return (async () => {
      while (this.running.size > 0) await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
    })();
  }

  private start(job: TakenJob): void {
    const entry: RunningJob = { job, controller: new AbortController(), abandoned: false, trace: parseTraceparent(job.traceparent) };
    if (entry.trace?.sampled && this.options.spans) entry.span = { spanId: newSpanId(), startMs: Date.now() };
    this.running.set(job.id, entry);
    this.heldLeases.set(job.lease, job.id);
    const timeoutMs = job.executionTimeoutMs ?? this.registered?.endpoint.executionTimeoutMs;
    if (timeoutMs && timeoutMs > 0) {
      entry.timer = setTimeout(() => this.timeOut(entry, timeoutMs), timeoutMs);
    }
    // The job's span is the active one for the user's OpenTelemetry while it runs, its stream's reads included: the
    // runtime's span of the handler's run where one is sent (the user's spans are its children), else the job's run.
    const active = entry.trace && entry.span ? childTrace(entry.trace, entry.span.spanId) : entry.trace;
    void jobScope
      .run(job.id, () => runInTrace(active, () => this.execute(entry)))
      .catch((err: unknown) => {
        this.options.note(`job ${job.id}: ${errorMessage(err)}`);
        this.abandon(entry, "crashed");
      });
  }

  private async execute(entry: RunningJob): Promise<void> {
    const { job } = entry;
    let result: JobResult;
    try {
      const invoked: InvokeResult = this.options.handler.invoke(job.function ?? undefined, job.input, {
        jobId: job.id,
        signal: entry.controller.signal,
        progress: (value) => this.progress(entry, value),
        ...(entry.trace ? { trace: entry.trace } : {}),
        ...(job.s3Config ? { s3Config: job.s3Config } : {}),
      });
      if (invoked.kind === "value") {
        result = { jobId: job.id, lease: job.lease, status: "COMPLETED", output: await invoked.value };
      } else {
        result = { jobId: job.id, lease: job.lease, status: "COMPLETED", output: await this.consumeStream(entry, invoked.stream) };
      }
    } catch (err) {
      result = { jobId: job.id, lease: job.lease, status: "FAILED", error: errorOf(err) };
      // In the job's logs too (`svc logs --job`), where one looks first; the whole stack is in the job record.
      if (!entry.abandoned) this.options.note(`job ${job.id} failed: ${failureLine(result.error!)}`);
    }
    this.endSpan(entry, result);
    if (entry.abandoned) return;
    if (entry.stream) await entry.stream.drain();
    // The last progress reported is recorded before the result (a reader never sees an older one after it).
    if (entry.progress) await entry.progress.flush();
    if (entry.abandoned) return;
    this.release(entry);
    this.queueDone(job.id, job.lease, serialiseResult(result));
  }

  /** The handler's run is over: its span goes to the collector (ERROR when it failed or was abandoned). */
  private endSpan(entry: RunningJob, result: JobResult): void {
    if (!entry.span || !entry.trace) return;
    const { job } = entry;
    const failed = result.status !== "COMPLETED" || entry.abandoned;
    this.options.spans!.add({
      traceId: entry.trace.traceId,
      spanId: entry.span.spanId,
      parentSpanId: entry.trace.spanId,
      name: "job handler",
      startMs: entry.span.startMs,
      endMs: Date.now(),
      ok: !failed,
      ...(failed ? { message: entry.abandoned ? "cancelled, timed out or handed back" : (result.error?.message ?? "failed") } : {}),
      attributes: { "svc.job.id": job.id, "svc.worker.id": this.options.workerId, ...(job.function ? { "svc.function": job.function } : {}) },
    });
  }

  /** A job's ctx.progress: checked at once (a bad value throws in the handler), sent coalesced. */
  private progress(entry: RunningJob, value: unknown): void {
    const json = progressJson(value);
    if (entry.abandoned) return;
    entry.progress ??= new ProgressSender(
      entry.job,
      (body) => this.call("progress", body),
      (reason) => {
        this.options.note(`job ${entry.job.id}: progress not recorded (${reason}); later reports of it are dropped`);
      },
    );
    entry.progress.push(json);
  }

  /** The ctx.progress of a running job (in-process calls of its own endpoint report for it). */
  progressOf(jobId: string): ((value: unknown) => void) | undefined {
    const entry = this.running.get(jobId);
    return entry && ((value) => this.progress(entry, value));
  }

  private async consumeStream(entry: RunningJob, stream: AsyncIterable<unknown>): Promise<unknown[]> {
    const iterator = stream[Symbol.asyncIterator]();
    entry.iterator = iterator;
    const sender = new ChunkSender(
      entry.job,
      this.streamBatchMs,
      (body) => this.call("stream", body),
      (err) => {
        this.options.note(`job ${entry.job.id}: stream chunks refused (${errorMessage(err)}); stopping it`);
        this.abandon(entry, "stream refused");
      },
    );
    entry.stream = sender;
    const outputs: unknown[] = [];
    for (;;) {
      const step = await iterator.next();
      if (entry.abandoned || step.done) break;
      outputs.push(step.value);
      sender.push(step.value);
      if (sender.backlogged) await sender.idle();
    }
    return outputs;
  }

  /** The job leaves the running set (its slot frees); its lease stays held until the result is acknowledged. */
  private release(entry: RunningJob): void {
    if (entry.timer) clearTimeout(entry.timer);
    if (this.running.get(entry.job.id) === entry) this.running.delete(entry.job.id);
    this.wakeSlots();
  }

  /** Stop a job and report nothing more for it. */
  private abandon(entry: RunningJob, reason: string, keepLease = false): void {
    if (entry.abandoned) return;
    entry.abandoned = true;
    entry.controller.abort(new Error(`job ${entry.job.id} ${reason}`));
    // Not awaited: a generator suspended at an await only returns once it reaches its next yield.
    entry.iterator?.return?.().catch(() => undefined /* the job is abandoned: what its generator throws on the way out is nobody's */);
    entry.stream?.discard();
    entry.progress?.discard();
    if (!keepLease) this.heldLeases.delete(entry.job.lease);
    this.release(entry);
  }

  private timeOut(entry: RunningJob, timeoutMs: number): void {
    this.options.note(`job ${entry.job.id} exceeded its execution timeout of ${timeoutMs} ms; stopping it`);
    // The service marks the job TIMED_OUT on its own clock; keep renewing the lease until it confirms with a
    // cancel (or the lease is reported lost), so the job is not requeued as if this worker had died.
    this.abandon(entry, "timed out", true);
    const forget = setTimeout(() => this.heldLeases.delete(entry.job.lease), 60_000);
    forget.unref();
  }

  cancel(jobId: string): void {
    const entry = this.running.get(jobId);
    if (entry) {
      this.options.note(`job ${jobId} cancelled`);
      this.abandon(entry, "cancelled");
    }
    for (const [lease, id] of this.heldLeases) if (id === jobId && !this.isResultPending(lease)) this.heldLeases.delete(lease);
  }

  private isResultPending(lease: string): boolean {
    return this.doneQueue.some((d) => d.lease === lease) || this.carried.some((d) => d.lease === lease);
  }

  // ---- results ------------------------------------------------------------------------------------------

  private queueDone(jobId: string, lease: string, json: string): void {
    this.doneQueue.push({ jobId, lease, json });
    if (this.doneScheduled) return;
    this.doneScheduled = true;
    // Results finished in the same turn of the event loop share one request (or ride on the next take).
    setImmediate(() => {
      this.doneScheduled = false;
      this.pumpDone();
    });
  }

  /** Waiting results, up to one request's worth. */
  private nextBatch(): PendingResult[] {
    const batch: PendingResult[] = [];
    let bytes = 0;
    while (this.doneQueue.length > 0 && (batch.length === 0 || bytes + this.doneQueue[0]!.json.length < MAX_BATCH_BYTES)) {
      const next = this.doneQueue.shift()!;
      bytes += next.json.length;
      batch.push(next);
    }
    return batch;
  }

  private pumpDone(): void {
    while (this.doneInFlight < MAX_DONE_IN_FLIGHT && this.doneQueue.length > 0) {
      const batch = this.nextBatch();
      this.doneInFlight++;
      void this.sendDone(batch).finally(() => {
        this.doneInFlight--;
        for (const { lease } of batch) this.heldLeases.delete(lease);
        if (this.doneQueue.length > 0) this.pumpDone();
        else if (this.doneInFlight === 0 && this.carried.length === 0) this.resolveDoneIdle();
      });
    }
  }

  private async sendDone(batch: PendingResult[]): Promise<void> {
    const body = `{"results":[${batch.map((b) => b.json).join(",")}]}`;
    try {
      const response = await this.call<{ results?: ResultAnswer[] }>("done", body);
      this.resultsAnswered(batch, response.results);
    } catch (err) {
      if (!this.orphaned) this.options.note(`results of ${batch.length} job(s) could not be delivered: ${errorMessage(err)}`);
    }
  }

  private doneIdle(): Promise<void> {
    if (this.doneQueue.length === 0 && this.doneInFlight === 0 && this.carried.length === 0 && !this.doneScheduled) return Promise.resolve();
    return new Promise((resolve) => this.doneIdleWaiters.push(resolve));
  }

  private resolveDoneIdle(): void {
    for (const wake of this.doneIdleWaiters.splice(0)) wake();
  }

  // ---- background loops ---------------------------------------------------------------------------------

  private async eventsLoop(): Promise<void> {
    const signal = this.backgroundAbort.signal;
    while (!signal.aborted) {
      try {
        const events = await this.call<{ cancel?: string[]; drain?: boolean }>(
          "events",
          { workerId: this.options.workerId, waitMs: this.eventsWaitMs },
          { signal, timeoutMs: this.eventsWaitMs + 15_000 },
        );
        for (const jobId of events.cancel ?? []) this.cancel(jobId);
        if (events.drain) this.beginDrain("the service asked");
      } catch (err) {
        if (signal.aborted) return;
        this.options.note(`events failed: ${errorMessage(err)}`);
        await sleep(1000, signal);
      }
    }
  }

  private async heartbeatLoop(): Promise<void> {
    const signal = this.backgroundAbort.signal;
    while (!signal.aborted) {
      await sleep(this.registered?.heartbeatMs ?? 5000, signal);
      if (signal.aborted) return;
      const leases = [...this.heldLeases.keys()];
      const state = this.draining ? "draining" : this.running.size > 0 ? "busy" : "idle";
      try {
        const response = await this.call<{ lost?: string[] }>("heartbeat", { workerId: this.options.workerId, leases, state }, { signal, attempts: 1 });
        for (const lease of response.lost ?? []) {
          const jobId = this.heldLeases.get(lease);
          this.heldLeases.delete(lease);
          const entry = jobId ? this.running.get(jobId) : undefined;
          if (entry && entry.job.lease === lease) {
            this.options.note(`job ${entry.job.id}: lease lost; stopping it`);
            this.abandon(entry, "lease lost");
          }
        }
      } catch {
        // the next beat tries again; the call already retried and noted re-registration
      }
    }
  }
}
