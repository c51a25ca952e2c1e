import { errorMessage } from "./errors.js";
// What a queue function's handler gets besides its input (the second argument): its job's id, the signal that
// stops it, and `progress(value)`; and the error that fails a job for good. Bundled into every worker's handler:
// nothing here does I/O.

/** The largest progress value, as JSON text in UTF-8 (the service refuses larger ones too). */
export const MAX_PROGRESS_BYTES = 64 * 1024;

/** The second argument of a queue function: `async function render(input, ctx: JobContext)`. */
export interface JobContext {
  jobId: string;
  /** Aborted when the job is cancelled, times out, or its ttl runs out. */
  signal: AbortSignal;
  /**
   * Report how far the job got: any JSON value of at most 64 KiB. The latest value wins; `/status` shows it as the
   * job's `output` while it runs. Cheap to call often: at most one report per job goes out every 250 ms, and the
   * last one always before the job's result.
   */
  progress(value: unknown): void;
  /**
   * The job's trace, when the service sends traces (docs/observability.md): the W3C trace context of the job's
   * "job run" span. Spans the handler makes with this as their parent join the job's trace. A handler whose code
   * registers the OpenTelemetry API's context manager (an SDK's `register()`) need not use it: the runtime makes
   * this span the active one while the handler runs, so `trace.getActiveSpan()` and new spans follow it.
   */
  trace?: JobTrace;
  /**
   * The bucket the job's submission named (`s3Config`, as the provider's clients send it): svc's S3 API, with the
   * network volume as the bucket and a key of this worker's own on it (revoked when the worker ends). Absent when
   * the submission named none (docs/volumes.md, "A job's s3Config").
   */
  s3Config?: JobS3Config;
}

/** Where a job's handler may upload: the provider's `s3Config` shape, pointing at svc's S3 API. */
export interface JobS3Config {
  accessId: string;
  accessSecret: string;
  /** The network volume's id: the bucket of svc's S3 API. */
  bucketName: string;
  /** svc's S3 API (path-style: the bucket is the first part of the path). */
  endpointUrl: string;
}

/** A job's W3C trace context: the `traceparent` header's text, and its parts. */
export interface JobTrace {
  /** `00-<traceId>-<spanId>-<flags>`: pass it on as the `traceparent` header, or to `propagation.extract`. */
  traceparent: string;
  traceId: string;
  spanId: string;
  /** Whether the service samples this trace (its spans are sent). */
  sampled: boolean;
}

/**
 * Throw it (or any error with `retryable: false`) to fail the job at once, with no automatic retry: the input is
 * bad, and running it again would fail the same way.
 */
export class NonRetryableError extends Error {
  /** What the worker runtime reads (a handler's bundle has its own copy of this class: instanceof cannot tell). */
  readonly retryable = false;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "NonRetryableError";
  }
}

/** Thrown by `ctx.progress` for a value that is not JSON or is larger than MAX_PROGRESS_BYTES. */
export class ProgressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProgressError";
  }
}

/** The progress value as the JSON text sent, or a ProgressError saying why it cannot be. Pure. */
export function progressJson(value: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw new ProgressError(`ctx.progress needs a JSON value: ${errorMessage(err)}`);
  }
  if (json === undefined) throw new ProgressError(`ctx.progress needs a JSON value, not ${typeof value}`);
  const bytes = Buffer.byteLength(json);
  if (bytes > MAX_PROGRESS_BYTES) {
    throw new ProgressError(
      `ctx.progress got ${bytes} bytes of JSON; at most ${MAX_PROGRESS_BYTES} are kept (report a summary: a step, a percentage, a short message)`,
    );
  }
  return json;
}
